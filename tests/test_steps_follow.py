"""`gradtrace steps LOG --follow`: a log read as a run writes it (a thread or a process appends
real lines to a real file), shown as it grows, until its end line or Ctrl-C."""

from __future__ import annotations

import select
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import invoke
from plain_python import start_gradtrace

from gradtrace.errors import RunLogError
from gradtrace.model.records import Finding, LeafStep
from gradtrace.model.run_log import (
    GrowingLog,
    LogEnd,
    LogFinding,
    LogHeader,
    LogLeaves,
    LogRecord,
    LogSteps,
    log_line,
    read_log,
)

EXPLODING = Finding("exploding-gradient", "warning",
                    "fc.weight's gradient norm grew from 1.5 to 96 over passes 1 to 3")
# a run of 4 passes over two columns: a finding at pass 3, the end last
RECORDS: tuple[LogRecord, ...] = (
    LogHeader("9.9", "2.13.0", "train.py", (), "2026-11-28T05:00:00+00:00"),
    LogLeaves(0, ("fc.weight", "fc.bias"), ("fc", "fc")),
    LogSteps(1, (2.5, 2.25), (0, 1), ((LeafStep(1.5, 0.5, True, True),
                                       LeafStep(0.25, 0.25, True, True)),
                                      (LeafStep(12.0, 3.0, True, True),
                                       LeafStep(0.5, 0.5, True, True)))),
    LogSteps(3, (2.0, 1.75), (1, 1), ((LeafStep(96.0, 24.0, True, True),
                                       LeafStep(0.75, 0.75, True, True)),
                                      (LeafStep(48.0, 12.0, True, True),
                                       LeafStep(1.0, 1.0, True, True)))),
    LogFinding(3, EXPLODING),
    LogEnd(4, 1, "finished"),
)
LINES = [log_line(r) for r in RECORDS]


def append_slowly(path: Path, lines: list[str], seconds: float = 2.0) -> threading.Thread:
    """A thread that creates path after a moment and appends lines over ~seconds, each cut
    in two writes (a reader sees a torn last line between them)."""

    def run() -> None:
        pause = seconds / (2 * len(lines) + 1)
        time.sleep(pause)
        with path.open("ab", buffering=0) as file:
            for text in lines:
                half = len(text) // 2
                file.write(text[:half].encode())
                time.sleep(pause)
                file.write(text[half:].encode())
                time.sleep(pause)

    writer = threading.Thread(target=run, daemon=True)
    writer.start()
    return writer


def test_growing_log_takes_each_complete_line_once_as_read_log_reads_the_whole() -> None:
    data = "".join(LINES).encode()
    growing = GrowingLog()
    taken = [growing.feed(data[at:at + 37]) for at in range(0, len(data), 37)]
    assert sum(taken) == len(LINES) and growing.ended
    assert growing.log() == read_log(data)
    partial = GrowingLog()
    assert partial.feed(data[:len(LINES[0]) + 5]) == 1  # the header, and 5 bytes waiting
    log = partial.log()
    assert (log.header, log.steps, log.torn, log.ended) == (RECORDS[0], None, True, False)
    assert partial.feed(data[len(LINES[0]) + 5:len(LINES[0]) + len(LINES[1])]) == 1
    assert partial.log().torn is False and not partial.ended


def test_growing_log_names_an_invalid_line() -> None:
    growing = GrowingLog()
    growing.feed((LINES[0] + LINES[1]).encode())
    with pytest.raises(RunLogError, match="line 3: not a line of JSON"):
        growing.feed(b"{oops\n")


