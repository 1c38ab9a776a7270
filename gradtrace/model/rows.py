"""A /3 trace's nodes, edges and flow read straight from their rows, checked column by column
(each distinct value once, by the same checks as a node's): a million-node trace is read
without a dict per node. Any row that is not the common kind (a node with more keys, a flow
entry with its order) leaves the reading to the long way, which names every problem."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any

from .compact import EDGE_ROW, FLOW_ROW, NODE_ROW, SAVED_ROW, SOURCE_ROW
from .records import Edge, GradSummary, Node, NodeFlow, SavedTensor, Source
from .validate import NODE_ID, node_problem, summary_problem

Summaries = Callable[[list[int | None]], tuple[GradSummary | None, ...]]


@dataclass(frozen=True)
class Rows:
    """What the rows say: the node ids, the nodes, the edges, and each pass's flow."""

    ids: set[str]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    flows: list[dict[str, NodeFlow]]


def read_rows(data: dict[str, Any], lean: bool, gradients: list[Any], of: Summaries
              ) -> Rows | None:
    """The rows of data (a /3 trace) read and checked; None when any is not plain (then the
    long way reads the trace, and names its problem). gradients: the table, in full; of:
    the summaries of refs into it. lean: no saved tensors, the flow of leaves only."""
    try:
        sources, saved = _sources(data.get("sources", [])), _saved(data.get("saved_tensors", []))
        if sources is None or saved is None:
            return None
        nodes = _nodes(data["nodes"], sources, saved, lean)
        if nodes is None:
            return None
        ids = set(nodes[0])
        edges = _edges(data["edges"], ids)
        leaves = {i for i, kind in zip(nodes[0], nodes[2], strict=True) if kind == "leaf"} \
            if lean else None
        flows = [_flow(p, ids, leaves, gradients, of) for p in data["passes"]]
    except (TypeError, KeyError, AttributeError):  # a value of the wrong type somewhere
        return None
    if edges is None or any(f is None for f in flows):
        return None
    return Rows(ids, _made(nodes, lean), edges, flows)  # type: ignore[arg-type]


def _ok(problem_of: Callable[[Any], str | None], values: Iterable[Any]) -> bool:
    return all(problem_of(v) is None for v in values)


def _plain(rows: Any, width: int) -> bool:
    """Whether rows is a list of lists of width items each."""
    return type(rows) is list and all(type(r) is list and len(r) == width for r in rows)


def _sources(rows: Any) -> list[Source] | None:
    if not _plain(rows, len(SOURCE_ROW)):
        return None
    made = [Source(*r) for r in rows]
    return made if _ok(node_problem, (_node(source=s._asdict()) for s in made)) else None


def _saved(rows: Any) -> list[SavedTensor] | None:
    if not _plain(rows, len(SAVED_ROW)):
        return None
    dicts = [dict(zip(SAVED_ROW, r, strict=True)) for r in rows]
    if not _ok(node_problem, (_node(saved=[d]) for d in dicts)):
        return None
    return [SavedTensor(d["name"], None if d["shape"] is None else tuple(d["shape"]),
                        d["dtype"], d["bytes"], d["status"]) for d in dicts]


def _node(**fields: Any) -> dict[str, Any]:
    """A node that is fine but for fields: what node_problem checks them in."""
    return {"id": "n0", "type": "X", "kind": "op", "tensor": None, "saved": [], **fields}


def _indexes(values: Iterable[Any], size: int, null: bool = False) -> bool:
    """Whether each value is a whole number in [0, size) (or None, when null)."""
    values = list(values)
    allowed = {int, type(None)} if null else {int}
    # the types of all, not of the distinct values: a set keeps 1 or True, whichever came
    # first
    return set(map(type, values)) <= allowed and all(
        v is None or 0 <= v < size for v in set(values))


def _nodes(rows: Any, sources: list[Source], saved: list[SavedTensor], lean: bool
           ) -> list[tuple[Any, ...]] | None:
    """The node rows as columns, each checked; None when any row is not plain."""
    if not _plain(rows, len(NODE_ROW)):
        return None
    if not rows:
        return [()] * len(NODE_ROW)
    columns: list[Any] = list(zip(*rows, strict=True))
    ids, types, kinds, tensors, saves, modules, places = columns
    if set(map(type, ids)) != {str} or not all(map(NODE_ID.fullmatch, ids)) \
            or len(set(ids)) != len(ids):
        return None
    for key, column in (("type", types), ("kind", kinds), ("tensor", tensors),
                        ("module", modules)):
        if not set(map(type, column)) <= {str, type(None)} \
                or not _ok(node_problem, (_node(**{key: v}) for v in set(column))):
            return None
    if set(map(type, saves)) != {list} or not _indexes(chain.from_iterable(saves), len(saved)) \
            or not _indexes(places, len(sources), null=True):
        return None
    columns[4] = repeat(()) if lean else _saved_tuples(saves, saved)
    columns[6] = [None if s is None else sources[s] for s in places]
    return columns


def _saved_tuples(saves: Iterable[list[int]], saved: list[SavedTensor]
                  ) -> list[tuple[SavedTensor, ...]]:
    """Each node's saved tensors; equal ones one tuple (a chain's nodes save alike)."""
    made: dict[tuple[int, ...], tuple[SavedTensor, ...]] = {}
    out = []
    for s in saves:
        key = tuple(s)
        if key not in made:
            made[key] = tuple(saved[k] for k in key)
        out.append(made[key])
    return out


def _made(columns: list[Any], lean: bool) -> tuple[Node, ...]:
    ids, types, kinds, tensors, saves, modules, places = columns
    return tuple(Node.from_columns(
        id=ids, type=types, kind=kinds, tensor=tensors, saved=saves, module=modules,
        recomputed=repeat(False), source=places, grad_graph=repeat(False)))


def _edges(rows: Any, ids: set[str]) -> tuple[Edge, ...] | None:
    if not _plain(rows, len(EDGE_ROW)):
        return None
    if not rows:
        return ()
    src, dst, dst_input, src_output = zip(*rows, strict=True)
    if set(map(type, chain(src, dst))) != {str} or not set(src) | set(dst) <= ids \
            or set(map(type, chain(dst_input, src_output))) != {int} \
            or min(chain(dst_input, src_output)) < 0:
        return None
    return tuple(Edge.from_columns(src=src, dst=dst, dst_input=dst_input,
                                   src_output=src_output))


def _flow(p: Any, ids: set[str], leaves: set[str] | None, gradients: list[Any],
          of: Summaries) -> dict[str, NodeFlow] | None:
    """A pass's flow: each entry [grad_outputs, grad_inputs], refs into the gradients table
    (each referred to checked); None when any is not plain (an order, an unhooked)."""
    flow = p["flow"]
    if type(flow) is not dict or not flow.keys() <= ids \
            or not all(type(r) is list and len(r) == len(FLOW_ROW) and type(r[0]) is list
                       and type(r[1]) is list for r in flow.values()):
        return None
    refs = list(chain.from_iterable(chain.from_iterable(flow.values())))
    if not _indexes(refs, len(gradients), null=True) \
            or not _ok(summary_problem, (gradients[g] for g in set(refs) if g is not None)):
        return None
    return {node: NodeFlow(of(outs), of(ins), i) for i, (node, (outs, ins))
            in enumerate(flow.items()) if leaves is None or node in leaves}
