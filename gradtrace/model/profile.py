"""What backward cost, node by node: plain records of `--profile`'s measurements, and the
sums per module, source line and op type that every renderer and `diff` read."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

from .records import COST_METHODS, CostMethod, Costs, ModuleSaved, Node, NodeCost, Trace

__all__ = ["COST_METHODS", "CostMethod", "Costs", "ModuleSaved", "NodeCost"]  # kept here too

CostKey = Literal["module", "line", "op", "node"]
CostMeasure = Literal["time", "memory"]
NO_MODULE = "(no module)"
LEAVES = "(leaves: AccumulateGrad)"  # leaf accumulation, timed as one, not leaf by leaf
OUTSIDE = "(the call: its start and end)"  # before the first node and after the last


class CostRow(NamedTuple):
    """One line of a cost table: a module, a source line, an op type or a node."""

    key: str
    time_us: float
    spread_us: float  # the sum of its nodes' spreads: a bound, not a statistic
    allocated: int
    freed: int
    nodes: int
    forward_us: float | None = None  # modules only: own forward time


def median(values: Sequence[float]) -> float:
    """The middle value (the mean of the two middle ones); 0.0 for none."""
    return statistics.median(values) if values else 0.0


def spread(values: Sequence[float]) -> float:
    """max − min (0.0 for fewer than two)."""
    return max(values) - min(values) if len(values) > 1 else 0.0


def _key(node: Node, by: CostKey) -> str:
    if by == "module":
        return node.module or NO_MODULE
    if by == "op":
        return node.type
    if by == "line":
        return "(no line)" if node.source is None else \
            f"{node.source.file}:{node.source.line}"
    return node.id


def cost_rows(trace: Trace, by: CostKey, measure: CostMeasure = "time") -> list[CostRow]:
    """The costs summed by module, source line, op type or node, largest first (ties by
    key: the same trace gives the same order). By module or op, leaf accumulation and the
    call's own start and end are a row each, after the others."""
    costs = trace.costs
    if costs is None:
        return []
    sums: dict[str, list[float]] = {}
    for node in trace.nodes:
        c = costs.nodes.get(node.id)
        if c is None:
            continue
        row = sums.setdefault(_key(node, by), [0.0, 0.0, 0, 0, 0])
        row[0] += c.time_us
        row[1] += c.spread_us
        row[2] += c.allocated
        row[3] += c.freed
        row[4] += 1
    if costs.accumulate_us and by in ("module", "op"):
        row = sums.setdefault(LEAVES if by == "module" else "AccumulateGrad",
                              [0.0, 0.0, 0, 0, 0])
        row[0] += costs.accumulate_us
        row[1] += costs.accumulate_spread_us
    if costs.outside_us and by in ("module", "op"):
        sums.setdefault(OUTSIDE, [0.0, 0.0, 0, 0, 0])[0] += costs.outside_us
    rows = [CostRow(key, t, s, int(a), int(f), int(n),
                    costs.forward_us.get(key) if by == "module" else None)
            for key, (t, s, a, f, n) in sums.items()]
    # the rows of no node (the leaves' accumulation, the call's start and end) come last:
    # the tables rank modules, lines and ops
    if measure == "time":
        rows.sort(key=lambda r: (not r.nodes, -r.time_us, r.key))
    else:
        rows.sort(key=lambda r: (not r.nodes, -r.allocated, r.key))
    return rows


def node_total_us(costs: Costs) -> float:
    """The sum of every node's time, leaf accumulation included."""
    return sum(c.time_us for c in costs.nodes.values()) + costs.accumulate_us


def module_times(trace: Trace) -> dict[str, tuple[float, float]]:
    """Backward time and its spread (µs) per module, for `diff`: {} without costs."""
    return {r.key: (r.time_us, r.spread_us) for r in cost_rows(trace, "module")}


def heat_values(trace: Trace, measure: CostMeasure) -> dict[str, float]:
    """Each costed node's time (µs) or allocated bytes, by node id."""
    costs = trace.costs
    if costs is None:
        return {}
    if measure == "time":
        return {k: c.time_us for k, c in costs.nodes.items()}
    return {k: float(max(c.allocated, 0)) for k, c in costs.nodes.items()}


class ModuleCost(NamedTuple):
    """A module's backward time in trace A and in trace B (None: not in that trace), with
    their spreads."""

    module: str
    a_us: float | None
    b_us: float | None
    a_spread: float = 0.0
    b_spread: float = 0.0

    def slower(self, tolerance: float) -> bool:
        """B is slower than A by more than tolerance (0.2: 20%) and by more than the
        timings' noise (half their spreads together)."""
        if self.a_us is None or self.b_us is None:
            return False
        gain = self.b_us - self.a_us
        return gain > self.a_us * tolerance and gain > (self.a_spread + self.b_spread) / 2


def module_costs(a: Trace, b: Trace) -> tuple[ModuleCost, ...]:
    """Each module's backward time in a and b, the largest slow-down (B − A) first; () when
    either trace has no costs."""
    times_a, times_b = module_times(a), module_times(b)
    if a.costs is None or b.costs is None:
        return ()
    rows = []
    for m in sorted(times_a.keys() | times_b.keys()):
        a_us, a_spread = times_a.get(m, (None, 0.0))
        b_us, b_spread = times_b.get(m, (None, 0.0))
        rows.append(ModuleCost(m, a_us, b_us, a_spread, b_spread))
    return tuple(sorted(rows, key=lambda r: (-((r.b_us or 0.0) - (r.a_us or 0.0)), r.module)))


def ranked(values: Iterable[tuple[str, float]]) -> list[str]:
    """Keys by value, largest first, ties by key."""
    return [k for k, _ in sorted(values, key=lambda kv: (-kv[1], kv[0]))]
