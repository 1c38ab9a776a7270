"""The `gradtrace show` report: header, scenario output, tree, table, passes, findings."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from ..findings.registry import SCENARIO_STOPPED
from ..model.records import PACKED, Finding, Pass, Trace
from ..model.texts import grad_text, number, size_text
from .modules import module_table
from .numbers import number_text
from .steps import ROWS as STEPS_ROWS
from .steps import steps_view
from .table import tensor_table
from .tree import graph_tree

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


class Budget(NamedTuple):
    """How much of each section `show` prints: by default each fits a screen, with a
    "… N more" line saying what was left out (--all prints everything)."""

    tree_lines: int | None = 40
    table_rows: int | None = 20
    passes: int | None = 5  # the first passes and the last two
    changes: int | None = 6  # .grad changes listed per pass
    output_lines: int = 10  # the end of what the scenario printed
    steps_rows: int | None = STEPS_ROWS  # a loop's parameters (the section: 15 lines at most)

    @classmethod
    def everything(cls) -> Budget:
        return cls(None, None, None, None, 40, None)


def report(trace: Trace, shown_pass: Pass | None, max_depth: int = 30,
           budget: Budget = Budget(), saved: bool = False, cut: bool = True) -> Group:
    """Every section of `gradtrace show`, in order."""
    parts: list[RenderableType] = [header(trace)]
    printed = scenario_output(trace, budget.output_lines)
    if printed is not None:
        parts.append(printed)
    parts += [graph_title(trace, shown_pass),
              graph_tree(trace, max_depth=max_depth, max_nodes=budget.tree_lines, saved=saved,
                         shown_pass=shown_pass, cut=cut)]
    if len(trace.nodes) <= LEGEND_UP_TO and shown_pass is not None:
        parts.append(tree_legend(trace))
    memory = memory_view(trace) if saved else None
    if memory is not None:  # right under the tree, whose lines list them node by node
        parts.append(memory)
    parts += [Text(), tensor_table(trace, budget.table_rows), Text("\npasses", style="bold"),
              passes_view(trace, budget)]
    steps = steps_view(trace, max_rows=budget.steps_rows)
    if steps is not None:
        parts.append(steps)
    second = second_order_view(trace)
    if second is not None:
        parts += [Text(), second]
    findings = findings_view(trace)
    if findings is not None:
        parts += [Text("\nfindings", style="bold"), findings]
    return Group(*parts)


LEGEND_UP_TO = 20  # nodes: a graph this small is a lesson's, and its tree gets a legend
LEGEND = ("n2 node id", "[0] input slot it feeds", "grad in: gradient received",
          "a × b: upstream × local derivative", "this edge: one edge's share",
          "out0: first output")


def tree_legend(trace: Trace) -> Text:
    """One dim line saying what the tree's notation means (only what a small tree uses)."""
    return Text("  legend: " + " · ".join(what for what in LEGEND if _uses(trace, what)),
                style="dim")


def _uses(trace: Trace, what: str) -> bool:
    """Whether the tree shows that notation: slots and edges when there are edges, factors
    and received gradients when a pass ran, outputs when a node has several."""
    if what.startswith(("[0]", "this edge")):
        return bool(trace.edges) and (not what.startswith("this edge") or any(
            sum(e.src == n.id for e in trace.edges) > 1 for n in trace.nodes))
    if what.startswith("out0"):
        return any(e.src_output > 0 for e in trace.edges)
    if what.startswith("a × b"):  # factors are shown for gradients of one number
        return any(math.prod(t.shape) == 1 for t in trace.tensors)
    return True


SUMMARY_PAST = 60  # nodes: past this, a model's report leads with its modules


def summarised(trace: Trace) -> bool:
    """Whether `show` leads with the module summary: a graph past SUMMARY_PAST nodes made
    by nn.Modules (a tree of it would follow one path for a screen)."""
    return len(trace.nodes) > SUMMARY_PAST and any(n.module for n in trace.nodes)


def module_report(trace: Trace, shown_pass: Pass | None, every: bool = False,
                  chosen: bool = True) -> Group:
    """`show --by-module`: the header, one row per module (a screen's worth unless every),
    and the findings; not chosen (a big model's default), with how to get the tree."""
    parts: list[RenderableType] = [header(trace), graph_title(trace, shown_pass),
                                   module_table(trace, shown_pass, None if every else 40)]
    if not chosen:  # the report's place for what the scenario printed, and the way back
        printed = scenario_output(trace)
        parts[1:1] = [] if printed is None else [printed]
        parts.append(Text(f"a graph of {len(trace.nodes):,} nodes: its modules lead; --tree "
                          "shows the node tree, tensors and passes", style="yellow"))
    steps = steps_view(trace, by_module=True, max_rows=None if every else STEPS_ROWS)
    if steps is not None:
        parts.append(steps)
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
                f"{passes_summary(trace)}\n", style="dim")
    if trace.output_names:
        text.append("output ", style="dim")
        text.append(", ".join(trace.output_names), style="bold cyan")
        text.append(f"  ({trace.root_reason}; pick others with --root NAME)", style="dim")
    else:
        text.append("no output: the scenario builds no autograd graph", style="yellow")
    return text


