"""`gradtrace check`: gradcheck and gradgradcheck of every custom Function the scenarios call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from ..check.limits import MAX_JACOBIAN, SAMPLE
from ..render.escape import visible
from .core import DEBUG, ExitCode, app, debugging, print_error, stdout_console, write_stdout
from .files import absolute, input_file, write_atomic


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace check scenarios/*.py                 every custom Function in the gallery\n\n"
    "  gradtrace check scenarios/broken/ --no-gradgrad\n\n"
    "  gradtrace check scenarios/*.py --junit report.xml   for CI\n\n"
    "  gradtrace check scenarios/real/fused_conv_bn.py --timeout 60   big inputs: sampled\n\n"
    "A Function whose backward is meant not to be a derivative (straight-through, synthetic "
    "gradients) can say so with a class attribute: gradtrace_skip = \"why\".\n\n"
    "Exit codes: 0 every check ok, 1 a check failed (or looks like a straight-through "
    "estimator), 2 a scenario cannot run or a check timed out.",
)
def check(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(..., metavar="FILE_OR_DIR...",
                                      help="Scenario files (or FILE::FUNC), or folders to "
                                      "search for *.py."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE",
                                      help="Also write JUnit XML, for CI systems."),
    eps: float = typer.Option(1e-6, "--eps", help="Finite-difference step."),
    atol: float = typer.Option(1e-5, "--atol", help="Absolute tolerance."),
    rtol: float = typer.Option(1e-3, "--rtol", help="Relative tolerance."),
    fast: bool = typer.Option(False, "--fast", help="gradcheck's fast mode."),
    no_gradgrad: bool = typer.Option(False, "--no-gradgrad", help="Skip gradgradcheck."),
    timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS", min=0.001,
                                         help="Bound each scenario's run and each Function "
                                         "call's checks: a run past it stops at the line it "
                                         "is on, a call's gradcheck or gradgradcheck past it "
                                         "is \"timed out\"; exit 2. Default: no limit."),
    max_jacobian: int = typer.Option(MAX_JACOBIAN, "--max-jacobian", min=1, metavar="ENTRIES",
                                     help="Check a Jacobian in full up to this many entries "
                                     "(inputs x outputs; gradcheck holds ~100 bytes each); "
                                     f"above it, {SAMPLE} random coordinates of each input "
                                     "and output, with the same tolerances."),
    debug_flag: bool = DEBUG,  # read by the error boundary, and here
) -> None:
    """gradcheck and gradgradcheck every custom autograd.Function the scenarios call."""
    from ..check.functions import CheckOptions, check_files, scenario_files
    from ..render.checks import check_json, check_report, to_junit

    options = CheckOptions(eps=eps, atol=atol, rtol=rtol, fast=fast, gradgrad=not no_gradgrad,
                           timeout=timeout, max_jacobian=max_jacobian)
    files = scenario_files(paths)
    # resolved before any scenario runs (and perhaps changes the working folder)
    junit = None if junit is None else absolute(junit)
    inputs = [input_file(f) for f in files]
    with CallProgress() as watcher:
        run = check_files(files, options, stop_on_error=debugging(ctx), watcher=watcher)
    for broken in run.cannot_run:
        print_error(broken.message, broken.hint)
    if junit is not None:
        write_atomic(junit, to_junit(run).encode("utf-8"), protected=inputs)
    if as_json:
        write_stdout(check_json(run))
    else:
        stdout_console().print(check_report(run))
    if run.cannot_run or run.timed_out:
        raise typer.Exit(ExitCode.USAGE)
    if run.failed:
        raise typer.Exit(ExitCode.FAILED)


class CallProgress:
    """A line on stderr, on a terminal only, for the Function call being checked: its
    scenario line, name, input sizes and the time it has taken so far."""

    def __enter__(self) -> CallProgress:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        # a copy of fd 2: the scenario's output is captured (fd 2 too) while checks run
        self.stream = os.fdopen(os.dup(2), "w")
        self.progress = Progress(SpinnerColumn(), TextColumn("checking {task.description}"),
                                 TimeElapsedColumn(), console=Console(file=self.stream),
                                 transient=True)
        self.progress.__enter__()
        self.task: Any = None
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)
        self.stream.close()

    def checking(self, what: str) -> None:
        self.task = self.progress.add_task(visible(what), total=None)

    def checked(self) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None
