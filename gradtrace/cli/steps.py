"""`gradtrace steps`: a training loop's gradient norms and loss over its passes, in the terminal
or as a chart (SVG, PNG) or JSON."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from ..errors import GradtraceError
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
from .inputs import RunChoices, load_trace, told_after
from .output import stdout_console, write_stdout
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
    loaded = load_trace(scenario, [], backward=True, saved=False, flow=False,
                        run=RunChoices(script_args, passes, timeout))
    trace, ending = loaded.trace, loaded.ending()
    if ending is not None and not trace.passes:
        raise ending  # why there is nothing to chart, in the words every command uses
    require_steps(trace)
    health = replace(trace, findings=tuple(f for f in trace.findings
                                           if f.code in STEP_CODES))
    if printed == "json":
        numbers = chart_format(Path("steps.json"))  # what -o steps.json writes
        write_stdout(numbers.make(trace, True if by_module is None else by_module, show_all))
    elif printed == "github":
        from ..render.github import github_annotations

        write_stdout(github_annotations(health.findings))
    elif target is None or chosen is None:
        from ..render.report import findings_view
        from ..render.steps import ROWS, steps_view

        console = stdout_console()
        console.print(steps_view(trace, bool(by_module), None if show_all else ROWS,
                                 min_passes=1))
        told = findings_view(health)  # what the steps say about the gradients' health
        if told is not None:
            console.print(told)
    else:
        data = chosen.make(trace, True if by_module is None else by_module, show_all)
        write_atomic(target, data, protected=[source])
    told_after(scenario, loaded, script_args, target, False)
    if ending is not None:
        raise ending
    if findings_fail(health.findings, strict, failing):
        raise typer.Exit(ExitCode.FAILED)
