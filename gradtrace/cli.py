"""The `gradtrace` command: options, the one error boundary, and exit codes.

torch is imported only inside the commands that run a scenario, so `--help` stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from . import __version__
from .errors import ExitCode, ExportError, GradtraceError, TraceFileError
from .model import Pass, Trace

app = typer.Typer(
    name="gradtrace",
    help="See what PyTorch autograd actually does: graphs, tensors, gradients, passes.\n\n"
    "A scenario is an ordinary Python file that builds tensors; gradtrace runs it "
    "(with your rights, like pytest runs a test file), walks its autograd graph and shows it.",
    epilog="Examples:\n\n"
    "  gradtrace show scenarios/chain_rule.py       the graph, tensors and gradient flow\n\n"
    "  gradtrace dot scenarios/chain_rule.py -o graph.svg\n\n"
    "`gradtrace COMMAND --help` tells more.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Options that mean the same in every command, declared once.
DEBUG = typer.Option(False, "--debug",
                     help="Show gradtrace's own traceback on errors (also GRADTRACE_DEBUG=1).")
OUTPUT = typer.Option(None, "--output", metavar="NAME",
                      help="Root the graph at this named tensor, or NAME.grad (repeatable). "
                      "Default: the scenario's OUTPUT, else the last named tensor with a "
                      "grad_fn.")
NO_BACKWARD = typer.Option(False, "--no-backward",
                           help="Do not run backward when the scenario runs none.")


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


def load_trace(source: str, outputs: list[str], backward: bool, order: int = 1,
               saved: bool = True, flow: bool = True) -> Trace:
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

    return run_scenario(source, outputs, backward, order, saved, flow)


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
    output: list[str] | None = OUTPUT,
    no_backward: bool = NO_BACKWARD,
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
    debug: bool = DEBUG,
) -> None:
    """Run a scenario and show its autograd graph, tensors, passes and findings."""
    with error_boundary(debug):
        trace = load_trace(scenario, output or [], backward=not no_backward, order=order,
                           saved=saved or as_json)
        shown_pass = pick_pass(trace, pass_number)
    if as_json:
        from .render.json import to_json

        sys.stdout.write(to_json(trace))
    else:
        print_report(stdout_console(), trace, shown_pass, max_depth, max_nodes, saved)
    if strict and any(f.severity in ("error", "warning") for f in trace.findings):
        raise typer.Exit(ExitCode.FINDINGS)


def print_report(console: Console, trace: Trace, shown_pass: Pass | None, max_depth: int = 30,
                 max_nodes: int = 300, saved: bool = False) -> None:
    """The `gradtrace show` report, section by section, on a rich console."""
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


FORMATS = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png", ".pdf": "pdf",
           ".json": "json", ".mmd": "mmd", ".mermaid": "mmd"}
BINARY_FORMATS = ("png", "pdf")


def export_format(path: Path | None, explicit: str | None) -> str:
    """--format, else the output file's suffix, else DOT."""
    if explicit is not None:
        fmt = explicit.lower().lstrip(".")
        if fmt not in set(FORMATS.values()):
            raise ExportError(f"unknown --format {explicit!r}",
                              "formats: " + ", ".join(sorted(set(FORMATS.values()))))
        return fmt
    if path is None:
        return "dot"
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ExportError(
            f"cannot tell the format of {path} from its suffix {path.suffix or '(none)'!r}",
            "use .dot, .svg, .png, .pdf, .json or .mmd, or give --format",
        )
    return fmt


