"""`gradtrace steps`: a training loop's gradient norms and loss over its passes, in the terminal
or as a chart (SVG, PNG) or JSON."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

import typer
from rich.console import Console, Group, RenderableType
from rich.text import Text

from ..errors import GradtraceError, Interrupted, RunLogError
from ..findings.live import said
from ..model.records import Trace
from ..model.run_log import GrowingLog, RunLog
from ..render.chart import require_steps
from ..render.chart_files import CHART_FORMATS, chart_format
from .core import (
    DEBUG,
    FAIL_ON,
    PASSES,
    SCRIPT_ARGS,
    STRICT,
    TARGET,
    TIMEOUT,
    ExitCode,
    app,
    fail_on_codes,
    findings_fail,
    findings_format,
    printed_as,
)
from .files import absolute, input_file, write_atomic
from .inputs import Loaded, RunChoices, is_run_log, load_trace, told_after
from .output import stdout_console, tell, write_stdout
from .ranked import quiet_unless_shown, rank_file


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace steps example:real/train_args -- --epochs 1   a table\n\n"
    "  gradtrace steps example:real/train_args -o steps.svg -- --epochs 1\n\n"
    "  gradtrace steps trace.json --by-leaf -o steps.png   from a saved trace\n\n"
    "  gradtrace steps trace.json -o steps.json\n\n"
    "Files by suffix: " + "; ".join(f"{f.suffix} {f.description}" for f in CHART_FORMATS)
    + ".\n\n"
    "Exit codes: 0 success, 1 a finding failed --strict or --fail-on, 2 bad input, no "
    "backward pass to chart, an output that cannot be written, or a scenario that stopped "
    "part-way or made no graph.",
)
def steps(
    scenario: str = TARGET,
    script_args: list[str] | None = SCRIPT_ARGS,
    out: Path | None = typer.Option(None, "-o", "--output", metavar="FILE",
                                    help="Write the chart (.svg, .png) or the numbers (.json). "
                                    "Default: the steps view in the terminal."),
    by_module: bool | None = typer.Option(None, "--by-module/--by-leaf",
                                          help="A row or line per nn.Module (its norm: the "
                                          "root of its parameters' squared norms) or per "
                                          "parameter. Default: per parameter in the terminal, "
                                          "per module in a chart.", show_default=False),
    show_all: bool = typer.Option(False, "--all",
                                  help="Every parameter or module (by default a screen's "
                                  "worth of rows, 12 lines in a chart)."),
    as_json: bool = typer.Option(False, "--json", help="Print the numbers as JSON (what "
                                 "-o steps.json writes) instead of the steps view."),
    follow: bool = typer.Option(False, "--follow",
                                help="Read a run log as the run writes it, redrawing the "
                                "view as lines arrive (not on a terminal: each finding as "
                                "it arrives), until the run's end line; then as without "
                                "--follow. A log not yet written is waited for."),
    out_format: str = findings_format("text (the steps view), or github: the gradient-health "
                                      "findings as GitHub Actions annotations."),
    strict: bool = STRICT,
    fail_on: str | None = FAIL_ON,
    timeout: float | None = TIMEOUT,
    passes: str = PASSES,
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """Chart a training loop: each parameter's gradient norm and the loss, pass by pass."""
    from ..findings.registry import STEP_CODES

    source = input_file(scenario)
    out = rank_file(out)
    target = None if out is None else absolute(out)  # the script may remove its folder
    quiet_unless_shown()
    failing = fail_on_codes(fail_on, sorted(STEP_CODES))  # the codes steps can find
    printed = printed_as(out_format, as_json)
    if out is not None and printed != "text":
        raise GradtraceError(f"--{'json' if as_json else 'format github'} and -o {out} both "
                             "choose what is written", "give one of them")
    chosen = None if out is None else chart_format(out)  # a bad suffix fails before the run
    run = RunChoices(script_args, passes, timeout)
    interrupted: Interrupted | None = None
    if follow:
        progress = _progress(scenario, bool(by_module), show_all, printed == "text"
                             and target is None)
        loaded, interrupted = _followed(_log_to_follow(scenario, run), progress)
    else:
        loaded = load_trace(scenario, [], backward=True, saved=False, flow=False, run=run)
    trace, ending = loaded.trace, loaded.ending()
    if ending is not None and not trace.passes:
        raise ending  # why there is nothing to chart, in the words every command uses
    require_steps(trace)
    health = _health(trace)
    if printed == "json":
        numbers = chart_format(Path("steps.json"))  # what -o steps.json writes
        write_stdout(numbers.make(trace, True if by_module is None else by_module, show_all))
    elif printed == "github":
        from ..render.github import github_annotations

        write_stdout(github_annotations(health.findings))
    elif target is None or chosen is None:
        console = stdout_console()
        for part in _view(trace, bool(by_module), show_all):
            console.print(part)
    else:
        data = chosen.make(trace, True if by_module is None else by_module, show_all)
        write_atomic(target, data, protected=[source])
    told_after(scenario, loaded, script_args, target, False)
    if interrupted is not None:
        raise interrupted  # after the view of what was read
    if ending is not None:
        raise ending
    if findings_fail(health.findings, strict, failing):
        raise typer.Exit(ExitCode.FAILED)


