"""A run's log, schema gradtrace.log/1: each record written as one line and read back, whole,
growing or cut by a kill at any byte; `steps LOG` and `show LOG` read it as a saved trace."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import SCENARIOS, as_read, invoke, show_json

from gradtrace.errors import RunLogError
from gradtrace.model.codec import trace_from_dict
from gradtrace.model.records import Finding, LeafStep, Steps
from gradtrace.model.run_log import (
    SCHEMA,
    LogEnd,
    LogFinding,
    LogHeader,
    LogLeaves,
    LogRecord,
    LogSteps,
    log_line,
    read_log,
    starts_run_log,
)

NAN, INF = float("nan"), float("inf")
HEADER = LogHeader("9.9", "2.13.0", "train.py", ("--epochs", "2", "é"), "2026-11-28T05:00:00+00:00")
NAN_FOUND = Finding("nan-gradient", "error", "fc.weight.grad holds NaN after pass 2",
                    tensor="fc.weight", node="n7", hint="look at pass 2's loss", line=12,
                    file="train.py")
# two passes of one column, then a second column and a pass with a scaled loss
RECORDS: tuple[LogRecord, ...] = (
    HEADER,
    LogLeaves(0, ("fc.weight",), ("fc",)),
    LogSteps(1, (1.5, NAN), (0, 1), ((LeafStep(1.25, 0.5, True, True),),
                                     (LeafStep(INF, NAN, False, True),))),
    LogFinding(2, NAN_FOUND),
    LogLeaves(1, ("fc.bias",), (None,)),
    LogSteps(3, (0.75,), (1,), ((LeafStep(1.0, 0.5, True, True), LeafStep(-0.0, 0.0, True,
                                                                             False)),),
             loss_scale=(65536.0,), loss_divisor=(4.0,)),
    LogFinding(None, Finding("grad-never-reset", "warning", "fc.bias.grad is never reset")),
    LogEnd(3, 2, "finished"),
)
STEPS = Steps(
    leaves=("fc.weight", "fc.bias"), modules=("fc", None), loss=(1.5, NAN, 0.75),
    optimizer_steps=(0, 1, 1),
    grads=((LeafStep(1.25, 0.5, True, True), None), (LeafStep(INF, NAN, False, True), None),
           (LeafStep(1.0, 0.5, True, True), LeafStep(-0.0, 0.0, True, False))),
    optimizer_steps_after=2, loss_scale=(None, None, 65536.0), loss_divisor=(None, None, 4.0))


def sample() -> str:
    return "".join(map(log_line, RECORDS))


def write(tmp_path: Path, text: str | bytes, name: str = "run.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def line(data: dict[str, Any]) -> str:
    return json.dumps(data) + "\n"


def test_every_kind_round_trips() -> None:
    text = sample()
    assert text.isascii() and text.count("\n") == len(RECORDS)
    assert '"loss": [1.5, "nan"]' in text and '["inf", "nan", false, true]' in text
    log = read_log(text)
    assert log.header == HEADER
    assert repr(log.steps) == repr(STEPS)  # repr: NaN is not == itself
    assert log.findings == (LogFinding(2, NAN_FOUND), RECORDS[6])
    assert log.end == RECORDS[-1] and log.ended and log.outcome == "finished"
    assert (log.complete_lines, log.torn) == (len(RECORDS), False)
    # bytes, and lines as a file gives them, read the same
    for source in (text.encode(), iter(text.splitlines(keepends=True))):
        assert repr(read_log(source)) == repr(log)


def test_the_trace_of_a_log_holds_its_steps_and_findings() -> None:
    trace = read_log(sample()).trace()
    assert (trace.scenario, trace.gradtrace_version, trace.torch_version) == \
        ("train.py", "9.9", "2.13.0")
    assert repr(trace.steps) == repr(STEPS)
    assert not trace.nodes and len(trace.passes) == 3 and all(p.light for p in trace.passes)
    assert trace.findings[0].node is None  # no graph in a log for it to point into
    assert trace.findings[0].line == 12 and trace.findings[1].code == "grad-never-reset"


def rows_in(text: bytes) -> int:
    """The step rows of a log's complete lines, counted from their JSON directly."""
    lines = text[:text.rfind(b"\n") + 1].splitlines()
    return sum(len(d["loss"]) for d in map(json.loads, lines) if d["kind"] == "steps")


