"""`gradtrace show`: the graph tree, tensor table, passes and findings of one scenario."""

from __future__ import annotations

import typer
from rich.console import Console

from ..errors import GradtraceError
from .core import (
    DEBUG,
    NO_BACKWARD,
    PASS,
    PASSES,
    ROOT,
    SCRIPT_ARGS,
    TIMEOUT,
    ExitCode,
    app,
    stdout_console,
    write_stdout,
)
from .inputs import RunChoices, load_trace, pick_pass


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace show scenarios/chain_rule.py\n\n"
    "  gradtrace show scenarios/real/train_args.py --passes 2 -- --epochs 1\n\n"
    "  gradtrace show scenarios/real/test_value_grads.py::test_sanity_check\n\n"
    "  gradtrace show scenarios/shopping_apple_tangerine.py --root result --saved\n\n"
    "  gradtrace show scenarios/real/gpt_tiny.py --by-module\n\n"
    "  gradtrace show scenarios/chain_rule.py --json > trace.json\n\n"
    "  gradtrace show trace.json\n\n"
    "  gradtrace show scenarios/chain_rule.py --fail-on nan-gradient --format github\n\n"
    "Exit codes: 0 success, 1 a finding failed --strict or --fail-on, 2 bad input, or a "
    "scenario that cannot run, raised (in backward() too), exited non-zero, timed out or "
    "made no graph (what it recorded is shown first).",
)
def show(
    scenario: str = typer.Argument(..., help="A scenario .py file, FILE::FUNC (call one "
                                   "function of it), or a trace .json saved by --json.",
                                   metavar="SCENARIO"),
    script_args: list[str] | None = SCRIPT_ARGS,
    root: list[str] | None = ROOT,
    old_output: list[str] | None = typer.Option(None, "--output", hidden=True,
                                                help="Old name of --root."),
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
    pass_number: str | None = PASS,
    derivative_order: int = typer.Option(1, "--order", min=1, max=2, metavar="K",
                              help="2: also compute second derivatives of the scalar root "
                              "with respect to the named leaves (a Hessian for small ones)."),
    strict: bool = typer.Option(False, "--strict",
                                help="Exit 1 when there is an error or warning finding."),
    fail_on: str | None = typer.Option(None, "--fail-on", metavar="CODE[,CODE]",
                                       help="Exit 1 when a finding with one of these codes "
                                       "appears (codes: see the README's Findings table)."),
    out_format: str = typer.Option("text", "--format", metavar="FMT",
                                   help="text (the report), or github: the findings as GitHub "
                                   "Actions annotations on their file and line."),
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """Run a scenario and show its autograd graph, tensors, passes and findings."""
    failing = _fail_on_codes(fail_on)  # checked before the scenario runs
    if out_format not in ("text", "github"):
        raise GradtraceError(f"--format {out_format!r}: use text or github")
    if old_output:
        Console(stderr=True, highlight=False).print(
            "note: `show --output NAME` is now `--root NAME`; --output will be removed in the "
            "next release")
    loaded = load_trace(scenario, [*(root or ()), *(old_output or ())],
                                backward=not no_backward, derivative_order=derivative_order,
                                saved=saved or as_json or by_module,
                                run=RunChoices(script_args, passes, timeout, pass_number))
    trace = loaded.trace
    shown_pass = pick_pass(trace, pass_number)
    if as_json:
        from ..render.json import json_chunks

        write_stdout(json_chunks(trace))
    elif out_format == "github":
        from ..render.github import github_annotations

        write_stdout(github_annotations(trace.findings))
    elif by_module:
        from ..render.report import module_report

        stdout_console().print(module_report(trace, shown_pass, every=show_all))
    else:
        from ..render.report import Budget, report

        budget = Budget.everything() if show_all else Budget()
        if max_nodes is not None:
            budget = budget._replace(tree_lines=max_nodes)
        # --all: long lines in full (the terminal wraps them); else cut at its width, with …
        stdout_console().print(report(trace, shown_pass, max_depth, budget, saved,
                                      cut=not show_all), crop=not show_all)
    # the report's panel shows what the scenario printed; JSON and annotations do not
    ending = loaded.ending(printed_shown=out_format == "text" and not as_json and not by_module)
    if ending is not None:
        raise ending
    if strict and any(f.severity in ("error", "warning") for f in trace.findings):
        raise typer.Exit(ExitCode.FAILED)
    if any(f.code in failing for f in trace.findings):
        raise typer.Exit(ExitCode.FAILED)


def _fail_on_codes(text: str | None) -> set[str]:
    """--fail-on CODE[,CODE]: the codes, each one the registry declares."""
    from ..findings.registry import CODES

    codes = {c.strip() for c in (text or "").split(",") if c.strip()}
    unknown = sorted(codes - set(CODES))
    if unknown:
        raise GradtraceError(f"--fail-on: no finding has the code {', '.join(unknown)}",
                             "codes: " + ", ".join(CODES))
    return codes
