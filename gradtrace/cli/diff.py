"""`gradtrace diff`: what changed between two graphs, their gradients and findings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from rich.text import Text

from ..errors import GradtraceError
from ..model.diffs import TraceDiff
from ..render.formats import find_format
from .core import (
    DEBUG,
    FAIL_ON,
    NO_BACKWARD,
    PASSES,
    PROFILE,
    ROOT,
    SCRIPT_ARGS,
    TIMEOUT,
    ExitCode,
    FailOn,
    app,
    fail_on_rules,
    findings_format,
    printed_as,
    tolerance_option,
)
from .files import absolute, input_file, write_atomic
from .inputs import Loaded, load_trace
from .options import RunOptions
from .output import stderr_console, stdout_console, write_stdout
from .ranked import quiet_unless_shown, rank_file


@dataclass(frozen=True)
class DiffOptions(RunOptions):
    """What `gradtrace diff` was asked."""

    a: str
    b: str
    rtol: float
    atol: float
    as_json: bool
    out_format: str
    show_all: bool


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace diff example:diff/mlp_relu example:diff/mlp_tanh\n\n"
    "  gradtrace show example:diff/mlp_relu --json > before.json\n\n"
    "  gradtrace diff before.json example:diff/mlp_relu   the same graph\n\n"
    "  gradtrace diff before.json example:diff/mlp_tanh -o changes.svg\n\n"
    "  gradtrace diff before.json example:diff/mlp_tanh --json --rtol 1e-3\n\n"
    "  gradtrace diff before.json example:diff/mlp_tanh --format github\n\n"
    "  gradtrace show example:diff/mlp_relu --profile --json > base.json\n\n"
    "  gradtrace diff base.json example:diff/mlp_relu --profile\n\n"
    "  gradtrace diff base.json base.json --fail-on slower:20%\n\n"
    "Nodes are matched by what they are (type, module, tensor, the code that made them, their "
    "place among their neighbours), not by their ids. A gradient differs when "
    "|a − b| > atol + rtol·|b| for its norm, min, max or a kept element.\n\n"
    "With --profile (or traces saved with it), each module's backward time in A and B is "
    "listed. --fail-on decides the exit code instead of any difference: slower:N% fails "
    "when a module's backward grew by more than N% and more than its timings' spread; a "
    "finding code fails when that finding is new in B.\n\n"
    "Exit codes: 0 the same (with --fail-on: no rule failed), 1 different (a rule failed), "
    "2 bad input, or a scenario that cannot run, stopped part-way or made no graph.",
)
def diff(
    a: str = typer.Argument(..., metavar="A", help="The old side: a scenario .py file, "
                            "FILE::FUNC, example:NAME, or a trace .json saved by "
                            "`gradtrace show --json`."),
    b: str = typer.Argument(..., metavar="B", help="The new side, the same kinds."),
    script_args: list[str] | None = SCRIPT_ARGS,
    rtol: float = tolerance_option(1e-4, "--rtol", "Relative tolerance for gradients "
                                   "(float32 sums move by ~1e-6 between machines)."),
    atol: float = tolerance_option(1e-6, "--atol", "Absolute tolerance."),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print the diff as JSON (schema gradtrace.diff/1)."),
    out_format: str = findings_format("text (the report), or github: each difference as a "
                                      "GitHub Actions annotation."),
    out: Path | None = typer.Option(None, "-o", "--output", metavar="FILE",
                                    help="Also draw both graphs in one picture: added nodes "
                                    "green, removed red, changed amber; the suffix picks the "
                                    "format (.svg .png .pdf .dot .mmd; .json writes the diff)."),
    show_all: bool = typer.Option(False, "--all", help="List every difference (by default "
                                  "each section lists its first 20 and says how many more)."),
    root: list[str] | None = ROOT,
    no_backward: bool = NO_BACKWARD,
    timeout: float | None = TIMEOUT,
    passes: str = PASSES,
    profile: bool = PROFILE,
    fail_on: str | None = FAIL_ON,
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """Compare two graphs: nodes, edges, modules, tensors, gradients, findings and costs."""
    compare_sides(DiffOptions.given(locals()))


def compare_sides(asked: DiffOptions) -> None:
    """`gradtrace diff`: run or read both sides, print what differs (and draw it to -o
    FILE), and exit as they ended, and as they differ or the --fail-on rules say."""
    from ..diff.compare import compare
    from ..diff.kernels import device_neutral
    from ..diff.match import match_nodes
    from ..render.diffs import diff_json

    rules = None if asked.fail_on is None else fail_on_rules(asked.fail_on, slower=True)
    printed = printed_as(asked.out_format, asked.as_json)
    sources = [input_file(asked.a), input_file(asked.b)]
    out = rank_file(asked.out)
    target = None if out is None else absolute(out)
    quiet_unless_shown()
    chosen = None if out is None else find_format(out, None)
    if chosen is not None and chosen.name != "json" and chosen.draw is None:
        raise GradtraceError(f"diff -o: {chosen.name} is not made for a diff",
                             "use a picture (.svg, .png, .pdf, .dot, .mmd) or .json")
    loaded = _load_sides(asked, asked.profile or (rules is not None
                                                  and rules.slower is not None))
    endings = [side.ending() for side in loaded]
    for side, ending in zip(loaded, endings, strict=True):
        if ending is not None and not side.trace.nodes:
            raise ending  # no graph to compare: the error every command gives
    # a trace made on a GPU and one made on a CPU name some kernels apart: as one
    trace_a, trace_b = device_neutral(loaded[0].trace, loaded[1].trace)
    matching = match_nodes(trace_a, trace_b)
    result = compare(trace_a, trace_b, asked.a, asked.b, asked.rtol, asked.atol, matching)
    _print(result, printed, asked.show_all)
    if target is not None and chosen is not None:
        if chosen.draw is None:  # .json
            data = diff_json(result).encode("utf-8")
        else:
            from ..diff.union import union_trace
            from ..render.diffs import diff_drawing
            from ..render.drawing import DrawOptions

            union = union_trace(trace_a, trace_b, matching, result.nodes)
            options = DrawOptions() if chosen.max_boxes is None \
                else DrawOptions(max_boxes=chosen.max_boxes)  # Mermaid's own bound
            data = chosen.draw(diff_drawing(union, options), "TB")
        write_atomic(target, data, protected=sources)
    for ending in endings:
        if ending is not None:
            raise ending
    if rules is not None:
        if _rules_fail(result, rules):
            raise typer.Exit(ExitCode.FAILED)
    elif not result.same:
        raise typer.Exit(ExitCode.FAILED)


def _load_sides(asked: DiffOptions, profile: bool) -> list[Loaded]:
    """Both sides, each run (or read) alone; the script's arguments after -- go to each side
    that is a script (a saved trace has none)."""
    run = asked.run()
    return [load_trace(side, asked.roots, backward=not asked.no_backward, saved=False,
                       run=run._replace(args=None) if side.endswith(".json") else run,
                       lean=True, profile=profile)
            for side in (asked.a, asked.b)]


def _print(result: TraceDiff, printed: str, every: bool) -> None:
    """The diff on stdout: JSON, annotations (github) or the report (text)."""
    from ..render.diffs import diff_annotations, diff_json, diff_report

    if printed == "json":
        write_stdout(diff_json(result))
    elif printed == "github":
        write_stdout(diff_annotations(result))
    else:
        stdout_console().print(diff_report(result, every=every))


def _rules_fail(result: TraceDiff, rules: FailOn) -> bool:
    """Whether a --fail-on rule fails; each failure is said on stderr."""
    from ..render.diffs import module_cost_text

    failures = [f"new finding {f.code}: {f.message}" for f in result.new_findings
                if f.code in rules.codes]
    if rules.slower is not None:
        failures += [f"slower beyond {rules.slower:.0%}: {module_cost_text(c)}"
                     for c in result.costs if c.slower(rules.slower)]
    err = stderr_console()
    for line in failures:
        err.print(Text("fail-on: ", style="bold red") + Text(line))
    return bool(failures)