def _health(trace: Trace) -> Trace:
    """trace with only the findings steps reports: those on the gradients' health."""
    from ..findings.registry import STEP_CODES

    return replace(trace, findings=tuple(f for f in trace.findings if f.code in STEP_CODES))


def _view(trace: Trace, by_module: bool, show_all: bool) -> list[RenderableType]:
    """The steps view, and what the steps say about the gradients' health if anything."""
    from ..render.report import findings_view
    from ..render.steps import ROWS, steps_view

    parts = (steps_view(trace, by_module, None if show_all else ROWS, min_passes=1),
             findings_view(_health(trace)))
    return [part for part in parts if part is not None]


POLL = 0.5  # seconds between looks at a followed log for the lines appended since


def _log_to_follow(scenario: str, run: RunChoices) -> Path:
    """The log --follow reads: never a script, a saved trace, or a script's options."""
    if scenario.endswith(".py") or "::" in scenario or scenario.startswith("example:"):
        raise GradtraceError(f"--follow reads a run log as a run writes it; {scenario} is a "
                             "script", f"run it with `gradtrace watch {scenario} --log "
                             "run.jsonl` and follow run.jsonl from another terminal")
    path = Path(scenario)
    # a saved trace may not end its line; another file that is not a log fails on its first
    if (scenario.endswith(".json") and path.is_file() and path.stat().st_size
            and not is_run_log(scenario)):
        raise GradtraceError(f"--follow reads a run log as a run writes it; {scenario} is "
                             "not one (a saved trace does not grow)",
                             f"read a saved trace without --follow: gradtrace steps {scenario}")
    if run.args or run.timeout or run.passes != "all":
        raise GradtraceError("--follow reads a run log: script arguments, --timeout and "
                             "--passes apply to a script it would run", "drop them")
    return path


