"""--profile's samples of one pass, as recorded (node objects, walk positions), made into the
Trace's plain Costs once node ids are known."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..model.profile import CostMethod, Costs, ModuleSaved, NodeCost, median, spread
from ..model.records import Node
from .walk import NodeIds


class Sample(NamedTuple):
    """One profiled timing of a pass: per walk position its time (µs), the bytes its
    computation left allocated and the bytes freed when it finished; the positions in the
    order they ran; the peak of memory above the start and the position it was reached at."""

    wall_us: float
    times: dict[int, float]
    allocated: dict[int, int]
    freed: dict[int, int]
    ran: list[int]
    accumulate_us: float
    op_total_us: float
    peak_bytes: int
    peak_at: int | None
    recomputed_us: float
    gaps: dict[int, float]  # the engine's time before each evaluation (-1: the leaves'),
    # included in the node times
    ops: dict[str, float]  # torch.profiler's self time per op name


class Timing(NamedTuple):
    """One light timing of a pass (the profiler limited to nodes' own events): per walk
    position its time (µs) — its own event and what followed it until the next node's (the
    rest of its evaluation, the engine's step to the next) — and that second part alone."""

    wall_us: float
    times: dict[int, float]
    gaps: dict[int, float]  # -1: the leaves'
    accumulate_us: float
    outside_us: float  # the call's start and end, before the first node and after the last


@dataclass
class RawCosts:
    """The samples of the pass whose costs the trace shows, with that pass's walk."""

    pass_number: int
    method: CostMethod
    device: str
    nodes: list[Any]  # the pass's walk order: position i is nodes[i]
    samples: list[Sample]
    wall_us: list[float]  # timings without the profiler
    retained: bool  # the pass keeps its graph: no saved tensor is freed while it runs
    forward_us: dict[str, float] = field(default_factory=dict)
    note: str | None = None
    timings: list[Timing] = field(default_factory=list)  # node times, when taken light

    def costs(self, node_ids: NodeIds, records: dict[str, Node]) -> Costs:
        """The Costs by node id (a node the trace's walk did not reach is left out)."""
        ids = [node_ids.node(n) for n in self.nodes]
        timed: list[Timing] | list[Sample] = self.timings or self.samples
        positions = sorted({i for s in timed for i in s.times} | {i for s in self.samples
                                                                    for i in s.allocated})
        nodes: dict[str, NodeCost] = {}
        for i in positions:
            node_id = ids[i] if i < len(ids) else None
            if node_id is None:
                continue
            times = [s.times[i] for s in timed if i in s.times]
            nodes[node_id] = NodeCost(
                median(times), spread(times),
                int(median([s.allocated.get(i, 0) for s in self.samples])),
                int(median([s.freed.get(i, 0) for s in self.samples])))
        nodes = dict(sorted(nodes.items(), key=lambda kv: int(kv[0][1:])))
        peak = sorted(self.samples, key=lambda s: s.peak_bytes)[len(self.samples) // 2] \
            if self.samples else None
        peak_node = None
        saved: tuple[ModuleSaved, ...] = ()
        if peak is not None and peak.peak_at is not None:
            peak_node = ids[peak.peak_at] if peak.peak_at < len(ids) else None
            before = set() if self.retained else \
                set(peak.ran[:peak.ran.index(peak.peak_at)] if peak.peak_at in peak.ran else ())
            by_module: dict[str, int] = {}
            for i, node_id in enumerate(ids):
                node = records.get(node_id) if node_id is not None else None
                if node is None or i in before or not node.saved:
                    continue
                key = node.module or "(no module)"
                by_module[key] = by_module.get(key, 0) + sum(s.bytes for s in node.saved)
            saved = tuple(ModuleSaved(m, b) for m, b in
                          sorted(by_module.items(), key=lambda kv: (-kv[1], kv[0])) if b)
        recomputed = [records[i] for i in ids if i is not None and i in records
                      and records[i].recomputed]
        return Costs(
            pass_number=self.pass_number, method=self.method, device=self.device,
            nodes=nodes, wall_us=tuple(self.wall_us),
            profiled_us=tuple(s.wall_us for s in timed),
            op_total_us=tuple(s.op_total_us for s in self.samples),
            peak_bytes=None if peak is None else peak.peak_bytes, peak_node=peak_node,
            peak_saved=saved, forward_us=dict(sorted(self.forward_us.items())),
            accumulate_us=median([s.accumulate_us for s in timed]),
            accumulate_spread_us=spread([s.accumulate_us for s in timed]),
            # per position, as the node times are: the two can be subtracted
            outside_us=median([t.outside_us for t in self.timings]) if self.timings else None,
            engine_us=sum(median([s.gaps.get(i, 0.0) for s in timed])
                          for i in sorted({i for s in timed for i in s.gaps})),
            ops_us={name: median([s.ops.get(name, 0.0) for s in self.samples])
                    for name in sorted({n for s in self.samples for n in s.ops})},
            recomputed_us=median([s.recomputed_us for s in self.samples]) if recomputed
            else None,
            recomputed_saved=sum(s.bytes for n in recomputed for s in n.saved) if recomputed
            else None,
            note=self.note)
