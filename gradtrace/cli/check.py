"""`gradtrace check`: gradcheck and gradgradcheck of every custom Function the scenarios call."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from ..check.limits import MAX_JACOBIAN, SAMPLE
from ..errors import GradtraceError
from ..render.escape import visible
from ..render.github import log_line
from .core import (
    DEBUG,
    ExitCode,
    app,
    debugging,
    findings_format,
    print_error,
    printed_as,
    timeout_option,
    tolerance_option,
)
from .files import absolute, input_file, write_atomic
from .output import stdout_console, write_stdout
from .ranked import quiet_unless_shown, rank_file


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace check example:custom_pow_function   the Functions a script calls\n\n"
    "  gradtrace check example:broken --no-gradgrad   a folder of scripts\n\n"
    "  gradtrace check example:double_backward_cube --junit report.xml   for CI\n\n"
    "  gradtrace check example:real/fused_conv_bn --timeout 60\n\n"
    "Each call is checked at its recorded inputs and, where those pass, again at random ones "
    "(seeded): a backward right only at the recorded values (a factor forgotten while it is "
    "1.0) fails there.\n\n"
    "A Function whose backward is meant not to be a derivative (straight-through, synthetic "
    "gradients) can say so with a class attribute: gradtrace_skip = \"why\".\n\n"
    "Exit codes: 0 every check ok, 1 a check failed (or looks like a straight-through "
    "estimator), 2 a scenario cannot run or a check timed out.",
)
def check(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(..., metavar="FILE_OR_DIR...",
                                      help="Scenario files (or FILE::FUNC), or folders to "
                                      "search for *.py, or bundled examples (example:NAME, "
                                      "example:FOLDER). A pytest-style test file "
                                      "(test_*.py, *_test.py) runs each of its test "
                                      "functions, as FILE::FUNC."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    out_format: str = findings_format("text (the report), or github: each check that is not "
                                      "ok as a GitHub Actions annotation on its line."),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE",
                                      help="Also write JUnit XML, for CI systems."),
    eps: float = typer.Option(1e-6, "--eps", min=0.0, help="Finite-difference step (> 0)."),
    atol: float = tolerance_option(1e-5, "--atol", "Absolute tolerance."),
    rtol: float = tolerance_option(1e-3, "--rtol", "Relative tolerance."),
    fast: bool = typer.Option(False, "--fast", help="gradcheck's fast mode."),
    no_gradgrad: bool = typer.Option(False, "--no-gradgrad", help="Skip gradgradcheck."),
    timeout: float | None = timeout_option("Bound each scenario's run and each Function "
                                           "call's checks: a run past it stops at the line "
                                           "it is on, a call's gradcheck or gradgradcheck "
                                           "past it is \"timed out\"; exit 2. Default: no "
                                           "limit."),
    max_jacobian: int = typer.Option(MAX_JACOBIAN, "--max-jacobian", min=1, metavar="ENTRIES",
                                     help="Check a Jacobian in full up to this many entries "
                                     "(inputs x outputs; gradcheck holds ~100 bytes each); "
                                     f"above it, {SAMPLE} random coordinates of each input "
                                     "and output, with the same tolerances."),
    quiet: bool = typer.Option(False, "--quiet", "-q",
                               help="No progress lines on stderr (one a scenario and one a "
                               "Function call, also when stderr is not a terminal)."),
    debug_flag: bool = DEBUG,  # read by the error boundary, and here
) -> None:
    """gradcheck and gradgradcheck every custom autograd.Function the scenarios call."""
    from ..check.discover import targets_of
    from ..check.functions import CheckOptions, check_files
    from ..render.checks import check_json, check_report, to_junit

    printed = printed_as(out_format, as_json)
    if not 0 < eps < math.inf:
        raise GradtraceError(f"--eps {eps:g}: the finite-difference step must be a positive "
                             "number", "e.g. --eps 1e-6 (the default)")
    options = CheckOptions(eps=eps, atol=atol, rtol=rtol, fast=fast, gradgrad=not no_gradgrad,
                           timeout=timeout, max_jacobian=max_jacobian)
    found = targets_of(paths)
    # resolved before any scenario runs (and perhaps changes the working folder)
    junit = rank_file(junit, "--junit")
    junit = None if junit is None else absolute(junit)
    quiet_unless_shown()
    inputs = [input_file(f) for f in found.targets]
    with CallProgress(quiet, github=printed == "github") as watcher:
        run = check_files(found.targets, options, stop_on_error=debugging(ctx),
                          watcher=watcher, notes=found.notes)
    for broken in run.cannot_run:
        print_error(broken.message, broken.hint, github=printed == "github")
    if junit is not None:
        write_atomic(junit, to_junit(run).encode("utf-8"), protected=inputs)
    if printed == "json":
        write_stdout(check_json(run))
    elif printed == "github":
        from ..render.github import check_annotations

        write_stdout(check_annotations(run))
    else:
        stdout_console().print(check_report(run))
    if not run.results and not run.cannot_run:
        raise _nothing_to_check(paths, found.targets)
    if run.cannot_run or run.timed_out:
        raise typer.Exit(ExitCode.USAGE)
    if run.failed:
        raise typer.Exit(ExitCode.FAILED)


def _nothing_to_check(paths: list[str], targets: list[str]) -> GradtraceError:
    """A run that checked nothing is an error: a glob or folder that matched no scenario
    must not pass CI."""
    where = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    none_there = "" if targets else " (no .py file there)"
    return GradtraceError(
        f"no custom autograd.Function call in {where}{none_there}",
        "check runs the custom Functions (torch.autograd.Function subclasses) the scenarios "
        "call; `gradtrace show` shows the graph of a script that calls none")


class CallProgress:
    """Progress on stderr: on a terminal a line that names the scenario running or the
    Function call being checked (its line, name, input sizes) and the time so far; piped, a
    line a scenario and a line a call (CI logs show where a long run is); quiet: none;
    github: each line holds no workflow command (a file name may hold a newline)."""

    def __init__(self, quiet: bool = False, github: bool = False) -> None:
        self.quiet = quiet
        self.github = github
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> CallProgress:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        if self.quiet:
            return self
        # a copy of fd 2: the scenario's output is captured (fd 2 too) while checks run;
        # what the locale cannot encode (a Function's name in LC_ALL=C) escaped, as on stderr
        self.stream = os.fdopen(os.dup(2), "w", errors="backslashreplace")
        if self.stream.isatty():
            self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                     TimeElapsedColumn(), console=Console(file=self.stream),
                                     transient=True)
            self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.quiet:
            return
        if self.progress is not None:
            self.progress.__exit__(None, None, None)
        self.stream.close()

    def _say(self, line: str) -> None:
        if self.quiet:
            return
        line = log_line(line) if self.github else visible(line)
        if self.progress is None:
            print(line, file=self.stream, flush=True)
            return
        self.checked()
        self.task = self.progress.add_task(line, total=None)

    def running(self, target: str) -> None:
        self._say(f"running {target}")

    def checking(self, what: str) -> None:
        self._say(f"checking {what}")

    def checked(self) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None
