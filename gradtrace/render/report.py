"""The `gradtrace show` report: header, scenario output, tree, table, passes, findings."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from ..model.labels import grad_text, number
from ..model.records import Pass, Trace
from .table import tensor_table
from .tree import graph_tree

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


def report(trace: Trace, shown_pass: Pass | None, max_depth: int = 30, max_nodes: int = 300,
           saved: bool = False) -> Group:
    """Every section of `gradtrace show`, in order."""
    parts: list[RenderableType] = [header(trace)]
    printed = scenario_output(trace)
    if printed is not None:
        parts.append(printed)
    parts += [graph_title(trace, shown_pass),
              graph_tree(trace, max_depth=max_depth, max_nodes=max_nodes, saved=saved,
                         flow=shown_pass),
              Text(), tensor_table(trace), Text("\npasses", style="bold"), passes_view(trace)]
    second = second_order_view(trace)
    if second is not None:
        parts += [Text(), second]
    findings = findings_view(trace)
    if findings is not None:
        parts += [Text("\nfindings", style="bold"), findings]
    return Group(*parts)


def header(trace: Trace) -> Text:
    """Which scenario, which roots and why, and how to pick others."""
    text = Text()
    text.append("scenario ", style="dim")
    text.append(trace.scenario or "(python)", style="bold")
    text.append(f"  ·  {len(trace.nodes)} nodes, {len(trace.edges)} edges, "
                f"{len(trace.passes)} pass(es)\n", style="dim")
    if trace.output_names:
        text.append("output ", style="dim")
        text.append(", ".join(trace.output_names), style="bold cyan")
        text.append(f"  ({trace.root_reason}; pick others with --root NAME)", style="dim")
    else:
        text.append("no output: the scenario builds no autograd graph", style="yellow")
    return text


def graph_title(trace: Trace, shown: Pass | None) -> Text:
    """ "graph · gradients of pass 2 (line 13 `y.backward(...)`)"."""
    text = Text("\ngraph", style="bold")
    if shown is not None:
        number_ = trace.passes.index(shown) + 1
        where = f" at line {shown.line} `{shown.code}`" if shown.line else " by gradtrace"
        text.append(f"  ·  gradients of pass {number_}{where}", style="dim")
        if len(trace.passes) > 1:
            text.append("; --pass N shows another", style="dim")
    return text


OUTPUT_LINES = 40  # the terminal shows the end of what a scenario printed; --json has it all
LINE_LIMIT = 1_000  # characters of one printed line (a 500 MB line would take minutes to wrap)


def scenario_output(trace: Trace) -> RenderableType | None:
    """What the scenario printed (its last lines, each cut), in its own panel; None if nothing."""
    if not trace.stdout.strip():
        return None
    printed = trace.stdout.rstrip("\n")
    lines = printed.rsplit("\n", OUTPUT_LINES)  # only the end is split: stdout may be huge
    text = Text()
    if len(lines) > OUTPUT_LINES:
        text.append(f"… {printed.count(chr(10)) + 1 - OUTPUT_LINES} earlier lines (all of them "
                    "are in --json's stdout)\n", style="dim")
        lines = lines[1:]
    text.append("\n".join(line if len(line) <= LINE_LIMIT else
                          f"{line[:LINE_LIMIT]} … ({len(line) - LINE_LIMIT:,} more characters)"
                          for line in lines))
    return Panel(text, title="scenario output", title_align="left", border_style="dim")


def passes_view(trace: Trace) -> RenderableType:
    """Each backward/grad pass in order: where, roots, flags, error, and the .grad it changed."""
    if not trace.passes:
        return Text("no backward pass (--no-backward)", style="dim")
    parts: list[RenderableType] = []
    for i, p in enumerate(trace.passes, 1):
        text = Text()
        text.append(f"pass {i} ", style="bold")
        call = "torch.autograd.grad" if p.kind == "grad" else "backward"
        if p.by == "gradtrace":
            text.append(f"{call} by gradtrace", style="")
        else:
            text.append(f"{call} at line {p.line}" if p.line else call)
            if p.code:
                text.append(f"  {p.code}", style="cyan")
        names = [n or "(unnamed)" for n in p.root_names]
        text.append(f"\n  roots {', '.join(names) or '-'}", style="dim")
        text.append(f"  retain_graph={p.retain_graph} create_graph={p.create_graph}",
                    style="dim")
        for c in p.grad_changes:
            text.append(f"\n  {c.tensor}.grad  {grad_text(c.before)} → {grad_text(c.after)}")
        if not p.grad_changes and p.error is None:
            text.append("\n  no named .grad changed", style="dim")
        if p.error:
            text.append("\n  failed: " + p.error.splitlines()[0], style="bold red")
        parts.append(text)
    return Group(*parts)


def second_order_view(trace: Trace) -> RenderableType | None:
    """ "d²z/dx² = -0.12" for scalar leaves, a matrix per pair of vector leaves."""
    s = trace.second_order
    if s is None:
        return None
    text = Text()
    text.append(f"second derivatives of {s.root}", style="bold")
    if s.error:
        text.append(f"\n  not computed: {s.error}", style="yellow")
        return text
    for (a, b), values in s.blocks.items():
        wrt = f"d{a}²" if a == b else f"d{a} d{b}"
        text.append(f"\n  d²{s.root}/{wrt} = ")
        if isinstance(values, list) and values and isinstance(values[0], list):
            text.append("".join(
                "\n    [" + ", ".join(number(v) for v in row) + "]" for row in values))
        elif isinstance(values, list):
            text.append("[" + ", ".join(number(v) for v in values) + "]")
        else:
            text.append(number(values), style="bold yellow")
    return text


def findings_view(trace: Trace) -> RenderableType | None:
    """The findings, most severe first; None when there are none."""
    if not trace.findings:
        return None
    order = {"error": 0, "warning": 1, "info": 2}
    text = Text()
    for f in sorted(trace.findings, key=lambda f: order.get(f.severity, 3)):
        if text:
            text.append("\n")
        text.append(f"{f.severity} ", style=SEVERITY_STYLE.get(f.severity, ""))
        text.append(f"[{f.code}] ", style="dim")
        text.append(f.message)
        if f.hint:
            text.append(f"\n  hint: {f.hint}", style="dim")
    return text