def test_a_log_cut_at_every_byte_reads_its_complete_lines() -> None:
    data = sample().encode()
    for cut in range(len(data) + 1):
        log = read_log(data[:cut])
        whole = data[:cut].count(b"\n")
        assert log.complete_lines == whole, cut
        assert log.torn == (cut > 0 and data[cut - 1:cut] != b"\n"), cut
        assert (0 if log.steps is None else len(log.steps.loss)) == rows_in(data[:cut]), cut
        assert (log.header is None) == (whole == 0) and log.ended == (cut == len(data))
        assert len(log.findings) == sum(b'"finding"' in x for x in data[:cut].splitlines(True)
                                        if x.endswith(b"\n"))


def test_a_cut_log_is_shown_by_steps(tmp_path: Path) -> None:
    text = sample()
    cut = text.index('"grad-never-reset"')  # killed while writing the second finding
    result = invoke("steps", write(tmp_path, text[:cut]))
    assert result.exit_code == 0, result.stderr
    assert "3 passes, 2 optimizer steps" in result.stdout  # no end line: none after the last
    shown = invoke("show", write(tmp_path, text[:cut]))
    assert "no end line: the run goes on, or was killed; its last line, cut short, is " \
        "skipped" in shown.stdout
    assert "never reset" not in shown.stdout and "holds NaN after pass 2" in shown.stdout


def test_an_invalid_last_line_is_a_cut_one() -> None:
    log = read_log(sample() + "\0\0\0\n")  # a crash's zeroed block
    assert log.torn and log.ended and log.complete_lines == len(RECORDS)


def test_an_invalid_middle_line_is_exit_2_naming_its_line(tmp_path: Path) -> None:
    lines = sample().splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"
    path = write(tmp_path, "".join(lines))
    result = invoke("steps", path)
    assert result.exit_code == 2
    assert f"error: {path}: line 3: not a line of JSON" in result.stderr
    assert "hint: a run log is what `gradtrace watch --log FILE` writes" in result.stderr


BAD_STEPS = {"kind": "steps", "first": 1, "loss": [1.0], "optimizer_steps": [0],
             "grads": [[[1.0, 1.0, True, True]]]}


@pytest.mark.parametrize(("bad", "problem"), [
    ({**BAD_STEPS, "grads": [[["x", 1.0, True, True]]]},
     "invalid steps line: grads[0][0][0]: expected a number, found 'x'"),
    ({**BAD_STEPS, "grads": [[[1.0, 1.0, True, True], None]]},
     "invalid steps line: grads[0]: has more items than the 1 leaves"),
    ({**BAD_STEPS, "first": 2}, "invalid steps line: first: expected 1 (the pass after"),
    ({**BAD_STEPS, "first": True}, "invalid steps line: first: expected 1"),
    ({**BAD_STEPS, "optimizer_steps": [-1]}, "optimizer_steps[0]: expected a whole number"),
    ({**BAD_STEPS, "loss": [1.0, 2.0]}, "optimizer_steps: has 1 rows for 2 passes"),
    ({**BAD_STEPS, "loss_scale": "big"}, "loss_scale: expected a list, found str"),
    ({key: v for key, v in BAD_STEPS.items() if key != "grads"}, "grads: missing"),
    ({"kind": "leaves", "first": 1, "names": ["b"]},
     "first: expected 0 (the columns so far), found 1"),
    ({"kind": "leaves", "first": 0, "names": "w"}, "names: expected a list, found 'w'"),
    ({"kind": "leaves", "first": 0, "names": ["w"], "modules": [None, None]},
     "modules: has 2 items for 1 leaves"),
    ({"kind": "finding", "step": 0, "code": "c", "severity": "info", "message": "m"},
     "step: expected a pass number (1 or more) or null, found 0"),
    ({"kind": "finding", "step": None, "code": "c", "severity": "fatal", "message": "m"},
     "severity: expected one of error, warning, info, found 'fatal'"),
    ({"kind": "finding", "step": None, "code": "c", "severity": "info"}, "message: missing"),
    ({"kind": "finding", "code": "c", "severity": "info", "message": "m", "node": [1]},
     "node: expected a string, found list"),
    ({"kind": "end", "steps": 1, "optimizer_steps_after": 0, "outcome": "won"},
     "outcome: expected one of finished, stopped, failed, found 'won'"),
    ({"kind": "end", "steps": "1", "optimizer_steps_after": 0, "outcome": "failed"},
     "steps: expected a whole number ≥ 0, found '1'"),
    ({"kind": 3}, 'expected an object with a "kind"'),
    ([1, 2], 'expected an object with a "kind"'),
    ({"kind": "header", "schema": SCHEMA}, "a second header"),
])
def test_a_wrong_record_is_an_error_naming_its_line(bad: Any, problem: str) -> None:
    leaves = log_line(LogLeaves(0, ("w",), (None,)))
    text = log_line(HEADER) + (leaves if "leaves" not in str(bad) else "") + line(bad)
    number = text.count("\n")
    with pytest.raises(RunLogError) as caught:
        read_log(text + log_line(LogEnd(0, 0, "failed")))
    assert caught.value.message.startswith(f"line {number}: "), caught.value.message
    assert problem in caught.value.message


