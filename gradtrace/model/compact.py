"""Schema /3's compact forms: nodes, edges and flow entries as rows, sources and saved tensors
in tables, a one-number gradient as its value; and a /3 trace's data in the /2 shape, which
the reader checks and reads as it always did."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..errors import TraceFileError
from .records import GradSummary, Node, SavedTensor, Source

SCHEMA_2, SCHEMA_3 = "gradtrace.trace/2", "gradtrace.trace/3"
NODE_ROW = ("id", "type", "kind", "tensor", "saved", "module", "source")
SOURCE_ROW = ("file", "line", "code")  # the sources table's rows
SAVED_ROW = ("name", "shape", "dtype", "bytes", "status")  # the saved tensors table's rows
# a node's keys beyond its row, in its row's last item when any is not the default
NODE_EXTRAS = ("recomputed", "grad_graph", "hooks", "output_tensors", "library")
EDGE_ROW = ("src", "dst", "dst_input", "src_output")
FLOW_ROW = ("grad_outputs", "grad_inputs")
FLOW_EXTRAS = ("order", "unhooked")
Read = TypeVar("Read")


class Tables:
    """The nodes' sources and saved tensors, each once in first-use order, and each node as
    its row referring to them."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self._sources: dict[Source, int] = {}
        self._saved: dict[SavedTensor, int] = {}
        sources, saved = self._sources, self._saved
        for n in nodes:
            if n.source is not None:
                sources.setdefault(n.source, len(sources))
            if n.library is not None:
                sources.setdefault(n.library, len(sources))
            for s in n.saved:
                saved.setdefault(s, len(saved))

    def sources(self) -> list[list[Any]]:
        """The sources table's rows: [file, line, code]."""
        return [[s.file, s.line, s.code] for s in self._sources]

    def saved(self) -> list[list[Any]]:
        """The saved tensors table's rows: [name, shape, dtype, bytes, status]."""
        return [[s.name, None if s.shape is None else list(s.shape), s.dtype, s.bytes, s.status]
                for s in self._saved]

    def node_row(self, n: Node) -> list[Any]:
        """[id, type, kind, tensor, saved indexes, module, source index] and, when a key
        beyond them is not its default, an object of those."""
        saved = self._saved
        row: list[Any] = [n.id, n.type, n.kind, n.tensor, [saved[s] for s in n.saved],
                          n.module, None if n.source is None else self._sources[n.source]]
        if n.recomputed or n.grad_graph or n.hooks or n.output_tensors or n.library:
            extras: dict[str, Any] = {}
            if n.recomputed:
                extras["recomputed"] = True
            if n.grad_graph:
                extras["grad_graph"] = True
            if n.hooks:
                extras["hooks"] = list(n.hooks)
            if n.output_tensors:
                extras["output_tensors"] = list(n.output_tensors)
            if n.library:
                extras["library"] = self._sources[n.library]
            row.append(extras)
        return row


def one_number(g: GradSummary) -> dict[str, Any] | None:
    """A gradient summary as the /3 gradients table holds it when it is one finite, non-zero
    number: its shape and value (its norm, min, max and finiteness are what the value says);
    None for any other, written in full."""
    value = g.values
    while type(value) is list and len(value) == 1:
        value = value[0]
    if type(value) is not float or not value or value != value or g.min != value \
            or g.max != value or g.norm != abs(value) or not g.finite or g.note is not None \
            or g.is_complex or g.local_shard or g.shards or abs(value) == math.inf:
        return None
    return {"shape": list(g.shape), "values": g.values}


def expanded(data: dict[str, Any]) -> dict[str, Any]:
    """A /3 trace's data as the /2 trace it says; raises TraceFileError naming the first row
    or reference that is not one (the rest is left for validate_trace to name)."""
    try:
        sources = _rows(data.get("sources", []), "sources",
                        lambda r: _row_dict(r, SOURCE_ROW))
        saved = _rows(data.get("saved_tensors", []), "saved_tensors",
                      lambda r: _row_dict(r, SAVED_ROW))
        nodes = _rows(data["nodes"], "nodes", lambda r: _node_dict(r, sources, saved))
        edges = _rows(data["edges"], "edges", lambda r: _row_dict(r, EDGE_ROW))
        gradients = [_summary_dict(g) for g in _list(data.get("gradients", []), "gradients")]
        passes = [_pass_dict(p, f"passes[{i}]")
                  for i, p in enumerate(_list(data["passes"], "passes"))]
    except (_Invalid, KeyError) as exc:
        problem = f"{exc.args[0]}: missing" if isinstance(exc, KeyError) \
            else f"{exc.where}: {exc.problem}"
        raise TraceFileError(f"invalid trace: {problem}",
                             "regenerate it with `gradtrace show SCENARIO --json`") from None
    tables = ("sources", "saved_tensors")
    return {**{k: v for k, v in data.items() if k not in tables}, "schema": SCHEMA_2,
            "nodes": nodes, "edges": edges, "gradients": gradients, "passes": passes}


