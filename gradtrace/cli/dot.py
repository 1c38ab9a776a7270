"""`gradtrace dot`: export the graph to a file whose suffix picks the format, or DOT on stdout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console

from ..errors import ExportError, GradtraceError
from ..model.labels import led_by_library
from ..model.profile import CostMeasure
from ..model.records import Trace
from ..render.bounded import MAX_BOXES
from ..render.drawing import DrawOptions
from ..render.formats import FORMATS, ExportFormat, find_format, suffix_list
from ..render.report import finding_lines
from .core import (
    DEBUG,
    FAIL_ON,
    FINDINGS_FORMATS,
    LEAD_WITH,
    NO_BACKWARD,
    PASS,
    PASSES,
    PROFILE,
    ROOT,
    SCRIPT_ARGS,
    STRICT,
    TARGET,
    TIMEOUT,
    ExitCode,
    app,
    fail_on_codes,
    findings_fail,
    library_leads,
)
from .files import absolute, input_file, write_atomic
from .inputs import load_trace, pick_pass, told_after
from .options import GraphOptions
from .output import stderr_console, write_stdout
from .ranked import quiet_unless_shown, rank_file

RANKDIRS = ("TB", "BT", "LR", "RL")
HEATS = ("time", "memory")


@dataclass(frozen=True)
class DotOptions(GraphOptions):
    """What `gradtrace dot` was asked."""

    to: str | None
    old_format: str | None
    grads: bool
    heat_by: str | None
    rankdir: str
    source_lines: bool
    no_fold: bool
    focus: str | None
    radius: int
    module_depth: int | None
    quiet: bool


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace dot example:chain_rule                 DOT on stdout\n\n"
    "  gradtrace dot example:chain_rule -o graph.svg    SVG (needs Graphviz)\n\n"
    "  gradtrace dot example:two_paths_add_up --grads -o flow.png\n\n"
    "  gradtrace dot example:mlp_modules --focus model.0.weight -o near.svg\n\n"
    "  gradtrace dot trace.json -o graph.mmd            from a saved trace\n\n"
    "  gradtrace dot example:chain_rule --to mmd        Mermaid on stdout\n\n"
    "  gradtrace dot example:mlp_modules --grads -o g.html  a web page\n\n"
    "  gradtrace dot example:real/gpt_tiny --heat time -o heat.svg\n\n"
    "Formats by suffix: " + "; ".join(f"{' '.join(f.suffixes)} {f.description}"
                                      for f in FORMATS) + ".\n\n"
    "  gradtrace dot example:explained/log_of_zero --strict -o nan.svg\n\n"
    "Findings go to stderr, one line each (-q: not at all).\n\n"
    "Exit codes: 0 success, 1 a finding failed --strict or --fail-on, 2 bad input, an output "
    "that cannot be written, or a scenario that cannot run, stopped part-way (the picture of "
    "what it recorded is written first) or made no graph (nothing is written).",
)
def dot(
    scenario: str = TARGET,
    script_args: list[str] | None = SCRIPT_ARGS,
    out: Path | None = typer.Option(None, "-o", "--output", "--file", metavar="FILE",
                                    help="Write this file; its suffix picks the format "
                                    f"({suffix_list()}). Default: DOT on stdout."),
    to: str | None = typer.Option(None, "--to", metavar="FORMAT",
                                  help=", ".join(f.name for f in FORMATS)
                                  + ": the format on stdout, or of an -o FILE whose suffix "
                                  "names none (/dev/stdout). Default: the suffix's, else dot."),
    old_format: str | None = typer.Option(None, "--format", hidden=True,
                                          help="Old name of --to."),
    root: list[str] | None = ROOT,
    saved: bool = typer.Option(False, "--saved",
                               help="Show each node's saved tensors (name, shape, bytes)."),
    grads: bool = typer.Option(False, "--grads",
                               help="Label edges with the gradient sent along them."),
    pass_number: str | None = PASS,
    lead_with: str = LEAD_WITH,
    profile: bool = PROFILE,
    heat_by: str | None = typer.Option(None, "--heat", metavar="time|memory",
                                       help="Fill each node by its backward time or the "
                                       "memory it allocated, on a heat scale with a legend "
                                       "(implies --profile for a scenario; a saved trace "
                                       "must hold costs)."),
    rankdir: str = typer.Option("TB", "--rankdir", metavar="DIR",
                                help="Layout direction: " + ", ".join(RANKDIRS) + "."),
    max_nodes: int | None = typer.Option(None, "--max-nodes", metavar="N", min=1,
                                         help="Draw at most N nodes, and a '… more' box."),
    source_lines: bool = typer.Option(False, "--lines",
                                      help="Label each op with the scenario line that made it."),
    no_fold: bool = typer.Option(False, "--no-fold",
                                 help="Draw repeated chains node by node."),
    focus: str | None = typer.Option(None, "--focus", metavar="NODE",
                                     help="Draw only around this node id or named tensor."),
    radius: int = typer.Option(2, "--radius", metavar="K", min=0,
                               help="With --focus: how many edges away to draw."),
    module_depth: int | None = typer.Option(None, "--module-depth", metavar="N", min=0,
                                            help="Group nodes by module path up to N levels."),
    no_backward: bool = NO_BACKWARD,
    timeout: float | None = TIMEOUT,
    passes: str = PASSES,
    strict: bool = STRICT,
    fail_on: str | None = FAIL_ON,
    quiet: bool = typer.Option(False, "-q", "--quiet",
                               help="Print no findings on stderr (--strict and --fail-on "
                               "still decide the exit code)."),
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """Export the autograd graph: DOT, SVG, PNG, PDF, JSON, Mermaid or an interactive page."""
    export_graph(DotOptions.given(locals()))


def export_graph(asked: DotOptions) -> None:
    """`gradtrace dot`: run or read the scenario, write its graph in the format asked, say
    its findings on stderr, and exit as it ended and as its findings say."""
    failing = fail_on_codes(asked.fail_on)  # checked before the scenario runs
    library_first = library_leads(asked.lead_with)
    source = input_file(asked.scenario)
    out = rank_file(asked.out)
    target = None if out is None else absolute(out)
    shown = quiet_unless_shown()
    chosen = _checked_format(asked, out)
    # saved tensors and gradient flow cost time on big graphs: only when they are shown, or
    # when findings decide the exit code (nan-gradient is found in the flow, as in show)
    loaded = load_trace(asked.scenario, asked.roots, backward=not asked.no_backward,
                        saved=asked.saved or chosen.whole_trace,
                        flow=asked.grads or chosen.whole_trace or asked.strict
                        or bool(failing),
                        run=asked.run(asked.pass_number),
                        profile=asked.profile or asked.heat_by is not None)
    trace, ending = loaded.trace, loaded.ending(picture=True)
    if library_first and chosen.name != "json":  # a JSON trace keeps both lines as they are
        trace = led_by_library(trace)
    if ending is not None and not trace.nodes:
        raise ending  # never an empty picture
    data = chosen.export(trace, _draw_options(asked, trace), asked.rankdir.upper())
    if target is None:
        write_stdout(data)
    else:
        write_atomic(target, data, protected=[source])
    said = None if asked.quiet or not shown else finding_lines(trace.findings)
    if said is not None:
        stderr_console().print(said)
    if not asked.quiet:
        told_after(asked.scenario, loaded, asked.script_args, target, chosen.name == "json")
    if ending is not None:
        raise ending
    if findings_fail(trace.findings, asked.strict, failing):
        raise typer.Exit(ExitCode.FAILED)


def _checked_format(asked: DotOptions, out: Path | None) -> ExportFormat:
    """The export format asked (--to, --format, the suffix of -o FILE), once --rankdir and
    --heat are known good; a binary format is refused on stdout."""
    if asked.rankdir.upper() not in RANKDIRS:
        raise GradtraceError(f"--rankdir {asked.rankdir!r}: use {', '.join(RANKDIRS)}")
    if asked.heat_by is not None and asked.heat_by not in HEATS:
        raise GradtraceError(f"--heat {asked.heat_by!r}: use time or memory",
                             "time: each node's backward time; memory: the bytes it allocated")
    chosen = _export_format(out, _old_format(asked.to, asked.old_format))
    if out is None and chosen.binary:
        raise ExportError(f"{chosen.name.upper()} is binary: write it to a file",
                          f"add -o graph{chosen.suffixes[0]}")
    return chosen


def _draw_options(asked: DotOptions, trace: Trace) -> DrawOptions:
    """How the picture is drawn, as asked (--grads: the gradients of the pass shown)."""
    heat: CostMeasure | None = "time" if asked.heat_by == "time" \
        else "memory" if asked.heat_by else None
    return DrawOptions(saved=asked.saved,
                       grads=pick_pass(trace, asked.pass_number) if asked.grads else None,
                       max_nodes=asked.max_nodes, fold=not asked.no_fold, focus=asked.focus,
                       radius=asked.radius, module_depth=asked.module_depth,
                       lines=asked.source_lines, heat=heat,
                       # --max-nodes N is the bound asked: N nodes, however many boxes
                       max_boxes=None if asked.max_nodes is not None else MAX_BOXES,
                       more_hint="--max-nodes N draws N nodes; --focus NODE around one")


def _old_format(to: str | None, old: str | None) -> str | None:
    """`dot --format FMT`, the old name of --to, still works for one release and says so:
    --format now means what it means in every command, how findings are printed."""
    if old is None:
        return to
    if old.lower() in FINDINGS_FORMATS:
        raise GradtraceError(f"dot --format {old}: dot draws the graph; it prints no findings "
                             "report", "`gradtrace show SCENARIO --format github` prints them")
    if to is not None:
        raise GradtraceError(f"--to {to} and --format {old} both name the format",
                             "give --to alone (--format is its old name)")
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"note: `dot --format {old}` is now `--to {old}`; --format will stop naming an export "
        "format in the next release")
    return old


def _export_format(out: Path | None, to: str | None) -> ExportFormat:
    """--to FORMAT, else the suffix of -o FILE, else DOT; both given must agree."""
    chosen = find_format(out, to)
    if out is not None and to is not None and out.suffix:
        by_suffix = [f for f in FORMATS if out.suffix.lower() in f.suffixes]
        if by_suffix and by_suffix[0] is not chosen:
            raise GradtraceError(f"--to {to} and -o {out} disagree: the suffix {out.suffix} "
                                 f"means {by_suffix[0].name}",
                                 f"drop --to, or write -o {out.with_suffix(chosen.suffixes[0])}")
    return chosen