@pytest.mark.parametrize("bad", [
    '{"kind": "steps", "first": ' + "9" * 5000 + "}\n",  # beyond int()'s digits
    "[" * 100_000 + "]" * 100_000 + "\n",  # deeper than the parser goes
    "\n",
    '{"kind": "end", "steps": 1, "optimizer_steps_after": 0, "outcome": "failed"}\xff\n',
])
def test_a_line_that_is_not_json_is_an_error_in_the_middle(bad: str) -> None:
    data = (log_line(HEADER) + bad).encode("utf-8", "surrogateescape").replace(
        "\xff".encode(), b"\xff")
    with pytest.raises(RunLogError, match="^line 2: not a line of JSON$"):
        read_log(data + log_line(LogEnd(0, 0, "failed")).encode())
    assert read_log(data).torn  # last: a cut line


def test_huge_and_non_finite_numbers_are_numbers() -> None:
    text = log_line(HEADER) + log_line(LogLeaves(0, ("w",), (None,))) + line(
        {**BAD_STEPS, "loss": [1e999], "grads": [[[1e999, "-inf", False, True]]]})
    steps = read_log(text).steps
    assert steps is not None and steps.loss == (INF,) and steps.grads[0][0] == \
        LeafStep(INF, -INF, False, True)


def test_records_after_the_end_are_refused_but_unknown_kinds_skipped() -> None:
    text = sample()
    with pytest.raises(RunLogError, match=f"^line {len(RECORDS) + 1}: a finding line after "):
        read_log(text + log_line(RECORDS[3]))
    lines = text.splitlines(keepends=True)
    lines[2:2] = [line({"kind": "heartbeat", "rate": [1, 2]}), line({"kind": "later"})]
    log = read_log("".join(lines) + line({"kind": "footer"}))
    assert repr(log.steps) == repr(STEPS) and log.complete_lines == len(RECORDS) + 3


def test_the_first_line_must_be_a_header_of_schema_1() -> None:
    with pytest.raises(RunLogError, match="^line 1: not a gradtrace run log"):
        read_log(log_line(LogEnd(0, 0, "finished")))
    newer = line({"kind": "header", "schema": "gradtrace.log/2"})
    with pytest.raises(RunLogError, match="^line 1: the log's schema is 'gradtrace.log/2'; "
                       "this gradtrace reads gradtrace.log/1$"):
        read_log(newer)
    with pytest.raises(RunLogError, match="schema: expected gradtrace.log/1, found 'other/1'"):
        read_log(line({"kind": "header", "schema": "other/1"}))
    minor = json.loads(log_line(HEADER)) | {"schema": "gradtrace.log/1.4"}
    assert read_log(line(minor)).header == HEADER  # a minor version adds, and is read
    with pytest.raises(RunLogError, match="argv: expected a list of strings"):
        read_log(line(minor | {"argv": "--epochs 2"}))
    assert starts_run_log(newer) and starts_run_log(log_line(HEADER).encode())
    for other in ("import torch\n", '{"kind": "steps"}\n', b"\xff\n", '{"schema": 1}', "[[["):
        assert not starts_run_log(other)


