"""Which node of trace A is which node of trace B, by what nodes are, not by their ids.

Ids are discovery order, so one inserted node renumbers the rest. Nodes are matched in three
steps: the roots by position; nodes whose identity (type, module, tensor name, source code)
is unique on both sides; then outward from every matched pair along the graph (an input slot
to the same slot, a consumer to a consumer of the same type), so a swapped op (ReLU for Tanh)
is matched as changed in place. What is left is paired by identity in discovery order. Each
node is paired at most once: linear in the graph's size.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import NamedTuple

from ..gcpause import gc_paused
from ..model.records import Node, Trace

Identity = tuple[str, "str | None", "str | None", "str | None"]


def identity(node: Node) -> Identity:
    """What a node is, whatever its id: type, module, tensor name, the code that made it
    (the code, not the line number: an edit above it moves the line)."""
    return node.type, node.module, node.tensor, \
        None if node.source is None else node.source.code.strip()


class _Graph:
    """One trace's nodes by id, with each node's inputs by slot and its consumers."""

    def __init__(self, trace: Trace) -> None:
        self.nodes = {n.id: n for n in trace.nodes}
        self.inputs: dict[str, dict[int, str]] = defaultdict(dict)
        self.consumers: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
        for e in trace.edges:
            self.inputs[e.dst][e.dst_input] = e.src
            self.consumers[e.src].append((e.dst, e.dst_input, e.src_output))
        self.by_identity: dict[Identity, list[str]] = defaultdict(list)
        for n in trace.nodes:
            self.by_identity[identity(n)].append(n.id)

    def input_types(self, node_id: str) -> list[tuple[int, str]]:
        return sorted((slot, self.nodes[src].type) for slot, src in self.inputs[node_id].items())


class Matching(NamedTuple):
    """pairs: A's node id -> B's; the nodes of each side left without a partner."""

    pairs: dict[str, str]
    only_a: list[str]  # in A's node order
    only_b: list[str]


@gc_paused
def match_nodes(a: Trace, b: Trace) -> Matching:
    """Pair the nodes of a and b (see the module docstring)."""
    ga, gb = _Graph(a), _Graph(b)
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    queue: deque[tuple[str, str]] = deque()

    def pair(x: str, y: str) -> None:
        pairs[x] = y
        taken.add(y)
        queue.append((x, y))

    def spread() -> None:
        while queue:
            x, y = queue.popleft()
            below = gb.inputs.get(y, {})
            for slot, sx in ga.inputs.get(x, {}).items():
                sy = below.get(slot)
                if sy is not None and sx not in pairs and sy not in taken \
                        and _alike(ga, gb, sx, sy):
                    pair(sx, sy)
            above: dict[tuple[int, int, str], deque[str]] = defaultdict(deque)
            for cy, slot, out in gb.consumers.get(y, ()):
                if cy not in taken:
                    above[slot, out, gb.nodes[cy].type].append(cy)
            for cx, slot, out in ga.consumers.get(x, ()):
                free = above.get((slot, out, ga.nodes[cx].type))
                while free and free[0] in taken:
                    free.popleft()
                if cx not in pairs and free:
                    pair(cx, free.popleft())

    for x, y in zip(a.outputs, b.outputs, strict=False):
        if x in ga.nodes and y in gb.nodes and x not in pairs and y not in taken:
            pair(x, y)
    for key, xs in ga.by_identity.items():
        ys = gb.by_identity.get(key, ())
        if len(xs) == 1 and len(ys) == 1 and xs[0] not in pairs and ys[0] not in taken:
            pair(xs[0], ys[0])
    spread()
    left: dict[Identity, deque[str]] = {key: deque(y for y in ys if y not in taken)
                                        for key, ys in gb.by_identity.items()}
    for n in a.nodes:
        if n.id in pairs:
            continue
        free = left.get(identity(n))
        while free and free[0] in taken:
            free.popleft()
        if free:
            pair(n.id, free.popleft())
            spread()
    return Matching(pairs, [n.id for n in a.nodes if n.id not in pairs],
                    [n.id for n in b.nodes if n.id not in taken])


def _alike(ga: _Graph, gb: _Graph, x: str, y: str) -> bool:
    """Whether two nodes in the same input slot are one node, perhaps of a new type: the
    same type, or the same inputs (ReLU swapped for Tanh over the same Linear)."""
    if ga.nodes[x].type == gb.nodes[y].type:
        return True
    return ga.input_types(x) == gb.input_types(y)