class _Follower:
    """A log read as it grows until its end line; latest: what it held at the last look."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.latest: RunLog | None = None

    def run(self, shown: Callable[[RunLog], None]) -> RunLog:
        """Read new complete lines every POLL seconds; show the log they make, at most a
        tenth of the time (its view is made from every row: seconds at 100,000 steps)."""
        growing, pending, due = GrowingLog(), 0, 0.0
        with self._opened() as file:
            while True:
                appended = file.read()
                pending += self._taken(growing, appended)
                if pending and (growing.ended or time.monotonic() >= due):
                    started = time.monotonic()
                    self.latest, pending = growing.log(), 0
                    shown(self.latest)
                    if self.latest.ended:
                        return self.latest
                    due = time.monotonic() + 9 * (time.monotonic() - started)
                elif not appended:
                    self._check_not_emptied(file)
                    time.sleep(POLL)

    def _taken(self, growing: GrowingLog, appended: bytes) -> int:
        """Take the lines appended completes: how many."""
        try:
            return growing.feed(appended) if appended else 0
        except RunLogError as exc:
            raise RunLogError(f"{self.path}: {exc.message}", exc.hint) from None

    def _opened(self) -> BinaryIO:
        """The log, opened once it exists: a run that has not started writing it is waited
        for, and said so once."""
        waiting = False
        while True:
            try:
                return self.path.open("rb", buffering=0)
            except FileNotFoundError:
                if not waiting:
                    tell(f"waiting for {self.path} to appear: no run has written it yet")
                    waiting = True
            except OSError as exc:
                raise RunLogError(f"{self.path} cannot be read: {exc.strerror or exc}") from None
            time.sleep(POLL)

    def _check_not_emptied(self, file: BinaryIO) -> None:
        """A log emptied under the reader is a new run's (watch --log writes over a log)."""
        if os.fstat(file.fileno()).st_size < file.tell():
            raise RunLogError(f"{self.path} was emptied: a new run is writing it",
                              "follow it again to read the new run")

    def interrupted(self) -> Interrupted:
        """The error a Ctrl-C while following ends with: how far the log was read."""
        read = "no complete line yet" if self.latest is None else _steps_read(self.latest)
        return Interrupted(f"interrupted following {self.path}: {read}, no end line yet")


def _followed(path: Path, progress: AbstractContextManager[Callable[[RunLog], None]]
              ) -> tuple[Loaded, Interrupted | None]:
    """The log once its end line arrives; on Ctrl-C, what was read and the Interrupted error
    to end with (raised now when no step was read: nothing to show)."""
    follower = _Follower(path)
    try:
        with progress as shown:
            log = follower.run(shown)
    except KeyboardInterrupt:
        stopped = follower.interrupted()
        if follower.latest is None or follower.latest.steps is None:
            raise stopped from None
        return Loaded(follower.latest.trace(), log=follower.latest), stopped
    return Loaded(log.trace(), log=log), None


@contextmanager
def _progress(path: str, by_module: bool, show_all: bool, view: bool
              ) -> Iterator[Callable[[RunLog], None]]:
    """What a followed log's new lines show: on a terminal, the view redrawn in place; not on
    a terminal, each finding on the gradients' health as it arrives, a line each (a file reads
    as the run went, not a view per redraw); nothing unless the view is printed (view)."""
    if not view:
        yield lambda log: None
        return
    console = stdout_console()
    if not console.is_terminal:
        yield _finding_lines(console)
        return
    from rich.live import Live

    with Live(console=console, auto_refresh=False, transient=True, redirect_stdout=False,
              redirect_stderr=False) as live:
        yield lambda log: live.update(_live_view(path, log, by_module, show_all), refresh=True)


def _live_view(path: str, log: RunLog, by_module: bool, show_all: bool) -> RenderableType:
    """The view of what the log holds so far, and a line saying it is being followed."""
    status = Text(f"following {path}: {_steps_read(log)}, until its end line (Ctrl-C stops)",
                  style="dim")
    return Group(*_view(log.trace(), by_module, show_all), status)


def _steps_read(log: RunLog) -> str:
    """How many step rows the log holds: `no step yet`, `1 step read`, `2,000 steps read`."""
    steps = 0 if log.steps is None else len(log.steps.loss)
    return "no step yet" if not steps else f"{steps:,} step{'' if steps == 1 else 's'} read"


def _finding_lines(console: Console) -> Callable[[RunLog], None]:
    """What prints each new finding on the gradients' health of a log, once, as it arrives."""
    from ..findings.registry import STEP_CODES

    told = 0

    def print_new(log: RunLog) -> None:
        nonlocal told
        for record in log.findings[told:]:
            if record.finding.code in STEP_CODES:
                console.print(said(record), markup=False, soft_wrap=True)
        told = len(log.findings)
    return print_new
