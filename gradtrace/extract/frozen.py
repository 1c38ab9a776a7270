"""Graphs the code let go of: made plain data as it did (python frees a graph then, and so
gradtrace lets go of it), and joined to the graph walked at the end by build_trace."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..compat.torch import sequence_number
from ..model.records import LEAF, Edge, Node, NodeFlow, TensorInfo
from .walk import node_kind, release, walk

# what tells a node among graphs: ("leaf", id of its tensor), or (its class, its number)
NodeKey = tuple[str, int]


class FrozenGraph(NamedTuple):
    """A pass's graph as plain data: nodes n0… in its walk's order, their edges, the rows of
    the tensors in it, the pass's flow and roots on them, and a key per node that tells it
    among the nodes of other graphs (a trunk two heads share is one)."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    tensors: tuple[TensorInfo, ...]
    flow: dict[str, NodeFlow]
    roots: tuple[str, ...]
    keys: tuple[NodeKey, ...]
    carried: frozenset[str] = frozenset()  # nodes whose forward values were not finite
    objects: tuple[int, ...] = ()  # id() of each node as it was frozen (a fact names one so)
    leaves: tuple[weakref.ref[Any] | None, ...] = ()  # each leaf node's tensor, weakly


def placed_keys(graph: FrozenGraph) -> list[NodeKey]:
    """graph's node keys as they stand now: a leaf whose tensor died is told by its weak
    reference (python gives a tensor's weak reference again while it lives, and a new one
    to a tensor made at its id since)."""
    if not graph.leaves:
        return list(graph.keys)
    return [key if ref is None or ref() is not None else ("dead leaf", id(ref))
            for key, ref in zip(graph.keys, graph.leaves, strict=True)]


def node_keys(order: Sequence[Any]) -> list[NodeKey]:
    """A key per node that outlives its object: a leaf's tensor, else its class and number."""
    return [("leaf", id(node.variable)) if node_kind(node) == LEAF
            else (type(node).__name__, sequence_number(node)) for node in order]


def leaf_refs(order: Sequence[Any]) -> tuple[weakref.ref[Any] | None, ...]:
    """A weak reference to each leaf node's tensor (None for other nodes)."""
    return tuple(weakref.ref(node.variable) if node_kind(node) == LEAF else None
                 for node in order)


def tensor_key(t: Any) -> NodeKey:
    """The key of the node a tensor is the output of (a leaf's: its AccumulateGrad's)."""
    node = t.grad_fn
    return ("leaf", id(t)) if node is None else (type(node).__name__, sequence_number(node))


def _position(node_id: str) -> int:
    return int(node_id[1:])


class Fragments:
    """The frozen graphs of the passes shown, joined to the walk's nodes: each node gets the
    next id after the walk's, or the id the same node has there already."""

    def __init__(self, shown: Sequence[Any], order: Sequence[Any], ids: list[str],
                 named: Sequence[tuple[str, Any]]) -> None:
        self.ids = ids  # the walk's ids: the frozen nodes' are added to it
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.tensors: list[TensorInfo] = []
        self.at: dict[int, list[str]] = {}  # id(pass) -> the id of each of its graph's nodes
        self.claimed: dict[NodeKey, str] = {}  # a live tensor's key -> its frozen node's id
        self.by_object: dict[int, Node] = {}  # id() of a frozen node's object -> its record
        self.richer: dict[str, Node] = {}  # a node of the walk -> a frozen graph's record of it
        walked = frozenset(ids)
        frozen = [p for p in shown if p.frozen is not None]
        known: dict[NodeKey, str] = dict(zip(node_keys(order), ids, strict=True)) \
            if frozen else {}
        edges: set[Edge] = set()
        alive = {tensor_key(t): name for name, t in reversed(named)} if frozen else {}
        taken = {name for name, _ in named}
        names = frozenset(taken)  # the live tensors' (a frozen root's name may be one)
        for p in frozen:
            graph: FrozenGraph = p.frozen
            # a tensor of the graph that lives still keeps its row and name
            keys = placed_keys(graph)
            live = {f"n{i}" for i, key in enumerate(keys) if key in alive}
            rows = [r for r in graph.tensors if r.node not in live]
            renamed = _unique_names(rows, taken, p.line)
            placed = []
            for node, key in zip(graph.nodes, keys, strict=True):
                final = known.get(key)
                if final is not None and final in walked:  # the walk's node: what the graph
                    # knew of it as it froze (its module, saved tensors) fills what it lacks
                    self.richer.setdefault(final, node)
                if final is None:
                    final = known[key] = f"n{len(ids)}"
                    ids.append(final)
                    name = alive[key] if key in alive and node.tensor is not None \
                        else renamed.get(node.tensor,
                                         None if node.tensor in names else node.tensor)
                    self.nodes.append(node._replace(id=final, tensor=name))
                    if key in alive:
                        self.claimed.setdefault(key, final)
                placed.append(final)
            for e in graph.edges:
                moved = e._replace(src=placed[_position(e.src)], dst=placed[_position(e.dst)])
                if moved not in edges:
                    edges.add(moved)
                    self.edges.append(moved)
            self.tensors.extend(
                replace(row, name=renamed[row.name], node=placed[_position(row.node)])
                for row in rows if row.node is not None and row.name in renamed)
            self.at[id(p)] = placed
            kept = {n.id: n for n in self.nodes}
            self.by_object.update((obj, kept[final]) for obj, final
                                  in zip(graph.objects, placed, strict=False) if final in kept)

    def filled(self, nodes: list[Node]) -> list[Node]:
        """The walk's node records, with what a frozen graph's record of the same node knew
        and they lack (the detail of a pass let go of: its module and line)."""
        if not self.richer:
            return nodes
        out = []
        for n in nodes:
            f = self.richer.get(n.id)
            if f is not None:  # (its saved tensors are as the walk reads them now)
                n = n._replace(module=n.module or f.module, source=n.source or f.source,
                               library=n.library or f.library)
            out.append(n)
        return out

    def positions(self, p: Any) -> list[str] | None:
        """The id of each node of a shown frozen pass's graph, by its place in its walk."""
        return self.at.get(id(p))

    @staticmethod
    def flow(p: Any, placed: list[str]) -> tuple[dict[str, NodeFlow], tuple[str, ...]]:
        """A frozen pass's flow and roots on the ids of the graph it is placed on."""
        graph: FrozenGraph = p.frozen
        size = len(placed)
        flow = {placed[_position(k)]: f for k, f in graph.flow.items() if _position(k) < size}
        roots = tuple(dict.fromkeys(placed[_position(r)] for r in graph.roots
                                    if _position(r) < size))
        return flow, roots


def _unique_names(rows: Sequence[TensorInfo], taken: set[str],
                  line: int | None) -> dict[str | None, str]:
    """Each graph row's name, NAME@LINE (then #2 …) where the trace names another tensor so:
    every name in the trace names one tensor."""
    renamed: dict[str | None, str] = {}
    for row in rows:
        if row.node is None:
            continue
        name = row.name
        if name in taken:
            base = f"{row.name}@{line if line is not None else '?'}"
            name, k = base, 1
            while name in taken:
                k += 1
                name = f"{base}#{k}"
        taken.add(name)
        renamed[row.name] = name
    return renamed


def twin_positions(twin: Any, node_ids: Any) -> list[str] | None:
    """The id of each node of a live shown pass's graph, by its place in its walk."""
    order = walk(twin.roots)[0]
    try:
        return [node_ids.of(node) for node in order] if all(n in node_ids for n in order) \
            else None
    finally:
        release(order)
