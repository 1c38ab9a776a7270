"""`gradtrace show`: the graph tree, tensor table, passes and findings of one scenario."""

from __future__ import annotations

import io
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import typer
from rich.console import Console, Group, RenderableType
from rich.text import Text

from ..errors import GradtraceError
from ..model.labels import led_by_library
from ..model.records import Pass, Trace
from ..model.run_log import RunLog
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
from .inputs import Loaded, load_trace, pick_pass, told_after
from .options import GraphOptions
from .output import stderr_console, stdout_beside_stderr, stdout_console, write_stdout
from .ranked import RANKS, RankedShow

if TYPE_CHECKING:  # (capture imports torch when it runs)
    from ..capture.options import RunListener


@dataclass(frozen=True)
class ShowOptions(GraphOptions):
    """What `gradtrace show` was asked."""

    as_json: bool
    max_depth: int
    show_all: bool
    by_module: bool
    tree: bool
    derivative_order: int
    out_format: str
    ranks: str


class Output(NamedTuple):
    """Where show's output goes: what is printed (json, github or text), the file written
    (None: stdout), and the scenario's own file, never written over."""

    printed: str
    target: Path | None
    source: Path


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
                                 "(schema gradtrace.trace/3) instead of the report."),
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
    show_trace(ShowOptions.given(locals()))


def show_trace(asked: ShowOptions, listener: RunListener | None = None) -> None:
    """`gradtrace show`: run or read the scenario, show it as asked (this rank's part of it
    under torchrun), and exit as it ended and as its findings say (listener: told while the
    scenario runs, as `gradtrace watch` asks)."""
    failing = fail_on_codes(asked.fail_on)  # checked before the scenario runs
    library_first = library_leads(asked.lead_with)
    printed = _printed(asked.out_format, asked.as_json, asked.out)
    ranked = RankedShow(asked.ranks, asked.out, printed)
    target = None if ranked.target is None else absolute(ranked.target)  # before any chdir
    # the script's folder may be gone after its run
    output = Output(printed, target, input_file(asked.scenario))
    loaded = _load(asked, output, ranked, listener)
    trace = loaded.trace
    shown_pass = pick_pass(trace, asked.pass_number)
    from ..render.report import summarised

    # a big model's report leads with its modules, unless the tree is asked for
    tree = asked.tree or asked.show_all or asked.max_nodes is not None or asked.saved
    modules = asked.by_module or (not tree and printed == "text" and summarised(trace))
    # the report's panel shows what the scenario printed; JSON, annotations and a file do
    # not (a rank that prints no report keeps its output in its trace, not on stderr)
    on_screen = printed == "text" and target is None
    # the report's stopped-pass finding is seen beside the error line only where stdout
    # goes where stderr goes (not `show x.py > report.txt`)
    ending = loaded.ending(printed_shown=not ranked.prints
                           or on_screen and not asked.by_module,
                           findings_shown=ranked.prints and on_screen
                           and stdout_beside_stderr())
    ranked.tell(trace, None if ending is None else ending.message.splitlines()[0])
    shows = ranked.writes or (target is None and ranked.prints)
    if shows:
        with ranked.in_turn():
            _show(led_by_library(trace) if library_first and printed != "json" else trace,
                  shown_pass, asked, output, ranked.heading(), modules, loaded.log)
    if others := ranked.others():
        _emit_lines(others, to_stdout=target is None and printed == "text")
    if shows:
        told_after(asked.scenario, loaded, asked.script_args, target, printed == "json")
    if ending is not None:
        if not ranked.prints and ranked.said:  # the shown rank's line for it says why
            raise typer.Exit(ExitCode.USAGE)
        raise ending
    if findings_fail(trace.findings, asked.strict, failing):
        raise typer.Exit(ExitCode.FAILED)


def _load(asked: ShowOptions, output: Output, ranked: RankedShow,
          listener: RunListener | None) -> Loaded:
    """The scenario run (or its saved trace read) for show; an error that stops it is told
    to the other ranks first."""
    try:
        return load_trace(asked.scenario, asked.roots, backward=not asked.no_backward,
                          derivative_order=asked.derivative_order,
                          saved=asked.saved or output.printed == "json" or asked.by_module,
                          run=asked.run(asked.pass_number), profile=asked.profile,
                          listener=listener)
    except GradtraceError as exc:
        ranked.tell(None, exc.message.splitlines()[0])
        raise


def _show(trace: Trace, shown_pass: Pass | None, asked: ShowOptions, output: Output,
          heading: str | None, modules: bool, log: RunLog | None) -> None:
    """Print or write the trace as asked: JSON, annotations, a run log's report (log: the
    trace was read from one), a module table (modules: shown) or the report."""
    printed, target = output.printed, output.target
    console = stdout_console() if target is None else _file_console()
    if heading is not None and printed == "text" and target is None:
        console.rule(heading)
    if printed == "json":
        from ..render.json import json_chunks

        _emit(json_chunks(trace), output)
    elif printed == "github":
        from ..render.github import github_annotations

        _emit(github_annotations(trace.findings), output)
    elif log is not None:
        console.print(_log_report(log, trace, asked))
    elif modules:
        from ..render.report import module_report

        console.print(module_report(trace, shown_pass, every=asked.show_all,
                                    chosen=asked.by_module))
    else:
        from ..render.report import Budget, report

        budget = Budget.everything() if asked.show_all else Budget()
        if asked.max_nodes is not None:
            budget = budget._replace(tree_lines=asked.max_nodes)
        # --all: long lines in full (the terminal wraps them); else cut at its width, with …
        console.print(report(trace, shown_pass, asked.max_depth, budget, asked.saved,
                             cut=not asked.show_all), crop=not asked.show_all)
    if asked.profile and printed == "text":
        from ..render.profile import cost_view

        console.print(cost_view(trace, every=asked.show_all), crop=not asked.show_all)
    if target is not None and printed == "text":
        assert isinstance(console.file, io.StringIO)
        _emit(console.file.getvalue(), output)


def _log_report(log: RunLog, trace: Trace, asked: ShowOptions) -> Group:
    """A run log's report: what ran and how it ended, its steps and its findings (a log
    holds no graph, tensors or passes' detail)."""
    from ..render.report import findings_view
    from ..render.steps import ROWS, steps_view

    assert log.header is not None  # read_log's caller refuses a log without one
    text = Text()
    text.append("run log ", style="dim")
    text.append(shlex.join([log.header.script, *log.header.argv]), style="bold")
    text.append(f"  ·  started {log.header.started}"
                + (f"  ·  {log.outcome}" if log.ended else ""), style="dim")
    if not log.ended:
        text.append("\nno end line: the run goes on, or was killed"
                    + ("; its last line, cut short, is skipped" if log.torn else ""),
                    style="yellow")
    parts: list[RenderableType] = [text]
    steps = steps_view(trace, asked.by_module, None if asked.show_all else ROWS, min_passes=1)
    parts.append(steps if steps is not None else Text("no step rows yet", style="dim"))
    findings = findings_view(trace)
    if findings is not None:
        parts += [Text("\nfindings", style="bold"), findings]
    return Group(*parts)


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


def _emit(data: str | Iterable[str], output: Output) -> None:
    """Output to stdout, or atomically to -o FILE (never over the scenario's file)."""
    if output.target is None:
        write_stdout(data)
    else:  # a trace's pieces as they are made: never whole in memory
        write_atomic(output.target, (piece.encode("utf-8") for piece in
                                     ([data] if isinstance(data, str) else data)),
                     protected=[output.source])
