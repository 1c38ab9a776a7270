"""`show --profile`: where backward spent its time and memory — the top modules, source
lines and nodes, the totals they are checked against, and the peak of memory."""

from __future__ import annotations

import os

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model.profile import CostKey, CostMeasure, CostRow, Costs, cost_rows, median, node_total_us
from ..model.records import PACKED, Trace
from ..model.texts import duration_text, size_text

KEY_WIDTH = {"module": 40, "line": 44, "op": 44, "node": 48}
TOP_ROWS = 5  # rows per table within the screen budget (--all: every row)
METHODS = {"replay": "replays of the pass (torch.autograd.grad, retain_graph=True)",
           "steps": "the loop's own passes over this graph",
           "once": "the pass itself, once"}


def _spread_text(values: tuple[float, ...]) -> str:
    if len(values) < 2:
        return f"{len(values)} timing"
    return f"median of {len(values)}, {duration_text(min(values))}–{duration_text(max(values))}"


def totals_text(costs: Costs) -> Text:
    """The totals the node times are checked against: the pass without the profiler, with
    it (the overhead), and torch.profiler's own op total."""
    text = Text()
    nodes = node_total_us(costs)
    text.append("nodes sum ", style="dim")
    text.append(duration_text(nodes), style="bold")
    if costs.engine_us:
        text.append(f" (of it {duration_text(costs.engine_us)} between the nodes' own "
                    "computations: the engine's work around them)", style="dim")
    if costs.outside_us:
        text.append(f" + {duration_text(costs.outside_us)} outside any node (the call's "
                    "start and end)", style="dim")
        nodes += costs.outside_us
    if costs.wall_us:
        wall = median(costs.wall_us)
        text.append("  ·  backward without profiler ", style="dim")
        text.append(duration_text(wall), style="bold")
        text.append(f" ({_spread_text(costs.wall_us)}); "
                    f"{'both' if costs.outside_us else 'nodes sum'} = {nodes / wall:.0%} of it",
                    style="dim")
    else:
        text.append("  ·  no timing without the profiler (the pass ran once)", style="yellow")
    if costs.profiled_us:
        profiled = median(costs.profiled_us)
        text.append("\nwith profiler ", style="dim")
        text.append(duration_text(profiled), style="bold")
        text.append(f" ({_spread_text(costs.profiled_us)})", style="dim")
        if costs.wall_us:
            wall = median(costs.wall_us)
            text.append(f": measuring costs {profiled / wall - 1:+.0%}", style="dim")
    ops = sum(costs.ops_us.values())
    if ops:
        text.append("  ·  torch.profiler's op total ", style="dim")
        text.append(duration_text(ops), style="bold")
        text.append(f" (every op profiled; {'both' if costs.outside_us else 'nodes sum'} = "
                    f"{nodes / ops:.0%} of it)", style="dim")
    return text


UNRELIABLE_SPREAD = 0.5  # a spread (max − min) past half the median: the figures are noise


def doubt_text(costs: Costs) -> Text | None:
    """Why the timings cannot be trusted, when they cannot: too few of them, a spread past
    half their median (load on the machine), or the profiler seeming to save time."""
    reasons = []
    if len(costs.wall_us) < 3:
        reasons.append(f"the pass was timed {len(costs.wall_us) or 'once, under the profiler'}"
                       f"{' times' if costs.wall_us else ''}, too few to tell noise (a loop "
                       "that runs it more times gives medians)")
    else:
        wall = median(costs.wall_us)
        spread = max(costs.wall_us) - min(costs.wall_us)
        if wall > 0 and spread > UNRELIABLE_SPREAD * wall:
            reasons.append(f"the pass's timings spread {spread / wall:.0%} of their median: "
                           "the machine was busy (other processes, threads, frequency "
                           "changes)")
        if costs.profiled_us and median(costs.profiled_us) < wall:
            reasons.append("the pass ran faster under the profiler than without it: the "
                           "difference is noise")
    if not reasons:
        return None
    return Text("unreliable: " + "; ".join(reasons) + ". Rerun on a quiet machine; compare "
                "shares of the total, not absolute times", style="yellow")


def _key_text(row: CostRow, by: CostKey, trace: Trace) -> Text:
    if by == "line":
        file, _, line = row.key.rpartition(":")
        code = next((n.source.code for n in trace.nodes if n.source is not None
                     and n.source.file == file and str(n.source.line) == line), "")
        return Text(f"{os.path.basename(file)}:{line}" if file else row.key, style="cyan") \
            + Text(f"  {code}", style="dim")
    if by == "node":
        node = next(n for n in trace.nodes if n.id == row.key)
        where = node.module or ""
        if node.source is not None:
            where += f" {os.path.basename(node.source.file)}:{node.source.line}"
        return Text(f"{node.id} {node.type}", style="cyan") + Text(f"  {where}", style="dim")
    return Text(row.key, style="cyan")