def test_steps_and_show_print_the_logs_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, sample(), "run.txt")  # a log is known by its header, not its name
    result = invoke("steps", path, "--all")
    assert result.exit_code == 0, result.stderr
    rows = {row.split()[0]: row.split()[-4:] for row in result.stdout.splitlines()[3:6]}
    assert rows == {"loss": ["1.5", "0.75", "0.75", "1.5"],
                    "fc.weight": ["1.25", "1", "1", "1.25"], "fc.bias": ["-0", "-0", "-0", "-0"]}
    assert "3 passes, 4 optimizer steps" in result.stdout
    assert "! not finite: fc.weight from pass 2" in result.stdout
    shown = invoke("show", path)
    assert shown.exit_code == 0, shown.stderr
    first, *_ = shown.stdout.splitlines()
    assert first == "run log train.py --epochs 2 'é'  ·  started 2026-11-28T05:00:00+00:00  ·  " \
        "finished"
    assert "error [nan-gradient] fc.weight.grad holds NaN after pass 2" in shown.stdout
    assert "warning [grad-never-reset] fc.bias.grad is never reset" in shown.stdout
    assert "autograd graph" not in shown.stdout and "tensors" not in shown.stdout
    assert "3 passes, 4 optimizer steps" in shown.stdout


def test_show_writes_a_log_as_a_trace_that_reads_back(tmp_path: Path) -> None:
    path = write(tmp_path, sample(), "run.json")  # even named as a trace, it is a log
    result = invoke("show", path, "--json")
    assert result.exit_code == 0, result.stderr
    trace = trace_from_dict(as_read(result.stdout))
    assert repr(trace.steps) == repr(STEPS) and len(trace.passes) == 3
    saved = write(tmp_path, result.stdout, "trace.json")
    assert invoke("steps", saved).stdout == invoke("steps", path).stdout


def test_a_log_refuses_run_options_and_a_picture(tmp_path: Path) -> None:
    path = write(tmp_path, sample())
    passes = invoke("steps", path, "--passes", "3")
    assert passes.exit_code == 2 and "a saved trace is read, not run again" in passes.stderr
    assert invoke("dot", path).exit_code == 2
    header_only = invoke("show", write(tmp_path, log_line(HEADER).rstrip("\n")))
    assert header_only.exit_code == 2 and "its header line is cut short" in header_only.stderr


def log_of(steps: Steps, findings: tuple[Finding, ...]) -> str:
    """A log that a run with these steps and findings could have written, in batches of 7."""
    records: list[LogRecord] = [HEADER, LogLeaves(0, steps.leaves, steps.modules)]
    for first in range(0, len(steps.loss), 7):
        rows = slice(first, first + 7)
        records.append(LogSteps(first + 1, steps.loss[rows], steps.optimizer_steps[rows],
                                steps.grads[rows], steps.loss_scale[rows],
                                steps.loss_divisor[rows]))
    records += [LogFinding(None, f) for f in findings]
    records.append(LogEnd(len(steps.loss), steps.optimizer_steps_after, "finished"))
    return "".join(map(log_line, records))


def test_a_real_loops_log_shows_what_its_trace_does(tmp_path: Path) -> None:
    data = show_json(SCENARIOS / "loops" / "mlp_30_steps.py")
    trace = trace_from_dict(data)
    assert trace.steps is not None and len(trace.steps.loss) == 30
    saved = write(tmp_path, json.dumps(data), "trace.json")
    log = write(tmp_path, log_of(trace.steps, trace.findings))
    # which leaves an optimizer holds is the run's judgement, told by its findings, not logged
    assert repr(read_log(log.read_text()).steps) == repr(replace(trace.steps, optimized=(),
                                                                 scale_free=()))
    for args in ((), ("--by-module", "--all")):
        from_log, from_trace = invoke("steps", log, *args), invoke("steps", saved, *args)
        assert from_log.exit_code == from_trace.exit_code == 0, from_log.stderr
        assert from_log.stdout == from_trace.stdout
    assert f"{trace.steps.loss[0]:.4g}"[:4] in from_log.stdout
    assert "30 passes" in from_log.stdout
