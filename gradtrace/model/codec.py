"""The Trace as JSON data and back: the contract's dicts, keys in a fixed order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from itertools import repeat
from typing import Any, TypeVar

from ..errors import TraceFileError
from .compact import SCHEMA_3, Tables, expanded, one_number
from .profile import COST_METHODS, Costs, ModuleSaved, NodeCost
from .records import (
    Edge,
    Finding,
    FunctionCall,
    GradChange,
    GradSummary,
    LeafStep,
    Node,
    NodeFlow,
    Pass,
    Ranks,
    SavedTensor,
    SecondOrder,
    Shape,
    Source,
    Steps,
    TensorInfo,
    Trace,
)
from .rows import read_rows
from .validate import leaf_flow_only, schema_1_upgraded, validate_trace
from .values import json_float, json_values, py_float, py_values

Made = TypeVar("Made")
SCHEMA = SCHEMA_3
# a /1 trace is upgraded to /2 and a /3 expanded to its shape, then read as one
READS = ("gradtrace.trace/1", "gradtrace.trace/2", SCHEMA)


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """The JSON contract's dict (schema gradtrace.trace/3), keys in a fixed order.

    Nodes, edges and flow entries are rows; each flow gradient, source and saved tensor is
    written once, in a table, and referred to by its index (see docs/json.md)."""
    return {key: [_whole(item) for item in value] if isinstance(value, Iterator) else value
            for key, value in trace_sections(trace)}


class Streamed(dict[str, Any]):
    """A section's item whose Iterator values are mappings given as (key, value) pairs, made
    as they are written (a pass's flow: 100,000s of entries)."""


def _whole(item: Any) -> Any:
    """An item of a section with its streamed mappings made into dicts."""
    if type(item) is not Streamed:
        return item
    return {key: dict(value) if isinstance(value, Iterator) else value
            for key, value in item.items()}


def trace_sections(trace: Trace) -> Iterator[tuple[str, Any]]:
    """The contract's top-level keys and values, in order; each list (nodes, edges,
    gradients …) an iterator that makes its items one at a time, so a writer can stream.
    A pass's flow is an iterator of (node id, row) pairs, made as they are written."""
    gradients, tables = _GradientTable(), Tables(trace.nodes)
    for p in trace.passes:  # the table, before it is written (the flow refers to it)
        for f in p.flow.values():
            gradients.add(f.grad_outputs)
            gradients.add(f.grad_inputs)
            if f.unhooked is not None:
                gradients.add(f.unhooked)
    yield from (
        ("schema", SCHEMA),
        ("gradtrace_version", trace.gradtrace_version),
        ("torch_version", trace.torch_version),
        ("scenario", trace.scenario),
        ("outputs", list(trace.outputs)),
        ("output_names", list(trace.output_names)),
        ("root_reason", trace.root_reason),
        ("sources", tables.sources()),
        ("saved_tensors", tables.saved()),
        ("nodes", map(tables.node_row, trace.nodes)),
        ("edges", map(list, trace.edges)),  # an Edge is (src, dst, dst_input, src_output)
        ("tensors", map(_tensor_dict, trace.tensors)),
        ("gradients", (one_number(g) or summary_dict(g) for g in gradients.kept)),
        ("passes", (_pass_dict(p, _flow_refs(p, gradients)) for p in trace.passes)),
        ("findings", map(finding_dict, trace.findings)),
        ("functions", (
            {"function": c.function, "node": c.node, "line": c.line, "inputs": list(c.inputs)}
            for c in trace.functions)),
        ("stdout", trace.stdout),
        ("second_order", _second_order_dict(trace.second_order)),
        ("saved_read", trace.saved_read),
        ("steps", _steps_dict(trace.steps)),
        *((("costs", costs_dict(trace.costs)),) if trace.costs is not None else ()),
    )
    if trace.ranks is not None:  # written only by a rank of many: single runs stay as they were
        yield "ranks", trace.ranks._asdict()


def trace_from_dict(data: Any, lean: bool = False) -> Trace:
    """Rebuild a Trace from its JSON dict; raises TraceFileError if it is not a valid one.

    lean: only what `diff` compares is read (and so checked): no saved tensors, and the flow
    of leaf nodes only (a big trace's flow is most of it)."""
    if not isinstance(data, dict) or data.get("schema") not in READS:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise TraceFileError(
            f"not a gradtrace trace (schema {found!r:.60}, expected {' or '.join(READS)})",
            "make one with `gradtrace show SCENARIO --json > trace.json`",
        )
    if data["schema"] == SCHEMA:
        fast = _from_rows(data, lean)
        if fast is not None:
            return fast
        data = expanded(data)
    elif data["schema"] == READS[0]:
        data = schema_1_upgraded(data)
    if lean:
        data = leaf_flow_only(data)
    validate_trace(data, saved=not lean)
    return _built(data, lean, _Gradients(data.get("gradients", [])))


def _from_rows(data: dict[str, Any], lean: bool) -> Trace | None:
    """A /3 trace read from its rows (rows.py), the rest as always; None when a row is not
    plain, or not fine: the long way reads it, and names what is wrong."""
    passes = data.get("passes")
    if type(passes) is not list or not all(type(p) is dict for p in passes):
        return None
    try:  # what is wrong is named as the long way names it, first problem first
        skeleton = expanded({**data, "nodes": [], "edges": [],
                             "passes": [{**p, "flow": {}} for p in passes]})
        gradients = _Gradients(skeleton["gradients"])
        rows = read_rows(data, lean, skeleton["gradients"], gradients.of)
        if rows is None:
            return None
        validate_trace(skeleton, saved=not lean, ids=rows.ids)
        trace = _built(skeleton, lean, gradients)
    except TraceFileError:
        return None
    return replace(trace, nodes=rows.nodes, edges=rows.edges, passes=tuple(
        replace(p, flow=flow) for p, flow in zip(trace.passes, rows.flows, strict=True)))


def _built(data: dict[str, Any], lean: bool, gradients: _Gradients) -> Trace:
    """The Trace of data, validated."""
    try:
        return Trace(
            scenario=data["scenario"],
            gradtrace_version=data["gradtrace_version"],
            torch_version=data["torch_version"],
            outputs=tuple(data["outputs"]),
            output_names=tuple(data.get("output_names", ())),
            root_reason=data.get("root_reason", ""),
            nodes=_nodes_from(data["nodes"], lean),
            edges=_edges_from(data["edges"]),
            tensors=tuple(_tensor_from(t) for t in data["tensors"]),
            passes=tuple(_pass_from(p, gradients) for p in data["passes"]),
            findings=tuple(map(finding_from, data["findings"])),
            functions=tuple(
                FunctionCall(function=c["function"], node=c.get("node"), line=c.get("line"),
                             inputs=tuple(c["inputs"]))
                for c in data.get("functions", ())
            ),
            stdout=data.get("stdout", ""),
            second_order=_second_order_from(data.get("second_order")),
            steps=steps_from(data.get("steps")),
            ranks=None if data.get("ranks") is None else Ranks(data["ranks"]["rank"],
                                                                 data["ranks"]["world"]),
            saved_read=data.get("saved_read", True) and not lean,
            costs=costs_from(data.get("costs")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceFileError(
            f"trace JSON is incomplete or malformed: {type(exc).__name__}: {exc}",
            "regenerate it with `gradtrace show SCENARIO --json`",
        ) from exc


class _GradientTable:
    """The flow's gradient summaries, each once, referred to by index: one object is looked
    up by identity (a gradient sent along an edge and received at its other end), equal ones
    by their content (as exact as their JSON text: 0.0 and -0.0 differ)."""

    def __init__(self) -> None:
        # by id(): the Trace being written holds every summary, so no id is reused meanwhile
        self.kept: list[GradSummary] = []  # in index order
        self._by_id: dict[int, int] = {}
        self._by_content: dict[Any, int] = {}

    def add(self, summaries: tuple[GradSummary | None, ...]) -> None:
        """Add the summaries not in the table yet."""
        by_id = self._by_id
        for g in summaries:
            if g is not None and id(g) not in by_id:
                i = by_id[id(g)] = self._by_content.setdefault(_content(g), len(self.kept))
                if i == len(self.kept):
                    self.kept.append(g)

    def refs(self, summaries: tuple[GradSummary | None, ...]) -> list[int | None]:
        """The index of each summary (None for None), each added before."""
        by_id = self._by_id
        return [None if g is None else by_id[id(g)] for g in summaries]


def _content(g: GradSummary) -> Any:
    """A dict key equal for summaries with the same JSON text: the summary itself (a tuple
    of numbers) unless it holds a list or a zero, whose sign == ignores; then its repr."""
    if type(g.values) is list or 0.0 in (g.norm, g.min, g.max, g.values):
        return repr(g)
    return g


def _nodes_from(nodes: list[dict[str, Any]], lean: bool) -> tuple[Node, ...]:
    """The nodes, made field by field (a big trace has 100,000s); lean: without saved. The
    entries /3 nodes share (its tables') are made once, and shared."""
    saved, source = _once(_decode_saved), _once(_source_from)
    return tuple(Node.from_columns(
        id=_field(nodes, "id"), type=_field(nodes, "type"), kind=_field(nodes, "kind"),
        tensor=_field(nodes, "tensor"),
        saved=repeat(()) if lean else (tuple(map(saved, n["saved"])) for n in nodes),
        module=_optional(nodes, "module", None),
        recomputed=_optional(nodes, "recomputed", False),
        source=map(source, _optional(nodes, "source", None)),
        grad_graph=_optional(nodes, "grad_graph", False),
        hooks=(tuple(n.get("hooks", ())) for n in nodes),
        library=map(source, _optional(nodes, "library", None)),
        output_tensors=(tuple(n.get("output_tensors", ())) for n in nodes),
    ))


def _once(make: Callable[[Any], Made]) -> Callable[[Any], Made]:
    """make, called once per JSON object (by identity: the data read holds each alive)."""
    made: dict[int, Made] = {}

    def once(d: Any) -> Made:
        key = id(d)
        if key not in made:
            made[key] = make(d)
        return made[key]
    return once


def _edges_from(edges: list[dict[str, Any]]) -> tuple[Edge, ...]:
    """The edges, made field by field (a big trace has 100,000s)."""
    return tuple(Edge.from_columns(
        src=_field(edges, "src"), dst=_field(edges, "dst"),
        dst_input=_field(edges, "dst_input"), src_output=_field(edges, "src_output"),
    ))


def _field(items: list[dict[str, Any]], key: str) -> Iterator[Any]:
    """Each item's value for key, read at C speed (no Python call per item)."""
    return map(dict.__getitem__, items, repeat(key))


def _optional(items: list[dict[str, Any]], key: str, default: Any) -> Iterator[Any]:
    """Each item's value for key, or default where it is left out, read at C speed."""
    return map(dict.get, items, repeat(key), repeat(default))


def _source_from(d: dict[str, Any] | None) -> Source | None:
    return None if d is None else Source(file=d["file"], line=d["line"], code=d["code"])


def _decode_saved(d: dict[str, Any]) -> SavedTensor:
    return SavedTensor(name=d["name"], shape=_tuple(d["shape"]), dtype=d["dtype"],
                       bytes=d["bytes"], status=d.get("status", "ok"))


def summary_dict(g: GradSummary | None) -> dict[str, Any] | None:
    """A GradSummary as JSON data; non-finite floats become the strings "nan", "inf", "-inf"."""
    if g is None:
        return None
    d: dict[str, Any] = {
        "shape": list(g.shape),
        "norm": json_float(g.norm),
        "min": json_float(g.min),
        "max": json_float(g.max),
        "finite": g.finite,
    }
    if g.values is not None:
        d["values"] = json_values(g.values)
    if g.note is not None:
        d["note"] = g.note
    if g.is_complex:
        d["complex"] = True
    if g.local_shard:
        d["local_shard"] = True
    if g.shards:
        d["shards"] = g.shards
    return d


def summary_from(d: dict[str, Any] | None) -> GradSummary | None:
    """Inverse of summary_dict."""
    if d is None:
        return None
    return GradSummary(
        shape=tuple(d["shape"]), norm=_norm(d["norm"]), min=py_float(d["min"]),
        max=py_float(d["max"]), finite=d["finite"],
        values=py_values(d["values"]) if "values" in d else None, note=d.get("note"),
        is_complex=d.get("complex", False), local_shard=d.get("local_shard", False),
        shards=d.get("shards", 0),
    )


def _tensor_dict(t: TensorInfo) -> dict[str, Any]:
    return {
        "name": t.name,
        "shape": list(t.shape),
        "dtype": t.dtype,
        "requires_grad": t.requires_grad,
        "is_leaf": t.is_leaf,
        "retains_grad": t.retains_grad,
        "grad_fn": t.grad_fn,
        "node": t.node,
        "grad": summary_dict(t.grad),
        "grad_before": summary_dict(t.grad_before),
        "value": summary_dict(t.value),
        "grad_note": t.grad_note,
    }


def _tensor_from(d: dict[str, Any]) -> TensorInfo:
    return TensorInfo(
        name=d["name"], shape=tuple(d["shape"]), dtype=d["dtype"],
        requires_grad=d["requires_grad"], is_leaf=d["is_leaf"], retains_grad=d["retains_grad"],
        grad_fn=d["grad_fn"], node=d["node"], grad=summary_from(d["grad"]),
        grad_before=summary_from(d.get("grad_before")), value=summary_from(d.get("value")),
        grad_note=d.get("grad_note"),
    )


def _flow_refs(p: Pass, gradients: _GradientTable) -> Iterator[tuple[str, list[Any]]]:
    """A pass's flow, entry by entry: [grad_outputs, grad_inputs] each gradient as its index in
    the table, and an object of order and unhooked when either is given."""
    refs = gradients.refs
    for i, (node, f) in enumerate(p.flow.items()):
        entry: list[Any] = [refs(f.grad_outputs), refs(f.grad_inputs)]
        if f.position != i or f.unhooked is not None:
            extras: dict[str, Any] = {}
            if f.position != i:  # in run order: left out
                extras["order"] = f.position
            if f.unhooked is not None:  # what a node sent before a module hook replaced it
                extras["unhooked"] = refs(f.unhooked)
            entry.append(extras)
        yield node, entry


def _pass_dict(p: Pass, flow: Iterator[tuple[str, list[Any]]]) -> Streamed:
    return Streamed({
        "kind": p.kind,
        "roots": list(p.roots),
        "retain_graph": p.retain_graph,
        "create_graph": p.create_graph,
        "error": p.error,
        "flow": flow,
        "by": p.by,
        "root_names": list(p.root_names),
        "line": p.line,
        "code": p.code,
        "grad_changes": [
            {"tensor": c.tensor, "before": summary_dict(c.before), "after": summary_dict(c.after)}
            for c in p.grad_changes
        ],
        "graph": p.graph,
        **({"light": True} if p.light else {}),
    })


class _Gradients:
    """The gradients table as read: each entry one GradSummary, made when first referred to
    (so writing the trace again makes the same table)."""

    def __init__(self, table: list[Any]) -> None:
        self._table = table
        self._made: dict[int, GradSummary | None] = {}

    def of(self, refs: list[int | None]) -> tuple[GradSummary | None, ...]:
        """The summaries refs point at (None stays None)."""
        return tuple(None if g is None else self._summary(g) for g in refs)

    def _summary(self, index: int) -> GradSummary | None:
        made = self._made
        if index not in made:
            made[index] = summary_from(self._table[index])
        return made[index]


def _pass_from(d: dict[str, Any], gradients: _Gradients) -> Pass:
    return Pass(
        kind=d["kind"],
        roots=tuple(d["roots"]),
        retain_graph=d["retain_graph"],
        create_graph=d["create_graph"],
        error=d["error"],
        flow={
            node: NodeFlow(grad_outputs=gradients.of(f["grad_outputs"]),
                           grad_inputs=gradients.of(f["grad_inputs"]),
                           position=f.get("order", i),  # left out: its place in the flow
                           unhooked=None if f.get("unhooked") is None
                           else gradients.of(f["unhooked"]))
            for i, (node, f) in enumerate(d["flow"].items())
        },
        by=d.get("by", "scenario"),
        root_names=tuple(d.get("root_names", ())),
        line=d.get("line"),
        code=d.get("code"),
        grad_changes=tuple(
            GradChange(tensor=c["tensor"], before=summary_from(c["before"]),
                       after=summary_from(c["after"]))
            for c in d.get("grad_changes", ())
        ),
        graph=d.get("graph", 0),
        light=d.get("light", False),
    )


def _second_order_dict(s: SecondOrder | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "root": s.root,
        "wrt": list(s.wrt),
        "blocks": [{"a": a, "b": b, "values": json_values(v)} for (a, b), v in s.blocks.items()],
        "error": s.error,
    }


def _second_order_from(d: dict[str, Any] | None) -> SecondOrder | None:
    if d is None:
        return None
    return SecondOrder(
        root=d["root"], wrt=tuple(d["wrt"]),
        blocks={(b["a"], b["b"]): py_values(b["values"]) for b in d["blocks"]},
        error=d.get("error"),
    )


def _steps_dict(s: Steps | None) -> dict[str, Any] | None:
    """Column by column, a row per pass; a leaf's .grad as [norm, max_abs, finite, kept]."""
    if s is None:
        return None
    return {
        "leaves": list(s.leaves),
        "modules": list(s.modules),
        "loss": [json_float(x) for x in s.loss],
        "optimizer_steps": list(s.optimizer_steps),
        "grads": leaf_steps_json(s.grads),
        "optimizer_steps_after": s.optimizer_steps_after,
        "loss_scale": [json_float(x) for x in s.loss_scale],
        "loss_divisor": [json_float(x) for x in s.loss_divisor],
        "optimized": list(s.optimized),
        "scale_free": list(s.scale_free),
        "closure_call": list(s.closure_call),
    }


def leaf_steps_json(grads: Iterable[tuple[LeafStep | None, ...]]) -> list[Any]:
    """Rows of leaves' .grad in brief as JSON data: each [norm, max_abs, finite, kept] or null."""
    return [[None if g is None else [json_float(g.norm), json_float(g.max_abs), g.finite, g.kept]
             for g in row] for row in grads]


def steps_from(d: dict[str, Any] | None) -> Steps | None:
    """Inverse of the steps section's dict (validated)."""
    if d is None:
        return None
    return Steps(
        leaves=tuple(d["leaves"]), modules=tuple(d["modules"]),
        loss=tuple(py_float(x) for x in d["loss"]),
        optimizer_steps=tuple(d["optimizer_steps"]),
        grads=tuple(tuple(None if g is None else LeafStep(
            norm=_norm(g[0]), max_abs=_norm(g[1]), finite=g[2], kept=g[3]) for g in row)
            for row in d["grads"]),
        optimizer_steps_after=d.get("optimizer_steps_after", 0),
        loss_scale=tuple(py_float(x) for x in d.get("loss_scale", ())),
        loss_divisor=tuple(py_float(x) for x in d.get("loss_divisor", ())),
        optimized=tuple(d.get("optimized", ())),
        scale_free=tuple(d.get("scale_free", ())),
        closure_call=tuple(d.get("closure_call", ())))


def costs_dict(c: Costs) -> dict[str, Any]:
    """--profile's costs: the pass, how it was timed, and each node's costs by id."""
    return {
        "pass": c.pass_number, "method": c.method, "device": c.device,
        "wall_us": list(c.wall_us), "profiled_us": list(c.profiled_us),
        "op_total_us": list(c.op_total_us),
        "peak": None if c.peak_bytes is None else {
            "bytes": c.peak_bytes, "node": c.peak_node,
            "saved": [{"module": s.module, "bytes": s.bytes} for s in c.peak_saved]},
        "forward_us": dict(c.forward_us),
        "accumulate_us": c.accumulate_us, "accumulate_spread_us": c.accumulate_spread_us,
        "engine_us": c.engine_us, "outside_us": c.outside_us,
        "ops_us": dict(c.ops_us),
        "recomputed": None if c.recomputed_us is None else {
            "time_us": c.recomputed_us, "saved_bytes": c.recomputed_saved},
        "note": c.note,
        "nodes": {k: {"time_us": n.time_us, "spread_us": n.spread_us,
                      "allocated": n.allocated, "freed": n.freed}
                  for k, n in c.nodes.items()},
    }


def costs_from(d: dict[str, Any] | None) -> Costs | None:
    """The Costs of a (validated) costs dict; None when there is none."""
    if d is None:
        return None
    peak = d.get("peak")
    recomputed = d.get("recomputed")
    method = d["method"]
    assert method in COST_METHODS  # validated
    return Costs(
        pass_number=d["pass"], method=method, device=d["device"],
        nodes={k: NodeCost(float(n["time_us"]), float(n["spread_us"]), n["allocated"],
                           n["freed"]) for k, n in d["nodes"].items()},
        wall_us=tuple(map(float, d["wall_us"])), profiled_us=tuple(map(float, d["profiled_us"])),
        op_total_us=tuple(map(float, d.get("op_total_us", ()))),
        peak_bytes=None if peak is None else peak["bytes"],
        peak_node=None if peak is None else peak.get("node"),
        peak_saved=() if peak is None else tuple(
            ModuleSaved(s["module"], s["bytes"]) for s in peak.get("saved", ())),
        forward_us={k: float(v) for k, v in d.get("forward_us", {}).items()},
        accumulate_us=float(d.get("accumulate_us", 0.0)),
        accumulate_spread_us=float(d.get("accumulate_spread_us", 0.0)),
        engine_us=float(d.get("engine_us", 0.0)),
        outside_us=None if d.get("outside_us") is None else float(d["outside_us"]),
        ops_us={k: float(v) for k, v in d.get("ops_us", {}).items()},
        recomputed_us=None if recomputed is None else float(recomputed["time_us"]),
        recomputed_saved=None if recomputed is None else recomputed["saved_bytes"],
        note=d.get("note"))


def finding_dict(f: Finding) -> dict[str, Any]:
    """A Finding as JSON data: the keys it has a value for."""
    d: dict[str, Any] = {"code": f.code, "severity": f.severity, "message": f.message}
    for key in ("tensor", "node", "hint", "file", "line"):
        if getattr(f, key) is not None:
            d[key] = getattr(f, key)
    return d


def finding_from(d: dict[str, Any]) -> Finding:
    """Inverse of finding_dict (validated)."""
    return Finding(code=d["code"], severity=d["severity"], message=d["message"],
                   tensor=d.get("tensor"), node=d.get("node"), hint=d.get("hint"),
                   file=d.get("file"), line=d.get("line"))


def _norm(x: float | str | None) -> float:
    norm = py_float(x)
    if norm is None:
        raise ValueError("a gradient summary's norm is null")
    return norm


def _tuple(shape: list[int | str] | None) -> Shape | None:
    return None if shape is None else tuple(shape)
