"""`gradtrace watch`: run a scenario as `show` does, telling each finding as it fires (with
its step) and a heartbeat on stderr (on a terminal, a live panel), appending steps and
findings to a run log (and their norms to TensorBoard), and ending the run at a finding asked
for; then the report `show` prints."""

from __future__ import annotations

import importlib.metadata
import io
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

import typer
from rich.console import Console

from ..capture.script.ranks import launched
from ..errors import GradtraceError
from ..findings.live import LiveFindings, stop_codes
from ..model.run_log import Outcome
from .core import DEBUG, FAIL_ON, SCRIPT_ARGS, STRICT, TIMEOUT, ExitCode, app
from .inputs import is_run_log
from .live_report import COVERS, COVERS_SCALARS, LivePanel, LiveReport
from .options import RunOptions
from .ranked import rank_file
from .scalars import open_scalars
from .show import ShowOptions, show_trace


@dataclass(frozen=True)
class WatchOptions(RunOptions):
    """What `gradtrace watch` was asked."""

    scenario: str
    log: Path | None
    stop_on: str | None
    heartbeat: float
    strict: bool
    tensorboard: Path | None = None


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace watch example:loops/mlp_30_steps --log run.jsonl\n\n"
    "  gradtrace steps run.jsonl --follow\n\n"
    "  gradtrace watch example:bugs/nan_masked_mean --stop-on nan-value -o nan.json\n\n"
    "  gradtrace watch example:loops/mlp_30_steps --tensorboard runs/mlp\n\n"
    "Exit codes: 0 the run ended; 1 --stop-on stopped it, or a --strict or --fail-on "
    "finding appeared; 2 bad usage, or a scenario that cannot run.",
)
def watch(
    scenario: str = typer.Argument(..., help="A scenario .py file, FILE::FUNC or a bundled "
                                   "example:NAME.", metavar="SCENARIO"),
    script_args: list[str] | None = SCRIPT_ARGS,
    log: Path | None = typer.Option(None, "--log", "--run-log", metavar="FILE",
                                    help="Write the run's steps and findings to FILE as JSON "
                                    "Lines while it runs: a run killed at any moment leaves "
                                    "every complete line valid. Read it with `gradtrace "
                                    "steps FILE` or `gradtrace show FILE`. Under torchrun "
                                    "(whose own options take --log: write --run-log) put "
                                    "{rank} in FILE: a log per rank."),
    stop_on: str | None = typer.Option(None, "--stop-on", metavar="CODE[,CODE]",
                                       help="End the run at its next backward pass once a "
                                       "finding with one of these codes fires, show it, "
                                       "and exit 1."),
    heartbeat: float = typer.Option(5.0, "--heartbeat", min=0.1, metavar="SECONDS",
                                    help="Print the step, loss and global gradient norm on "
                                    "stderr this often; on a terminal a panel shows them "
                                    "instead, redrawn a few times a second."),
    tensorboard: Path | None = typer.Option(None, "--tensorboard", metavar="DIR",
                                            help="Write each step's loss and gradient norms "
                                            "(global, and per module) as TensorBoard scalars "
                                            "to DIR as the run goes (needs the tensorboard "
                                            "package). NaN and inf are written as they "
                                            "are. Under torchrun put {rank} in DIR."),
    out: Path | None = typer.Option(None, "-o", "--output", metavar="FILE",
                                    help="Write the trace (a .json FILE: as --json) or the "
                                    "report to this file at the end."),
    timeout: float | None = TIMEOUT,
    strict: bool = STRICT,
    fail_on: str | None = FAIL_ON,
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """Run a scenario and tell its findings as they fire, then show it."""
    watch_run(WatchOptions(script_args, None, out, False, timeout, "all", False, fail_on,
                           scenario, log, stop_on, heartbeat, strict, tensorboard))


def watch_run(asked: WatchOptions) -> None:
    """Run the scenario with a live report, end its log, show it; exit 1 when --stop-on
    stopped it."""
    if asked.scenario.endswith(".json") or is_run_log(asked.scenario):
        raise GradtraceError(f"watch runs a script: {asked.scenario} is a saved trace or a "
                             "run log", f"read it with `gradtrace show {asked.scenario}` or "
                             f"`gradtrace steps {asked.scenario}`")
    stop_on = stop_codes(asked.stop_on, "--stop-on")
    # a log per rank under torchrun: reducing norms across ranks would synchronise them
    asked = replace(asked, log=rank_file(asked.log, "--log"),
                    tensorboard=rank_file(asked.tensorboard, "--tensorboard"))
    _check_log(asked)
    scalars = open_scalars(asked.tensorboard)  # before the script runs: its errors too
    ranks = launched()
    said_as = "" if ranks is None else f"rank {ranks.rank}: "
    # stderr as it is now: while the script runs, descriptors 1 and 2 are its captured output
    terminal = os.fdopen(os.dup(2), "w", encoding=sys.stderr.encoding or "utf-8",
                         errors="replace")

    # the command's stdout: the script's own output is shown there as it prints (and kept)
    script_out = _own_stdout()

    def say(line: str) -> None:
        terminal.write(said_as + line + "\n")
        terminal.flush()

    # as python buffers them: stderr and a terminal's stdout a line at a time, a pipe's or
    # a file's stdout in blocks (a write per line of a big print costs ~6 µs), unless flushed
    by_line = script_out is not None and script_out.isatty()

    def echo(text: str, to_stderr: bool) -> None:
        stream = terminal if to_stderr else script_out
        if stream is None:
            return
        stream.write(text)  # "": the script flushed it
        if not text or (to_stderr or by_line) and ("\n" in text or "\r" in text):
            stream.flush()

    # a panel only for one process on a terminal: ranks would draw theirs over each other
    panel = LivePanel(terminal, covers=COVERS if scalars is None else COVERS_SCALARS) \
        if ranks is None and _is_terminal(terminal) else None
    live = LiveFindings(asked.scenario, list(asked.script_args or []),
                        importlib.metadata.version("torch"), stop_on)
    report = LiveReport(live, asked.log, asked.heartbeat, say if panel is None else panel.say,
                        panel=panel, scalars=scalars, echo=echo)
    outcome: Outcome = "failed"
    try:
        if panel is not None:
            panel.start()
        show_trace(_shown(asked), listener=report)
        outcome = "finished"
    except typer.Exit as exit_:
        outcome = "finished" if exit_.exit_code == ExitCode.FAILED else "failed"
        raise
    finally:
        if panel is not None:  # before the findings the run's end adds: lines, not redraws
            panel.close()
        report.end(outcome)
        terminal.close()
        if script_out is not None:
            script_out.close()
    if live.stopped is not None:
        raise typer.Exit(ExitCode.FAILED)


def _own_stdout() -> TextIO | None:
    """A stream of its own on the command's stdout, which the script's thread may write to
    (None: stdout is no file, as in a test's runner)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    sys.stdout.flush()
    return os.fdopen(os.dup(fd), "w", encoding=sys.stdout.encoding or "utf-8",
                     errors="replace")


def _is_terminal(terminal: TextIO) -> bool:
    """Whether the panel can be drawn there: a terminal (FORCE_COLOR on a pipe or a file is
    not one here: it would take the panel's cursor moves) that rich's Live moves the cursor
    on (not TERM=dumb, not TTY_INTERACTIVE=0)."""
    return terminal.isatty() and Console(file=terminal).is_interactive


def _shown(asked: WatchOptions) -> ShowOptions:
    """The report `show` prints at the end, as `show SCENARIO` with the run's options."""
    return ShowOptions(asked.script_args, None, asked.out, False, asked.timeout, "all", False,
                       asked.fail_on, asked.scenario, saved=False, max_nodes=None,
                       pass_number=None, lead_with="script", strict=asked.strict,
                       as_json=False, max_depth=30, show_all=False, by_module=False,
                       tree=False, derivative_order=1, out_format="text", ranks="0")


def _check_log(asked: WatchOptions) -> None:
    """--log FILE is written from the start: never the script, the -o file, or a file that
    is not a run log already (a run log is written over: the same command run again)."""
    log = asked.log
    if log is None:
        return
    if log.is_dir():
        raise GradtraceError(f"--log {log}: is a folder", "give a file name, e.g. run.jsonl")
    if not log.absolute().parent.is_dir():
        raise GradtraceError(f"--log {log}: there is no folder {log.absolute().parent}",
                             "make the folder first, or name a file in one that exists")
    same = [other for other in (asked.out, Path(asked.scenario.partition("::")[0]))
            if other is not None and other.exists() and log.exists()
            and log.resolve() == other.resolve()]
    if same:
        raise GradtraceError(f"--log {log}: would write over {same[0]}",
                             "give the log a file of its own, e.g. run.jsonl")
    if log.exists() and log.stat().st_size and not is_run_log(str(log)):
        raise GradtraceError(f"--log {log}: the file exists and is not a gradtrace run log",
                             "give a new file name, or remove the file first")

