"""The `gradtrace` command: options, the one error boundary, and exit codes.

torch is imported only inside the commands that run a scenario, so `--help` stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from . import __version__
from .errors import ExitCode, GradtraceError, TraceFileError
from .model import Pass, Trace

app = typer.Typer(
    name="gradtrace",
    help="See what PyTorch autograd actually does: graphs, tensors, gradients, passes.\n\n"
    "A scenario is an ordinary Python file that builds tensors; gradtrace runs it "
    "(with your rights, like pytest runs a test file), walks its autograd graph and shows it.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

DEBUG_HELP = "Show gradtrace's own traceback on errors (also GRADTRACE_DEBUG=1)."


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradtrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """gradtrace: an autograd graph inspector for PyTorch."""


@contextlib.contextmanager
def error_boundary(debug: bool) -> Iterator[None]:
    """Print a GradtraceError as `error:` / `hint:` on stderr and exit 2; --debug re-raises."""
    try:
        yield
    except GradtraceError as exc:
        if debug or os.environ.get("GRADTRACE_DEBUG"):
            raise
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        err.print(Text("error: ", style="bold red") + Text(exc.message))
        if exc.hint:
            err.print(Text("hint: ", style="bold") + Text(exc.hint))
        raise typer.Exit(ExitCode.USAGE) from None


def stdout_console() -> Console:
    """Rich console for reports: colour only on a terminal; 120 columns when piped."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=120)
    return console


def pick_pass(trace: Trace, number: int | None) -> Pass | None:
    """Pass N (1-based), or by default the last pass that moved any gradient."""
    if number is not None:
        if number > len(trace.passes):
            raise GradtraceError(f"--pass {number}: the scenario ran {len(trace.passes)} "
                                 "pass(es)", "passes are numbered from 1 in `gradtrace show`")
        return trace.passes[number - 1]
    with_flow = [p for p in trace.passes if p.flow]
    return with_flow[-1] if with_flow else None


def load_trace(source: str, outputs: list[str], backward: bool, order: int = 1) -> Trace:
    """A Trace from a scenario .py file (run now) or a saved .json trace."""
    if source.endswith(".json"):
        if outputs:
            raise GradtraceError("--output applies to scenarios, not to saved traces",
                                 f"drop --output, or pass the scenario instead of {source}")
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TraceFileError(f"no such file: {source}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TraceFileError(f"{source} is not readable JSON: {exc}") from exc
        return Trace.from_dict(data)
    from .scenario import run_scenario  # imports torch

    return run_scenario(source, outputs, backward, order)


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace show scenarios/chain_rule.py\n\n"
    "  gradtrace show scenarios/shopping_apple_tangerine.py --output result --saved\n\n"
    "  gradtrace show scenarios/chain_rule.py --json > trace.json\n\n"
    "  gradtrace show trace.json\n\n"
    "Exit codes: 0 success, 1 a finding failed --strict, 2 bad input or a scenario that "
    "cannot run.",
)
def show(
    scenario: str = typer.Argument(..., help="A scenario .py file, or a trace .json saved "
                                   "by --json.", metavar="SCENARIO"),
    output: list[str] | None = typer.Option(
        None, "--output", metavar="NAME",
        help="Root the graph at this named tensor (repeatable). Default: the scenario's OUTPUT, "
        "else the last named tensor with a grad_fn."),
    no_backward: bool = typer.Option(False, "--no-backward",
                                     help="Do not run backward when the scenario runs none."),
    as_json: bool = typer.Option(False, "--json", help="Print the trace as JSON "
                                 "(schema gradtrace.trace/1) instead of the report."),
    saved: bool = typer.Option(False, "--saved",
                               help="Show the tensors each node saved for backward."),
    max_depth: int = typer.Option(30, "--max-depth", min=1, metavar="N",
                                  help="Cut the tree this deep."),
    max_nodes: int = typer.Option(300, "--max-nodes", min=1, metavar="N",
                                  help="Print at most this many tree lines."),
    pass_number: int | None = typer.Option(
        None, "--pass", metavar="N", min=1,
        help="Annotate the tree with the gradients of pass N (default: the last that ran)."),
    order: int = typer.Option(1, "--order", min=1, max=2, metavar="K",
                              help="2: also compute second derivatives of the scalar root "
                              "with respect to the named leaves (a Hessian for small ones)."),
    strict: bool = typer.Option(False, "--strict",
                                help="Exit 1 when there is an error or warning finding."),
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),
) -> None:
    """Run a scenario and show its autograd graph, tensors, passes and findings."""
    with error_boundary(debug):
        trace = load_trace(scenario, output or [], backward=not no_backward, order=order)
        shown_pass = pick_pass(trace, pass_number)
    if as_json:
        from .render.json import to_json

        sys.stdout.write(to_json(trace))
    else:
        from .render.report import (
            findings_view,
            graph_title,
            header,
            passes_view,
            scenario_output,
            second_order_view,
        )
        from .render.table import tensor_table
        from .render.tree import graph_tree

        console = stdout_console()
        console.print(header(trace))
        printed = scenario_output(trace)
        if printed is not None:
            console.print(printed)
        console.print(graph_title(trace, shown_pass))
        # soft_wrap: a deep tree's long lines wrap in the terminal instead of being cropped
        console.print(graph_tree(trace, max_depth=max_depth, max_nodes=max_nodes, saved=saved,
                                 flow=shown_pass), soft_wrap=True)
        console.print()
        console.print(tensor_table(trace))
        console.print(Text("\npasses", style="bold"))
        console.print(passes_view(trace))
        second = second_order_view(trace)
        if second is not None:
            console.print()
            console.print(second)
        findings = findings_view(trace)
        if findings is not None:
            console.print(Text("\nfindings", style="bold"))
            console.print(findings)
    if strict and any(f.severity in ("error", "warning") for f in trace.findings):
        raise typer.Exit(ExitCode.FINDINGS)


def main() -> None:
    """Console entry point."""
    app()