class _Invalid(Exception):
    """A row or reference of a /3 trace that is not one: where (in the item being read, until
    the item's own path is put before it) and what."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


def _list(value: Any, path: str) -> list[Any]:
    if type(value) is not list:
        raise _Invalid(path, f"expected a list, found {type(value).__name__}")
    return value


def _rows(items: Any, path: str, make: Callable[[Any], Read]) -> list[Read]:
    """make(item) of each item of the list at path; a problem is named by its item's path,
    made only then (100,000s of items are fine)."""
    items = _list(items, path)
    try:
        return [make(item) for item in items]
    except _Invalid:
        for i, item in enumerate(items):
            try:
                make(item)
            except _Invalid as exc:
                raise _Invalid(f"{path}[{i}]{exc.where}", exc.problem) from None
        raise


def _row_dict(row: Any, keys: tuple[str, ...], extras: tuple[str, ...] = ()) -> dict[str, Any]:
    """A row as the object of keys; with extras, an object of those may follow."""
    if type(row) is not list or not len(keys) <= len(row) <= len(keys) + bool(extras):
        said = f"{len(keys)}" + (f" or {len(keys) + 1}" if extras else "")
        raise _Invalid("", f"expected a list of {said} items, found {row!r:.60}")
    d = dict(zip(keys, row, strict=False))
    if len(row) > len(keys):
        more = row[-1]
        if type(more) is not dict or not more or not set(more) <= set(extras):
            raise _Invalid(f"[{len(keys)}]", f"expected an object of {', '.join(extras)}, "
                           f"found {more!r:.60}")
        d.update(more)
    return d


def _at(table: list[Any], index: Any, where: str, name: str) -> Any:
    """table[index], index a whole number within it."""
    if type(index) is not int or not 0 <= index < len(table):
        raise _Invalid(where, f"expected an index into {name} (0 to {len(table) - 1}), "
                       f"found {index!r:.40}")
    return table[index]


def _node_dict(row: Any, sources: list[Any], saved: list[Any]) -> dict[str, Any]:
    d = _row_dict(row, NODE_ROW, NODE_EXTRAS)
    d["saved"] = [_at(saved, k, f"[4][{j}]", "saved_tensors")
                  for j, k in enumerate(_list(d["saved"], "[4]"))]
    if d["source"] is not None:
        d["source"] = _at(sources, d["source"], "[6]", "sources")
    if "library" in d:
        d["library"] = _at(sources, d["library"], "[7].library", "sources")
    return d


def _summary_dict(g: Any) -> Any:
    """A gradients table entry in full: a one-number gradient's norm, min, max and
    finiteness from its value (anything else is left for validate_trace to name)."""
    if type(g) is not dict or "norm" in g or "values" not in g or len(g) != 2:
        return g
    value = g["values"]
    while type(value) is list and len(value) == 1:
        value = value[0]
    if type(value) not in (int, float):
        return g
    return {"shape": g["shape"], "norm": abs(value), "min": value, "max": value,
            "finite": True, "values": g["values"]}


def _pass_dict(p: Any, path: str) -> Any:
    if type(p) is not dict or type(p.get("flow")) is not dict:
        return p  # validate_trace names it
    flow = p["flow"]
    try:
        return {**p, "flow": {node: _row_dict(row, FLOW_ROW, FLOW_EXTRAS)
                              for node, row in flow.items()}}
    except _Invalid:
        for node, row in flow.items():
            try:
                _row_dict(row, FLOW_ROW, FLOW_EXTRAS)
            except _Invalid as exc:
                raise _Invalid(f"{path}.flow[{node!r:.40}]{exc.where}", exc.problem) from None
        raise