def write_atomic(path: Path, data: bytes, protected: list[Path]) -> None:
    """Write data to path through a temporary file, so a failure leaves no half-written file."""
    target = path.resolve()
    if any(target == p.resolve() for p in protected):
        raise ExportError(f"refusing to overwrite {path}: it is the input",
                          "choose another output file")
    if target.is_dir():
        raise ExportError(f"{path} is a directory", "give a file name, e.g. graph.svg")
    if not target.parent.is_dir():
        raise ExportError(f"cannot write {path}: folder {target.parent} does not exist")
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                    suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        # mkstemp makes the file private (0600); give it the mode a plain open() would
        mask = os.umask(0)
        os.umask(mask)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~mask
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise ExportError(f"cannot write {path}: {exc.strerror}") from None


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace dot scenarios/chain_rule.py                  DOT on stdout\n\n"
    "  gradtrace dot scenarios/chain_rule.py -o graph.svg     picture (needs Graphviz)\n\n"
    "  gradtrace dot scenarios/two_paths_add_up.py --grads -o flow.png\n\n"
    "  gradtrace dot trace.json -o graph.mmd                  Mermaid, from a saved trace\n\n"
    "  gradtrace dot model.py --focus model.0.weight --radius 3 -o near.svg\n\n"
    "Formats by suffix: .dot .svg .png .pdf .json .mmd (Mermaid). Exit codes: 0 success, "
    "2 bad input or an output that cannot be written.",
)
def dot(
    scenario: str = typer.Argument(..., help="A scenario .py file, or a trace .json saved "
                                   "by `gradtrace show --json`.", metavar="SCENARIO"),
    out: Path | None = typer.Option(None, "-o", "--file", metavar="FILE",
                                    help="Write this file; its suffix picks the format. "
                                    "Default: DOT on stdout."),
    fmt: str | None = typer.Option(None, "--format", metavar="FMT",
                                   help="dot, svg, png, pdf, json or mmd; overrides the "
                                   "suffix."),
    output: list[str] | None = OUTPUT,
    saved: bool = typer.Option(False, "--saved",
                               help="Show each node's saved tensors (name, shape, bytes)."),
    grads: bool = typer.Option(False, "--grads",
                               help="Label edges with the gradient sent along them."),
    pass_number: int | None = typer.Option(None, "--pass", metavar="N", min=1,
                                           help="The pass for --grads (default: the last)."),
    rankdir: str = typer.Option("TB", "--rankdir", metavar="DIR",
                                help="Layout direction: TB, BT, LR or RL."),
    max_nodes: int | None = typer.Option(None, "--max-nodes", metavar="N", min=1,
                                         help="Draw at most N nodes, and a '… more' box."),
    no_fold: bool = typer.Option(False, "--no-fold",
                                 help="Draw repeated chains node by node."),
    focus: str | None = typer.Option(None, "--focus", metavar="NODE",
                                     help="Draw only around this node id or named tensor."),
    radius: int = typer.Option(2, "--radius", metavar="K", min=0,
                               help="With --focus: how many edges away to draw."),
    module_depth: int | None = typer.Option(None, "--module-depth", metavar="N", min=0,
                                            help="Group nodes by module path up to N levels."),
    no_backward: bool = NO_BACKWARD,
    debug: bool = DEBUG,
) -> None:
    """Export the autograd graph: DOT, SVG, PNG, PDF, JSON or Mermaid."""
    from .render.dot import RENDERED, render, to_dot
    from .render.drawing import DrawOptions, drawing
    from .render.json import to_json
    from .render.mermaid import to_mermaid

    with error_boundary(debug):
        if rankdir.upper() not in ("TB", "BT", "LR", "RL"):
            raise GradtraceError(f"--rankdir {rankdir!r}: use TB, BT, LR or RL")
        chosen = export_format(out, fmt)
        if out is None and chosen in BINARY_FORMATS:
            raise ExportError(f"{chosen.upper()} is binary: write it to a file",
                              f"add -o graph.{chosen}")
        # saved tensors and gradient flow cost time on big graphs: only when they are shown
        # or exported
        trace = load_trace(scenario, output or [], backward=not no_backward,
                           saved=saved or chosen == "json", flow=grads or chosen == "json")
        if chosen == "json":
            data = to_json(trace).encode("utf-8")
        else:
            shown = pick_pass(trace, pass_number) if grads else None
            picture = drawing(trace, DrawOptions(
                saved=saved, grads=shown, max_nodes=max_nodes, fold=not no_fold,
                focus=focus, radius=radius, module_depth=module_depth))
            text = to_mermaid(picture, rankdir.upper()) if chosen == "mmd" \
                else to_dot(picture, rankdir.upper())
            data = render(text, chosen) if chosen in RENDERED else text.encode("utf-8")
        if out is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            write_atomic(out, data, protected=[Path(scenario)])


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace check scenarios/*.py                 every custom Function in the gallery\n\n"
    "  gradtrace check scenarios/broken/ --no-gradgrad\n\n"
    "  gradtrace check tests/ --junit report.xml      for CI\n\n"
    "A Function whose backward is meant not to be a derivative (straight-through, synthetic "
    "gradients) can say so with a class attribute: gradtrace_skip = \"why\".\n\n"
    "Exit codes: 0 every check passed, 1 a check failed, 2 a scenario cannot run.",
)
def check(
    paths: list[str] = typer.Argument(..., metavar="FILE_OR_DIR...",
                                      help="Scenario files, or folders to search for *.py."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE",
                                      help="Also write JUnit XML, for CI systems."),
    eps: float = typer.Option(1e-6, "--eps", help="Finite-difference step."),
    atol: float = typer.Option(1e-5, "--atol", help="Absolute tolerance."),
    rtol: float = typer.Option(1e-3, "--rtol", help="Relative tolerance."),
    fast: bool = typer.Option(False, "--fast", help="gradcheck's fast mode."),
    no_gradgrad: bool = typer.Option(False, "--no-gradgrad", help="Skip gradgradcheck."),
    debug: bool = DEBUG,
) -> None:
    """gradcheck and gradgradcheck every custom autograd.Function the scenarios call."""
    from rich.progress import Progress

    from .check import CheckOptions, check_scenario, scenario_files
    from .render.checks import check_table, mismatch_view, to_junit

    options = CheckOptions(eps=eps, atol=atol, rtol=rtol, fast=fast, gradgrad=not no_gradgrad)
    results, broken = [], {}
    files = scenario_files(paths)
    console = stdout_console()
    with Progress(console=Console(stderr=True), transient=True,
                  disable=len(files) < 2 or as_json) as progress:
        task = progress.add_task("checking", total=len(files))
        for path in files:
            try:
                with error_boundary(debug):
                    results.extend(check_scenario(path, options))
            except typer.Exit:
                broken[str(path)] = "the scenario cannot run (see the error above)"
            progress.advance(task)
    if junit is not None:
        with error_boundary(debug):
            write_atomic(junit, to_junit(results, broken).encode("utf-8"), [])
    if as_json:
        sys.stdout.write(json.dumps({"results": [r.to_dict() for r in results],
                                     "cannot_run": broken}, indent=2) + "\n")
    else:
        console.print(check_table(results) if results else
                      Text("no custom autograd.Function calls found", style="yellow"))
        for r in results:
            view = mismatch_view(r)
            if view is not None:
                console.print(view)
        passed = sum(r.ok for r in results)
        console.print(Text(f"{passed} of {len(results)} passed"
                           + (f"; {len(broken)} scenario(s) could not run" if broken else ""),
                           style="bold"))
    if broken:
        raise typer.Exit(ExitCode.USAGE)
    if any(not r.ok for r in results):
        raise typer.Exit(ExitCode.FINDINGS)


def main() -> None:
    """Console entry point."""
    app()