def passes_summary(trace: Trace) -> str:
    """ "1 pass", or for a loop "30 passes over the same graph of 6 ops (passes 1–30)"."""
    count, kept = len(trace.passes), _kept_said(trace)
    graphs = {p.graph for p in trace.passes}
    if count < 2 or len(graphs) == count:
        return f"{count} pass(es)"
    if len(graphs) == 1:  # (--pass all draws each copy of it)
        copies = len({p.roots for p in trace.passes})
        ops = sum(1 for n in trace.nodes if n.kind != "leaf") // max(copies, 1)
        return f"{count} passes over the same graph of {ops} ops (passes 1–{count}" \
            f"{f'; {kept}' if kept else ''})"
    return f"{count} passes over {len(graphs)} distinct graphs{f' ({kept})' if kept else ''}"


def _kept_said(trace: Trace) -> str:
    """Which passes a trace keeps in full, when it keeps only the others' light statistics;
    else ""."""
    if not any(p.light for p in trace.passes):
        return ""
    return f"kept in full: {kept_in_full(trace)}, the others' statistics only"


def kept_in_full(trace: Trace) -> str:
    """The numbers of the passes a trace keeps in full, runs as spans: "1–2, 30"."""
    spans: list[list[int]] = []
    for i, p in enumerate(trace.passes, 1):
        if p.light:
            continue
        if spans and spans[-1][-1] == i - 1:
            spans[-1][1:] = [i]
        else:
            spans.append([i])
    return ", ".join("–".join(map(str, span)) for span in spans)


def graph_title(trace: Trace, shown: Pass | None) -> Text:
    """ "graph · gradients of pass 2 (line 13 `y.backward(...)`)"."""
    text = Text("\ngraph", style="bold")
    if shown is not None:
        number_ = trace.passes.index(shown) + 1
        where = f" at line {shown.line} `{shown.code}`" if shown.line else \
            " by gradtrace, which ran this backward after the script (it ran none) to show " \
            "the flow"
        text.append(f"  ·  gradients of pass {number_}{where}", style="dim")
        scales = trace.steps.loss_scale if trace.steps is not None else ()
        if number_ <= len(scales) and scales[number_ - 1] is not None:
            text.append(f", scaled ×{scales[number_ - 1]:g} by GradScaler", style="dim")
        if len(trace.passes) > 1:
            text.append("; --pass N shows another", style="dim")
    return text


LINE_LIMIT = 1_000  # characters of one printed line (a 500 MB line would take minutes to wrap)


def scenario_output(trace: Trace, last: int = 10) -> RenderableType | None:
    """What the scenario printed (its last lines, each cut), in its own panel; None if nothing."""
    return printed_panel(trace.stdout, last)


def printed_panel(printed: str, last: int = 10) -> RenderableType | None:
    """The last lines of what a scenario printed, each cut, in a panel; None if nothing."""
    if not printed.strip():
        return None
    printed = printed.rstrip("\n")
    lines = printed.rsplit("\n", last)  # only the end is split: stdout may be huge
    text = Text()
    if len(lines) > last:
        text.append(f"… {printed.count(chr(10)) + 1 - last} earlier lines (all of them "
                    "are in --json's stdout)\n", style="dim")
        lines = lines[1:]
    text.append("\n".join(line if len(line) <= LINE_LIMIT else
                          f"{line[:LINE_LIMIT]} … ({len(line) - LINE_LIMIT:,} more characters)"
                          for line in lines))
    return Panel(text, title="scenario output", title_align="left", border_style="dim")


def passes_view(trace: Trace, budget: Budget = Budget()) -> RenderableType:
    """Each backward/grad pass in order: where, roots, flags, error, and the .grad it changed
    (the first passes and the last two, within the budget); a run of a loop's passes kept
    with light statistics only is one line."""
    if not trace.passes:
        return Text(f"no backward pass{_why_no_pass(trace)}", style="dim")
    runs = _pass_runs(trace.passes)
    shown: list[tuple[int, int] | None] = list(runs)
    if budget.passes is not None and len(shown) > budget.passes:
        head = max(budget.passes - 2, 1)
        hidden = len(shown) - budget.passes
        shown = shown[:head] + [None] + shown[head + hidden:]
    parts: list[RenderableType] = []
    for run in shown:
        if run is None:
            left_out = sum(last - first + 1 for first, last in runs) \
                - sum(last - first + 1 for first, last in filter(None, shown))
            parts.append(Text(f"… {left_out} more passes (--all)", style="yellow"))
            continue
        first, last = run
        p = trace.passes[first - 1]
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"pass {first} " if first == last else f"passes {first}–{last} ",
                    style="bold")
        call = "torch.autograd.grad" if p.kind == "grad" else "backward"
        if p.by == "gradtrace":
            text.append(f"{call} by gradtrace", style="")
            text.append("  after the script ended: it ran no backward of its own", style="dim")
        else:
            text.append(f"{call} at line {p.line}" if p.line else call)
            if p.code:
                text.append(f"  {p.code}", style="cyan")
        if p.light:
            kept = max((i for i, q in enumerate(trace.passes, 1)
                        if q.graph == p.graph and not q.light), default=None)
            text.append("\n  light statistics only"
                        + (f" (pass {kept} over the same graph is kept in full)" if kept else ""),
                        style="dim")
            parts.append(text)
            continue
        names = [n or "(unnamed)" for n in p.root_names]
        text.append(f"\n  roots {', '.join(names) or '-'}", style="dim")
        text.append(f"  retain_graph={p.retain_graph} create_graph={p.create_graph}",
                    style="dim")
        changes = p.grad_changes if budget.changes is None else p.grad_changes[:budget.changes]
        for c in changes:
            text.append_text(number_text(
                f"\n  {c.tensor}.grad  {grad_text(c.before)} → {grad_text(c.after)}"))
        if len(changes) < len(p.grad_changes):
            text.append(f"\n  … {len(p.grad_changes) - len(changes)} more .grad changes "
                        "(--all)", style="yellow")
        if not p.grad_changes and p.error is None:
            text.append("\n  no named .grad changed", style="dim")
        if p.error:
            kind, _, said = p.error.partition(": ")
            told = said and any(said.split("\n")[0][:60] in f.message for f in trace.findings)
            # the whole error once: the finding that tells it
            text.append("\n  failed: " + (f"{kind} (under findings)" if told
                                          else p.error.splitlines()[0]), style="bold red")
        parts.append(text)
    return Group(*parts)


