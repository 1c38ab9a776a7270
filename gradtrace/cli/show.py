"""`gradtrace show`: the graph tree, tensor table, passes and findings of one scenario."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from ..errors import GradtraceError
from ..model.labels import led_by_library
from ..model.records import Pass, Trace
from ..render.escape import visible_console
from .core import (
    DEBUG,
    FAIL_ON,
    LEAD_WITH,
    NO_BACKWARD,
    PASS,
    PASSES,
    PROFILE,
    ROOT,
    SCRIPT_ARGS,
    STRICT,
    TIMEOUT,
    ExitCode,
    app,
    fail_on_codes,
    findings_fail,
    findings_format,
    library_leads,
    printed_as,
)
from .files import absolute, input_file, is_stream, write_atomic
from .inputs import RunChoices, load_trace, pick_pass, told_after
from .output import stderr_console, stdout_beside_stderr, stdout_console, write_stdout
from .ranked import RANKS, RankedShow


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace show example:chain_rule\n\n"
    "  gradtrace show example:real/train_args --passes 2 -- --epochs 1\n\n"
    "  gradtrace show example:real/test_value_grads::test_sanity_check\n\n"
    "  gradtrace show example:shopping_apple_tangerine --root result --saved\n\n"
    "  gradtrace show example:real/gpt_tiny --by-module\n\n"
    "  gradtrace show example:chain_rule --json > trace.json\n\n"
    "  gradtrace show example:real/gpt_tiny --profile\n\n"
    "  gradtrace show trace.json\n\n"
    "  gradtrace show example:chain_rule --strict --format github\n\n"
    "Exit codes: 0 success, 1 a finding failed --strict or --fail-on, 2 bad input, or a "
    "scenario that cannot run, raised (in backward() too), exited non-zero, timed out or "
    "made no graph (what it recorded is shown first).",
)
def show(
    scenario: str = typer.Argument(..., help="A scenario .py file, FILE::FUNC (call one "
                                   "function of it), a bundled example:NAME (see "
                                   "`gradtrace examples`), or a trace .json saved by "
                                   "--json.",
                                   metavar="SCENARIO"),
    script_args: list[str] | None = SCRIPT_ARGS,
    root: list[str] | None = ROOT,
    out: Path | None = typer.Option(None, "-o", "--output", metavar="FILE",
                                    help="Write what would be printed to this file instead "
                                    "(a .json FILE: the trace as JSON, as --json)."),
    no_backward: bool = NO_BACKWARD,
    timeout: float | None = TIMEOUT,
    passes: str = PASSES,
    as_json: bool = typer.Option(False, "--json", help="Print the trace as JSON "
                                 "(schema gradtrace.trace/2) instead of the report."),
    saved: bool = typer.Option(False, "--saved",
                               help="Show the tensors each node saved for backward."),
    max_depth: int = typer.Option(30, "--max-depth", min=1, metavar="N",
                                  help="Cut the tree this deep."),
    max_nodes: int | None = typer.Option(None, "--max-nodes", min=1, metavar="N",
                                         help="Print at most this many tree lines "
                                         "(default: 40, a screen)."),
    show_all: bool = typer.Option(False, "--all",
                                  help="Print every tree line, tensor, pass and .grad change, "
                                  "and long lines in full (by default each section fits a "
                                  "screen and says what it left out)."),
    by_module: bool = typer.Option(False, "--by-module",
                                   help="One row per nn.Module: nodes, parameters, gradient "
                                   "norm in and out, saved bytes."),
    tree: bool = typer.Option(False, "--tree",
                              help="The node tree, tensors and passes even for a big model "
                              "(past 60 nodes made by nn.Modules, the module summary leads)."),
    pass_number: str | None = PASS,
    lead_with: str = LEAD_WITH,
    profile: bool = PROFILE,
    derivative_order: int = typer.Option(1, "--order", min=1, max=2, metavar="K",
                              help="2: also compute second derivatives of the scalar root "
                              "with respect to the named leaves (a Hessian for small ones)."),
    strict: bool = STRICT,
    fail_on: str | None = FAIL_ON,
    out_format: str = findings_format("text (the report), or github: the findings as GitHub "
                                      "Actions annotations on their file and line."),
    ranks: str = RANKS,
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """Run a scenario and show its autograd graph, tensors, passes and findings."""
    failing = fail_on_codes(fail_on)  # checked before the scenario runs
    library_first = library_leads(lead_with)
    printed = _printed(out_format, as_json, out)
    ranked = RankedShow(ranks, out, printed)
    target = None if ranked.target is None else absolute(ranked.target)  # before any chdir
    source = input_file(scenario)  # the script's folder may be gone after its run
    try:
        loaded = load_trace(scenario, root or [],
                            backward=not no_backward, derivative_order=derivative_order,
                            saved=saved or printed == "json" or by_module,
                            run=RunChoices(script_args, passes, timeout, pass_number),
                            profile=profile)
    except GradtraceError as exc:
        ranked.tell(None, exc.message.splitlines()[0])
        raise
    trace = loaded.trace
    shown_pass = pick_pass(trace, pass_number)
    from ..render.report import summarised

    # a big model's report leads with its modules, unless the tree is asked for
    tree = tree or show_all or max_nodes is not None or saved
    modules = by_module or (not tree and printed == "text" and summarised(trace))
    # the report's panel shows what the scenario printed; JSON, annotations and a file do
    # not (a rank that prints no report keeps its output in its trace, not on stderr)
    on_screen = printed == "text" and target is None
    # the report's stopped-pass finding is seen beside the error line only where stdout
    # goes where stderr goes (not `show x.py > report.txt`)
    ending = loaded.ending(printed_shown=not ranked.prints or on_screen and not by_module,
                           findings_shown=ranked.prints and on_screen
                           and stdout_beside_stderr())
    ranked.tell(trace, None if ending is None else ending.message.splitlines()[0])
    shows = ranked.writes or (target is None and ranked.prints)
    if shows:
        with ranked.in_turn():
            _show(led_by_library(trace) if library_first and printed != "json" else trace,
                  shown_pass, printed, target, source, ranked.heading(),
                  (by_module, modules), show_all, max_nodes, max_depth, saved, profile)
    if others := ranked.others():
        _emit_lines(others, to_stdout=target is None and printed == "text")
    if shows:
        told_after(scenario, loaded, script_args, target, printed == "json")
    if ending is not None:
        if not ranked.prints and ranked.said:  # the shown rank's line for it says why
            raise typer.Exit(ExitCode.USAGE)
        raise ending
    if findings_fail(trace.findings, strict, failing):
        raise typer.Exit(ExitCode.FAILED)


def _show(trace: Trace, shown_pass: Pass | None, printed: str, target: Path | None,
          source: Path, heading: str | None, modules: tuple[bool, bool], show_all: bool,
          max_nodes: int | None, max_depth: int, saved: bool, profile: bool = False) -> None:
    """Print or write the trace as asked: JSON, annotations, a module table (modules: asked
    for, shown) or the report."""
    console = stdout_console() if target is None else _file_console()
    if heading is not None and printed == "text" and target is None:
        console.rule(heading)
    if printed == "json":
        from ..render.json import json_chunks

        _emit(json_chunks(trace), target, source)
    elif printed == "github":
        from ..render.github import github_annotations

        _emit(github_annotations(trace.findings), target, source)
    elif modules[1]:
        from ..render.report import module_report

        console.print(module_report(trace, shown_pass, every=show_all, chosen=modules[0]))
    else:
        from ..render.report import Budget, report

        budget = Budget.everything() if show_all else Budget()
        if max_nodes is not None:
            budget = budget._replace(tree_lines=max_nodes)
        # --all: long lines in full (the terminal wraps them); else cut at its width, with …
        console.print(report(trace, shown_pass, max_depth, budget, saved,
                             cut=not show_all), crop=not show_all)
    if profile and printed == "text":
        from ..render.profile import cost_view

        console.print(cost_view(trace, every=show_all), crop=not show_all)
    if target is not None and printed == "text":
        assert isinstance(console.file, io.StringIO)
        _emit(console.file.getvalue(), target, source)


def _emit_lines(lines: list[str], to_stdout: bool) -> None:
    """The other ranks' lines: after the report on stdout, else on stderr (JSON stays whole)."""
    if to_stdout:
        write_stdout("".join(f"{line}\n" for line in lines))
    else:
        console = stderr_console()
        for line in lines:
            console.print(Text(line))


def _printed(out_format: str, as_json: bool, out: Path | None) -> str:
    """json, github or text; -o FILE.json is --json, and nothing else may say otherwise."""
    printed = printed_as(out_format, as_json)
    if out is None:
        return printed
    if out.suffix.lower() == ".json":
        if printed == "github":
            raise GradtraceError(f"--format github and -o {out} disagree: a .json file holds "
                                 "the trace", "give one of them")
        return "json"
    if printed == "json" and not is_stream(out):  # a device or FIFO takes what is asked
        raise GradtraceError(f"--json and -o {out} disagree: JSON goes to a .json file",
                             f"write -o {out.with_suffix('.json')}, or drop --json")
    return printed


def _file_console() -> Console:
    """A console that keeps the report for a file: 120 columns, no colour."""
    return visible_console(Console(file=io.StringIO(), width=120, color_system=None,
                                   highlight=False))


def _emit(data: str | Iterable[str], target: Path | None, source: Path) -> None:
    """Output to stdout, or atomically to -o FILE (never over the scenario's file)."""
    if target is None:
        write_stdout(data)
    else:
        text = data if isinstance(data, str) else "".join(data)
        write_atomic(target, text.encode("utf-8"), protected=[source])
