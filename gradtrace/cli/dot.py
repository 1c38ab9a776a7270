"""`gradtrace dot`: export the graph to a file whose suffix picks the format, or DOT on stdout."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import ExportError, GradtraceError
from ..render.drawing import DrawOptions
from ..render.formats import FORMATS, find_format, suffix_list
from .core import (
    DEBUG,
    NO_BACKWARD,
    PASS,
    PASSES,
    ROOT,
    SCRIPT_ARGS,
    TIMEOUT,
    app,
    write_stdout,
)
from .files import absolute, input_file, write_atomic
from .inputs import RunChoices, load_trace, pick_pass

RANKDIRS = ("TB", "BT", "LR", "RL")


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace dot scenarios/chain_rule.py                  DOT on stdout\n\n"
    "  gradtrace dot scenarios/chain_rule.py -o graph.svg     picture (needs Graphviz)\n\n"
    "  gradtrace dot scenarios/two_paths_add_up.py --grads -o flow.png\n\n"
    "  gradtrace dot scenarios/mlp_modules.py --focus model.0.weight -o near.svg\n\n"
    "  gradtrace dot trace.json -o graph.mmd                  Mermaid, from a saved trace\n\n"
    "  gradtrace dot scenarios/mlp_modules.py --grads -o g.html   interactive page\n\n"
    "Formats by suffix: " + "; ".join(f"{' '.join(f.suffixes)} {f.description}"
                                      for f in FORMATS) + ".\n\n"
    "Exit codes: 0 success, 2 bad input, an output that cannot be written, or a scenario "
    "that cannot run, stopped part-way (the picture of what it recorded is written first) "
    "or made no graph (nothing is written).",
)
def dot(
    scenario: str = typer.Argument(..., help="A scenario .py file, FILE::FUNC, or a trace "
                                   ".json saved by `gradtrace show --json`.",
                                   metavar="SCENARIO"),
    script_args: list[str] | None = SCRIPT_ARGS,
    out: Path | None = typer.Option(None, "-o", "--output", "--file", metavar="FILE",
                                    help="Write this file; its suffix picks the format "
                                    f"({suffix_list()}). Default: DOT on stdout."),
    fmt: str | None = typer.Option(None, "--format", metavar="FMT",
                                   help=", ".join(f.name for f in FORMATS)
                                   + "; overrides the suffix."),
    root: list[str] | None = ROOT,
    saved: bool = typer.Option(False, "--saved",
                               help="Show each node's saved tensors (name, shape, bytes)."),
    grads: bool = typer.Option(False, "--grads",
                               help="Label edges with the gradient sent along them."),
    pass_number: str | None = PASS,
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
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """Export the autograd graph: DOT, SVG, PNG, PDF, JSON, Mermaid or an interactive page."""
    source = input_file(scenario)
    target = None if out is None else absolute(out)
    if rankdir.upper() not in RANKDIRS:
        raise GradtraceError(f"--rankdir {rankdir!r}: use {', '.join(RANKDIRS)}")
    chosen = find_format(out, fmt)
    if out is None and chosen.binary:
        raise ExportError(f"{chosen.name.upper()} is binary: write it to a file",
                          f"add -o graph{chosen.suffixes[0]}")
    # saved tensors and gradient flow cost time on big graphs: only when they are shown
    loaded = load_trace(scenario, root or [], backward=not no_backward,
                        saved=saved or chosen.whole_trace, flow=grads or chosen.whole_trace,
                        run=RunChoices(script_args, passes, timeout, pass_number))
    trace, ending = loaded.trace, loaded.ending(picture=True)
    if ending is not None and not trace.nodes:
        raise ending  # never an empty picture
    options = DrawOptions(saved=saved, grads=pick_pass(trace, pass_number) if grads else None,
                          max_nodes=max_nodes, fold=not no_fold, focus=focus, radius=radius,
                          module_depth=module_depth, lines=source_lines)
    data = chosen.export(trace, options, rankdir.upper())
    if target is None:
        write_stdout(data)
    else:
        write_atomic(target, data, protected=[source])
    if ending is not None:
        raise ending