def cost_table(trace: Trace, by: CostKey, measure: CostMeasure,
               max_rows: int | None = TOP_ROWS) -> RenderableType:
    """The top modules, lines, op types or nodes by backward time or by memory."""
    rows = cost_rows(trace, by, measure)
    what = {"module": "modules", "line": "source lines", "op": "op types",
            "node": "nodes"}[by]
    title = f"top {what} by backward {'time' if measure == 'time' else 'memory allocated'}"
    table = Table(title=title, title_justify="left", header_style="bold", box=None,
                  pad_edge=False)
    # the key gives way first: the numbers are what the table is for
    table.add_column(by, no_wrap=True, overflow="ellipsis", max_width=KEY_WIDTH[by])
    columns = ["backward", "± spread", "allocated", "freed"]
    if by == "module":
        columns += ["forward", "bwd/fwd"]
    if by != "node":
        columns.append("nodes")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column))
    shown = rows if max_rows is None else rows[:max_rows]
    for row in shown:
        cells: list[Text | str] = [_key_text(row, by, trace), duration_text(row.time_us),
                                   duration_text(row.spread_us)
                                   if row.nodes or row.spread_us else "-",
                                   size_text(row.allocated),
                                   size_text(row.freed)]
        if by == "module":
            forward = row.forward_us
            cells += [duration_text(forward) if forward is not None else "-",
                      f"{row.time_us / forward:.2g}×" if forward else "-"]
        if by != "node":
            cells.append(str(row.nodes))
        table.add_row(*cells)
    parts: list[RenderableType] = [table]
    if len(shown) < len(rows):
        parts.append(Text(f"… {len(rows) - len(shown)} more {what} (--all)", style="yellow"))
    return Group(*parts)


def peak_text(trace: Trace, costs: Costs) -> Text | None:
    """The peak of memory during backward, and whose saved tensors were held then."""
    if costs.peak_bytes is None:
        return None
    text = Text("peak memory ", style="dim")
    text.append(size_text(costs.peak_bytes), style="bold")
    text.append(" above the start of backward", style="dim")
    node = next((n for n in trace.nodes if n.id == costs.peak_node), None)
    if node is not None:
        text.append(f", while {node.id} {node.type}"
                    + (f" ({node.module})" if node.module else "") + " ran", style="dim")
    if costs.peak_saved:
        held = sum(s.bytes for s in costs.peak_saved)
        text.append(f"\nsaved tensors still held then: {size_text(held)}; most by ",
                    style="dim")
        text.append(", ".join(f"{s.module} {size_text(s.bytes)}"
                              for s in costs.peak_saved[:3]), style="cyan")
    if costs.recomputed_us is not None:
        text.append("\ncheckpointing: recomputing forward in backward took ", style="dim")
        text.append(duration_text(costs.recomputed_us), style="bold")
        if any(s.status == PACKED for n in trace.nodes if n.recomputed for s in n.saved):
            # checkpoint's own hook packed them: unpacking would run the region again
            text.append("; what it saved between forward and backward is not read",
                        style="dim")
        else:
            text.append(f", and saved {size_text(costs.recomputed_saved or 0)} of saved "
                        "tensors between forward and backward", style="dim")
    return text


def cost_view(trace: Trace, every: bool = False) -> RenderableType | None:
    """The "backward cost" section of `show --profile`; None without costs."""
    costs = trace.costs
    if costs is None:
        return None
    rows = None if every else TOP_ROWS
    title = Text("\nbackward cost", style="bold")
    title.append(f"  pass {costs.pass_number} on {costs.device}, timed by "
                 f"{METHODS[costs.method]}; each time is a median, ± its spread (max − min)",
                 style="dim")
    parts: list[RenderableType] = [title, totals_text(costs)]
    doubt = doubt_text(costs)
    if doubt is not None:
        parts.append(doubt)
    for by in ("module", "line", "op", "node"):
        parts += [Text(), cost_table(trace, by, "time", rows)]  # type: ignore[arg-type]
    parts += [Text(), cost_table(trace, "module", "memory", rows)]
    peak = peak_text(trace, costs)
    if peak is not None:
        parts += [Text(), peak]
    parts.append(Text("forward: each module's own forward, timed while gradtrace traced its "
                      "lines (slower than plain python): compare modules, not absolute times",
                      style="dim"))
    if costs.note:
        parts.append(Text(f"note: {costs.note}", style="yellow"))
    return Group(*parts)