def _pass_runs(passes: tuple[Pass, ...]) -> list[tuple[int, int]]:
    """(first, last) pass numbers: each pass alone, but a run of light passes made at one
    line over one graph together."""
    runs: list[tuple[int, int]] = []
    for i, p in enumerate(passes, 1):
        before = passes[i - 2] if i > 1 else None
        if p.light and before is not None and before.light and runs and runs[-1][1] == i - 1 \
                and (before.graph, before.line, before.kind) == (p.graph, p.line, p.kind):
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def memory_view(trace: Trace, top: int = 3) -> Text | None:
    """ "saved for backward: 1.2 KB in 5 nodes; most: AddmmBackward0 · fc1 (line 10) 512 B"."""
    held = [(sum(s.bytes for s in n.saved if s.status == "ok"), n) for n in trace.nodes
            if not n.recomputed]
    held = [(size, n) for size, n in held if size]
    # what a saved_tensors_hooks hook of the script's packed (save_on_cpu, an offload): unread
    packed = sum(1 for n in trace.nodes if not n.recomputed and any(
        s.status == PACKED for s in n.saved))
    if not held:
        return None if not packed else Text(
            f"saved for backward: not read in {packed} nodes (packed by a hook)", style="dim")
    held.sort(key=lambda item: -item[0])
    most = ", ".join(
        f"{n.type}{f' · {n.module}' if n.module else ''}"
        f"{f' (line {n.source.line})' if n.source else ''} {size_text(size)}"
        for size, n in held[:top])
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("saved for backward: ", style="bold")
    text.append(f"{size_text(sum(size for size, _ in held))} in {len(held)} nodes")
    if packed:
        text.append(f" (not read in {packed} more: packed by a hook)", style="dim")
    text.append(f"; most: {most}")
    return text


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
            text.append_text(number_text("".join(
                "\n    [" + ", ".join(number(v) for v in row) + "]" for row in values)))
        elif isinstance(values, list):
            text.append_text(number_text("[" + ", ".join(number(v) for v in values) + "]"))
        else:
            text.append_text(number_text(number(values), "bold yellow"))
    return text


SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def by_severity(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; in the order found within a severity."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))


def _why_no_pass(trace: Trace) -> str:
    """Why a trace has no pass: the scenario stopped before one, there is no output to run
    one from, or (the only case left) --no-backward."""
    if any(f.code == SCENARIO_STOPPED.name for f in trace.findings):
        return ": the scenario stopped before any (see scenario-stopped)"
    if not trace.outputs:
        return ": no output to run one from"
    return " (--no-backward)"


def findings_view(trace: Trace) -> RenderableType | None:
    """The findings, most severe first; None when there are none."""
    if not trace.findings:
        return None
    text = Text()
    for f in by_severity(trace.findings):
        if text:
            text.append("\n")
        text.append(f"{f.severity} ", style=SEVERITY_STYLE.get(f.severity, ""))
        text.append(f"[{f.code}] ", style="dim")
        text.append(f.message)
        if f.hint:
            text.append(f"\n  hint: {f.hint}", style="dim")
    return text


def finding_lines(findings: Iterable[Finding]) -> Text | None:
    """One line per finding, most severe first, as show begins each (`error [code] message`,
    the message's first line, no hint): what `dot` says on stderr. None when there are none."""
    text = Text()
    for f in by_severity(findings):
        if text:
            text.append("\n")
        text.append(f"{f.severity} ", style=SEVERITY_STYLE.get(f.severity, ""))
        text.append(f"[{f.code}] ", style="dim")
        text.append(f.message.strip().split("\n", 1)[0])
    return text or None
