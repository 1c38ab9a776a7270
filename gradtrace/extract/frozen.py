"""Graphs the code let go of: made plain data as it did (python frees a graph then, and so
gradtrace lets go of it), and joined to the graph walked at the end by build_trace."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..compat.torch import NO_SEQUENCE, sequence_number
from ..model.labels import name_apart
from ..model.records import LEAF, Edge, Node, NodeFlow, TensorInfo
from .walk import RawEdge, node_kind, release, walk

# what tells a node among graphs: ("leaf", id of its tensor), or (its class, its number, and
# a digest of the keys below it); [:2] of a non-leaf's: the loose key a tensor's node has
NodeKey = tuple[Any, ...]


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
    # nodes whose forward values were not finite (None: not asked, Captured's carriers)
    carried: frozenset[str] | None = frozenset()
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


_UNNUMBERED = itertools.count()


def node_keys(order: Sequence[Any], edges: Sequence[RawEdge]) -> list[NodeKey]:
    """A key per node that outlives its object: a leaf's tensor; else its class, number and
    the keys below it (numbers count per thread: two threads' graphs have the same ones); a
    node without a number (torch 2.11's compiled region's) a key of its own."""
    own: list[NodeKey] = []
    for node in order:
        if node_kind(node) == LEAF:
            own.append(("leaf", id(node.variable)))
            continue
        number = sequence_number(node)
        own.append(("unnumbered", next(_UNNUMBERED)) if number == NO_SEQUENCE
                   else (type(node).__name__, number))
    below: list[list[tuple[int, int]]] = [[] for _ in order]  # (slot, child)
    above: list[list[int]] = [[] for _ in order]
    for src, dst, slot, _ in edges:
        below[dst].append((slot, src))
        above[src].append(dst)
    waiting = [len(children) for children in below]
    digest: list[int] = [0] * len(order)
    ready = [i for i, count in enumerate(waiting) if not count]
    while ready:  # children before parents: a graph's leaves first
        i = ready.pop()
        digest[i] = hash((own[i], tuple(digest[c] for _, c in sorted(below[i]))))
        for parent in above[i]:
            waiting[parent] -= 1
            if not waiting[parent]:
                ready.append(parent)
    return [key if key[0] in ("leaf", "unnumbered") else (*key, digest[i])
            for i, key in enumerate(own)]


def leaf_refs(order: Sequence[Any]) -> tuple[weakref.ref[Any] | None, ...]:
    """A weak reference to each leaf node's tensor (None for other nodes)."""
    return tuple(weakref.ref(node.variable) if node_kind(node) == LEAF else None
                 for node in order)


def tensor_key(t: Any) -> NodeKey:
    """The key of the node a tensor is the output of (a leaf's: its AccumulateGrad's)."""
    node = t.grad_fn
    return ("leaf", id(t)) if node is None else (type(node).__name__, sequence_number(node))


def _alive(key: NodeKey, alive: dict[NodeKey, str]) -> str | None:
    """The name of the live tensor whose node has key: by the walk's key, else by the class
    and number of a node the walk does not hold."""
    return alive.get(key) or alive.get(key[:2])


def _position(node_id: str) -> int:
    return int(node_id[1:])


class Fragments:
    """The frozen graphs of the passes shown, joined to the walk's nodes: each node gets the
    next id after the walk's, or the id the same node has there already."""

    def __init__(self, shown: Sequence[Any], order: Sequence[Any], edges_walked: Sequence[RawEdge],
                 ids: list[str], named: Sequence[tuple[str, Any]]) -> None:
        self.ids = ids  # the walk's ids: the frozen nodes' are added to it
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.tensors: list[TensorInfo] = []
        self.at: dict[int, list[str]] = {}  # id(pass) -> the id of each of its graph's nodes
        self.claimed: dict[NodeKey, str] = {}  # a live tensor's key -> its frozen node's id
        self.by_object: dict[int, Node] = {}  # id() of a frozen node's object -> its record
        self.richer: dict[str, Node] = {}  # a node of the walk -> a frozen graph's record of it
        self._live_twins: dict[int, list[str] | None] = {}  # see live_positions()
        walked = len(ids)  # the walk's nodes are n0 … n{walked - 1}
        records: dict[str, Node] = {}  # the frozen graphs' nodes by id
        frozen = [p for p in shown if p.frozen is not None]
        walk_keys = node_keys(order, edges_walked) if frozen else []
        known: dict[NodeKey, str] = dict(zip(walk_keys, ids, strict=True)) if frozen else {}
        edges: set[Edge] = set()
        # the live named tensors by their node's key: the walk's own when it holds the node
        # (a graph of another thread may have a node of the same class and number)
        at = {node: i for i, node in enumerate(order)} if frozen else {}
        alive = {walk_keys[at[t.grad_fn]] if t.grad_fn in at else tensor_key(t): name
                 for name, t in reversed(named)} if frozen else {}
        taken = {name for name, _ in named}
        # the latest graph first: its tensors keep their names, older ones' get NAME@LINE
        # (a root's name with no row too: given once, the latest's)
        naming = {}
        for p in reversed(frozen):
            keys = placed_keys(p.frozen)
            live = {f"n{i}" for i, key in enumerate(keys) if _alive(key, alive)}
            rows = [r for r in p.frozen.tensors if r.node not in live]
            renamed = _unique_names(rows, taken, p.line)
            for node in p.frozen.nodes:
                if node.tensor is not None and node.tensor not in renamed \
                        and node.tensor not in taken:
                    taken.add(node.tensor)
                    renamed[node.tensor] = node.tensor
            naming[id(p)] = (keys, rows, renamed)
        for p in frozen:
            graph: FrozenGraph = p.frozen
            # a tensor of the graph that lives still keeps its row and name
            keys, rows, renamed = naming[id(p)]
            placed = []
            objects = iter(graph.objects)
            for node, key in zip(graph.nodes, keys, strict=True):
                final = known.get(key)
                if final is not None and _position(final) < walked:  # the walk's node: what
                    # the graph knew of it as it froze (its module, line) fills what it lacks
                    self.richer.setdefault(final, node)
                if final is None:
                    final = known[key] = f"n{len(ids)}"
                    ids.append(final)
                    named_as = _alive(key, alive)
                    name = named_as if named_as is not None and node.tensor is not None \
                        else renamed.get(node.tensor)
                    records[final] = node._replace(id=final, tensor=name)
                    self.nodes.append(records[final])
                    if named_as is not None:
                        self.claimed.setdefault(key[:2], final)
                obj = next(objects, None)
                if obj is not None and final in records:
                    self.by_object[obj] = records[final]
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

    def live_positions(self, twin: Any, node_ids: Any) -> list[str] | None:
        """The id of each node of a live shown pass's graph, by its place in its walk (walked
        once: every frozen pass over a graph alike is placed on it)."""
        if id(twin) not in self._live_twins:
            order = walk(twin.roots)[0]
            self._live_twins[id(twin)] = [node_ids.of(node) for node in order] \
                if all(n in node_ids for n in order) else None
            release(order)
        return self._live_twins[id(twin)]

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
    """Each graph row's name, apart from those the trace gives (model.labels.name_apart)."""
    return {row.name: name_apart(row.name, taken, line) for row in rows
            if row.node is not None}