def test_follow_reads_a_growing_log_to_its_end_line(tmp_path: Path) -> None:
    """The log appears after the command starts and grows over ~2 s; the command returns
    after the end line with the final numbers, as `steps LOG` prints them."""
    log = tmp_path / "run.jsonl"
    writer = append_slowly(log, LINES)
    started = time.monotonic()
    followed = invoke("steps", log, "--follow")
    writer.join()
    assert followed.exit_code == 0, followed.output
    assert time.monotonic() - started >= 1.5  # it waited for the lines, not a cut log
    # not on a terminal: each finding as it arrives, then the view of the whole run
    lines = followed.stdout.splitlines()
    assert lines[0] == ("step 3: warning [exploding-gradient] fc.weight's gradient norm grew "
                        "from 1.5 to 96 over passes 1 to 3")
    view = "\n".join(lines[1:]) + "\n"
    assert view == invoke("steps", log).stdout
    assert "4 passes, 4 optimizer steps" in view
    assert [row.split()[-4:] for row in lines if row.startswith(("loss", "fc."))] == [
        ["2.5", "1.75", "1.75", "2.5"], ["1.5", "48", "1.5", "96"],
        ["0.25", "1", "0.25", "1"]]


def test_a_log_not_yet_written_is_waited_for_and_said_so_once(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    proc = start_gradtrace("steps", log, "--follow", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 60)
    assert ready, "the follower said nothing of the missing log"
    said = proc.stderr.readline().decode()
    assert said == f"waiting for {log} to appear: no run has written it yet\n"
    append_slowly(log, LINES, seconds=1.0).join()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.decode() == ""  # said once
    assert "4 passes, 4 optimizer steps" in out.decode()


def test_follow_on_a_terminal_ends_with_the_view_steps_prints(tmp_path: Path) -> None:
    """rich's Live redraws in place while it grows, and is cleared for the final view."""
    log = tmp_path / "run.jsonl"
    writer = append_slowly(log, LINES, seconds=1.0)
    followed = invoke("steps", log, "--follow", env={"TTY_COMPATIBLE": "1",
                                                     "TTY_INTERACTIVE": "1",
                                                     "COLUMNS": "100"})
    writer.join()
    assert followed.exit_code == 0, followed.output
    assert "following " in followed.stdout and "Ctrl-C stops" in followed.stdout
    final = invoke("steps", log, env={"TTY_COMPATIBLE": "1", "COLUMNS": "100"}).stdout
    assert followed.stdout.endswith(final)


def test_ctrl_c_stops_following_a_log_that_never_ends(tmp_path: Path) -> None:
    """A real process following a run that stalls: Ctrl-C prints the view of what was read
    and exits 130, no traceback."""
    log = tmp_path / "run.jsonl"
    log.write_text("".join(LINES[:-1]))  # no end line
    proc = start_gradtrace("steps", log, "--follow", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, sigint=True)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, "no finding line from the follower"
    first = proc.stdout.readline().decode()
    assert first.startswith("step 3: warning [exploding-gradient]")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err.decode()
    assert err.decode().strip().endswith(
        f"error: interrupted following {log}: 4 steps read, no end line yet")
    assert "4 passes, 3 optimizer steps" in out.decode()  # none after: no end line


def test_follow_reads_only_logs(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text('{"schema": "gradtrace.trace/1", "nodes": []}\n')
    refused = invoke("steps", trace, "--follow")
    assert refused.exit_code == 2
    assert f"error: --follow reads a run log as a run writes it; {trace} is not one" \
        in refused.stderr
    assert f"gradtrace steps {trace}" in refused.stderr
    script = invoke("steps", "example:loops/mlp_30_steps", "--follow")
    assert script.exit_code == 2 and "is a script" in script.stderr
    assert "gradtrace watch example:loops/mlp_30_steps --log run.jsonl" in script.stderr
    log = tmp_path / "run.jsonl"
    log.write_text("".join(LINES))
    given = invoke("steps", log, "--follow", "--passes", "3")
    assert given.exit_code == 2 and "--passes apply to a script" in given.stderr


def test_a_log_emptied_while_followed_is_a_new_runs(tmp_path: Path) -> None:
    """watch --log writes a log over from its start: the follower says so (exit 2)."""
    log = tmp_path / "run.jsonl"
    log.write_text("".join(LINES[:3]))

    def write_over() -> None:
        time.sleep(1.0)
        log.write_text(LINES[0][:10])  # a new run's header, cut short

    writer = threading.Thread(target=write_over, daemon=True)
    writer.start()
    followed = invoke("steps", log, "--follow")
    writer.join()
    assert followed.exit_code == 2
    assert f"error: {log} was emptied: a new run is writing it" in followed.stderr
