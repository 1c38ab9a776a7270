"""One graph holding both sides of a diff: B's, with what only A had put back."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal, NamedTuple

from ..model.diffs import NodeChange, NodeChangeKind
from ..model.records import Trace
from .match import Matching


class Union(NamedTuple):
    """Both sides in one Trace (B's ids; A's removed nodes as r0, r1, …), the status of each
    node that has one, and of each edge between nodes on both sides that one side lacks."""

    trace: Trace
    nodes: dict[str, NodeChangeKind]
    edges: dict[tuple[str, str], Literal["added", "removed"]]


def union_trace(a: Trace, b: Trace, m: Matching, changes: tuple[NodeChange, ...]) -> Union:
    """B's graph with what only A had put back. A changed node's type reads "ReluBackward0 →
    TanhBackward0"; an added or removed one's says so, which also keeps it out of a fold
    with unchanged nodes."""
    id_of = dict(m.pairs)
    id_of.update((x, f"r{k}") for k, x in enumerate(m.only_a))
    status: dict[str, NodeChangeKind] = {}
    retyped: dict[str, str] = {}
    for c in changes:
        if c.kind == "removed" and c.a is not None:
            status[id_of[c.a.id]], retyped[id_of[c.a.id]] = "removed", f"{c.a.type} (removed)"
        elif c.kind == "added" and c.b is not None:
            status[c.b.id], retyped[c.b.id] = "added", f"{c.b.type} (added)"
        elif c.a is not None and c.b is not None:
            status[c.b.id] = "changed"
            if c.a.type != c.b.type:
                retyped[c.b.id] = f"{c.a.type} → {c.b.type}"
    only_a = set(m.only_a)
    removed = [n._replace(id=id_of[n.id]) for n in a.nodes if n.id in only_a]
    nodes = tuple(n._replace(type=retyped[n.id]) if n.id in retyped else n
                  for n in (*b.nodes, *removed))
    edges = list(b.edges)
    known = set(b.edges)
    rewired: dict[tuple[str, str], Literal["added", "removed"]] = {}
    matched = set(m.pairs.values())
    for e in a.edges:
        mapped = e._replace(src=id_of[e.src], dst=id_of[e.dst])
        if mapped not in known:
            known.add(mapped)
            edges.append(mapped)
            if mapped.src in matched and mapped.dst in matched:
                rewired[mapped.src, mapped.dst] = "removed"
    in_a = {e._replace(src=id_of[e.src], dst=id_of[e.dst]) for e in a.edges}
    rewired.update(((e.src, e.dst), "added") for e in b.edges
                   if e not in in_a and e.src in matched and e.dst in matched)
    names_b = {t.name for t in b.tensors}
    tensors = b.tensors + tuple(replace(t, node=id_of.get(t.node) if t.node else None)
                                for t in a.tensors if t.name not in names_b)
    union = Trace(None, b.gradtrace_version, b.torch_version, b.outputs, b.output_names,
                  "the outputs of B", nodes, tuple(edges), tensors, (), ())
    return Union(union, status, rewired)
