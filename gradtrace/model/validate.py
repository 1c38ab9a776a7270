"""A saved trace is untrusted input: check it against the JSON contract (schema /2; a /1
trace is upgraded to it first) before using it.

The first problem is reported with its JSON path (`nodes[3].id: …`). Nested values are walked
without recursion and bounded in depth; names and ids are bounded in length.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, get_args

from ..errors import TraceFileError
from .records import COST_METHODS, SavedStatus

MAX_NAME = 1_000  # ids, names, types, dtypes, module paths, source lines
MAX_TEXT = 1_000_000  # messages, hints, errors (stdout is only cut when shown)
MAX_DEPTH = 64  # nesting of value lists: a tensor has at most 64 dimensions
NUMBER_WORDS = ("nan", "inf", "-inf")
NODE_ID = re.compile(r"n[0-9]{1,9}")  # the contract's ids: n0, n1, …


class _Invalid(Exception):
    """A problem at a JSON path; a list item is checked with paths relative to it, and its
    loop puts its own path in front only when a problem is found (no path text is made for
    the 100,000s of items that are fine)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem

    def under(self, prefix: str) -> _Invalid:
        """The same problem with its path inside prefix."""
        if not self.path:
            return _Invalid(prefix, self.problem)
        return _Invalid(prefix + ("" if self.path.startswith("[") else ".") + self.path,
                        self.problem)


def validate_trace(data: Any, saved: bool = True, ids: set[str] | None = None) -> None:
    """Raise TraceFileError naming the first place where data breaks the /2 contract (saved:
    False leaves nodes' saved tensors unchecked, for a reader that does not read them; the
    gradients no flow entry refers to are not read, nor checked). ids: the node ids of nodes
    checked already (data's nodes, edges and flow are left out: rows.py checked them)."""
    try:
        _trace(data, saved, ids)
    except _Invalid as exc:
        raise TraceFileError(f"invalid trace: {exc}",
                             "regenerate it with `gradtrace show SCENARIO --json`") from None


def _each(items: Any, path: str, check: Callable[[Any], None]) -> None:
    """check(item) for each item of the list at path; a problem's path is put under it."""
    for i, item in enumerate(_list(items, path)):
        try:
            check(item)
        except _Invalid as exc:
            raise exc.under(f"{path}[{i}]") from None


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _obj(value: Any, path: str, required: Collection[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(path, f"expected an object, found {_type_name(value)}")
    for key in required:
        if key not in value:
            raise _Invalid(f"{path}.{key}" if path else key, "missing")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(path, f"expected a list, found {_type_name(value)}")
    return value


def _str(value: Any, path: str, null: bool = False, limit: int = MAX_NAME) -> None:
    if value is None and null:
        return
    if not isinstance(value, str):
        raise _Invalid(path, f"expected a string, found {_type_name(value)}")
    if len(value) > limit:
        raise _Invalid(path, f"longer than {limit:,} characters")


def _int(value: Any, path: str, null: bool = False, signed: bool = False) -> None:
    """A whole number, ≥ 0 unless signed (a memory balance may be negative)."""
    if value is None and null:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 and not signed:
        raise _Invalid(path, f"expected a whole number{'' if signed else ' ≥ 0'}, "
                       f"found {value!r:.40}")


def _bool(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise _Invalid(path, f"expected true or false, found {_type_name(value)}")


def _choice(value: Any, path: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _Invalid(path, f"expected one of {', '.join(choices)}, found {value!r:.40}")


def _number(value: Any, path: str, null: bool = False) -> None:
    if value is None and null:
        return
    if isinstance(value, bool) or not (isinstance(value, (int, float))
                                       or value in NUMBER_WORDS):
        raise _Invalid(path, f"expected a number, found {value!r:.40}")


def _shape(value: Any, path: str, null: bool = False) -> None:
    if value is None and null:
        return
    for i, size in enumerate(_list(value, path)):
        if size != "ragged":  # a nested tensor's ragged dimension
            _int(size, f"{path}[{i}]")
    if len(value) > MAX_DEPTH:
        raise _Invalid(path, f"more than {MAX_DEPTH} dimensions")


def _values(value: Any, path: str, shape: list[int] | None = None) -> None:
    """A number, or nested lists of numbers (or bools), at most MAX_DEPTH deep; with a shape,
    nested exactly as the shape says."""
    todo = [(value, path, 0)]
    while todo:
        item, where, depth = todo.pop()
        if isinstance(item, list):
            if depth >= MAX_DEPTH:
                raise _Invalid(where, f"nested more than {MAX_DEPTH} deep")
            if shape is not None and (depth >= len(shape) or len(item) != shape[depth]):
                raise _Invalid(where, f"does not have the shape {shape}")
            todo.extend((x, f"{where}[{i}]", depth + 1) for i, x in enumerate(item))
        else:
            if shape is not None and depth != len(shape):
                raise _Invalid(where, f"does not have the shape {shape}")
            if not isinstance(item, bool):
                _number(item, where)


def _summary(value: Any, path: str) -> None:
    if value is None:
        return
    try:
        s = _obj(value, "", ("shape", "norm", "min", "max", "finite"))
        _shape(s["shape"], "shape")
        _number(s["norm"], "norm")
        _number(s["min"], "min", null=True)
        _number(s["max"], "max", null=True)
        _bool(s["finite"], "finite")
        if "values" in s:
            _values(s["values"], "values", s["shape"])
        _str(s.get("note"), "note", null=True)
        for flag in ("complex", "local_shard"):
            if flag in s:
                _bool(s[flag], flag)
        if "shards" in s:
            _int(s["shards"], "shards")
    except _Invalid as exc:
        raise exc.under(path) from None


def _ref(value: Any, path: str, ids: set[str], null: bool = False) -> None:
    if value is None and null:
        return
    _str(value, path)
    if value not in ids:
        raise _Invalid(path, f"points at {value!r:.40}, which is not a node id")


def _trace(data: Any, saved: bool, known: set[str] | None) -> None:
    top = _obj(data, "", ("schema", "gradtrace_version", "torch_version", "scenario",
                          "outputs", "nodes", "edges", "tensors", "passes", "findings"))
    for key in ("gradtrace_version", "torch_version"):
        _str(top[key], key)
    _str(top["scenario"], "scenario", null=True, limit=MAX_TEXT)
    ids: set[str] = set() if known is None else known
    shared: set[int] = set()  # the saved tensors and sources checked, by identity
    _each(top["nodes"], "nodes", lambda node: _node(node, ids, saved, shared))
    for i, node_id in enumerate(_list(top["outputs"], "outputs")):
        _ref(node_id, f"outputs[{i}]", ids)
    for i, name in enumerate(_list(top.get("output_names", []), "output_names")):
        _str(name, f"output_names[{i}]")
    _str(top.get("root_reason", ""), "root_reason")
    _each(top["edges"], "edges", lambda edge: _edge(edge, ids))
    _each(top["tensors"], "tensors", lambda t: _tensor(t, ids))
    gradients = _list(top.get("gradients", []), "gradients")
    used: set[int | None] = set()  # the gradients the flow refers to: checked once each, after
    _each(top["passes"], "passes", lambda p: _pass(p, ids, len(gradients), used))
    for g in sorted(g for g in used if g is not None):
        _summary(gradients[g], f"gradients[{g}]")
    _each(top["findings"], "findings", lambda f: _finding(f, ids))
    _each(top.get("functions", []), "functions", lambda c: _function(c, ids))
    _str(top.get("stdout", ""), "stdout", limit=2**62)
    _second_order(top.get("second_order"), "second_order")
    _bool(top.get("saved_read", True), "saved_read")
    _steps(top.get("steps"), "steps", len(top["passes"]))
    _ranks(top.get("ranks"), "ranks")
    _costs(top.get("costs"), "costs", ids, len(top["passes"]))


def _node(raw: Any, ids: set[str], saved: bool, shared: set[int]) -> None:
    """A node; its saved tensors and sources are checked once each by identity (a /3
    trace's nodes share their tables' entries)."""
    node = _obj(raw, "", ("id", "type", "kind", "tensor", "saved"))
    _str(node["id"], "id")
    if not NODE_ID.fullmatch(node["id"]):
        raise _Invalid("id", f"{node['id']!r:.40} is not a node id like n0, n1, …")
    if node["id"] in ids:
        raise _Invalid("id", f"{node['id']!r:.40} is used twice")
    ids.add(node["id"])
    _str(node["type"], "type")
    _choice(node["kind"], "kind", ("op", "leaf", "custom"))
    _str(node["tensor"], "tensor", null=True)
    _str(node.get("module"), "module", null=True)
    _bool(node.get("recomputed", False), "recomputed")
    _bool(node.get("grad_graph", False), "grad_graph")
    _each(node.get("hooks", []), "hooks", lambda h: _str(h, ""))
    _each(node.get("output_tensors", []), "output_tensors", lambda t: _str(t, "", null=True))
    for key in ("source", "library"):
        if node.get(key) is not None and id(node[key]) not in shared:
            source = _obj(node[key], key, ("file", "line", "code"))
            _str(source["file"], f"{key}.file")
            _int(source["line"], f"{key}.line")
            _str(source["code"], f"{key}.code")
            shared.add(id(source))
    if saved and node["saved"]:
        _each(node["saved"], "saved", lambda s: _saved(s, shared))


def _saved(raw: Any, shared: set[int]) -> None:
    if id(raw) in shared:
        return
    saved = _obj(raw, "", ("name", "shape", "dtype", "bytes"))
    _str(saved["name"], "name")
    _shape(saved["shape"], "shape", null=True)
    _str(saved["dtype"], "dtype", null=True)
    _int(saved["bytes"], "bytes")
    _choice(saved.get("status", "ok"), "status", get_args(SavedStatus))
    shared.add(id(raw))


def _edge(raw: Any, ids: set[str]) -> None:
    edge = _obj(raw, "", ("src", "dst", "dst_input", "src_output"))
    _ref(edge["src"], "src", ids)
    _ref(edge["dst"], "dst", ids)
    _int(edge["dst_input"], "dst_input")
    _int(edge["src_output"], "src_output")


def _tensor(raw: Any, ids: set[str]) -> None:
    t = _obj(raw, "", ("name", "shape", "dtype", "requires_grad", "is_leaf", "retains_grad",
                       "grad_fn", "node", "grad"))
    _str(t["name"], "name")
    _shape(t["shape"], "shape")
    _str(t["dtype"], "dtype")
    for flag in ("requires_grad", "is_leaf", "retains_grad"):
        _bool(t[flag], flag)
    _str(t["grad_fn"], "grad_fn", null=True)
    _ref(t["node"], "node", ids, null=True)
    for key in ("grad", "grad_before", "value"):
        _summary(t.get(key), key)
    _str(t.get("grad_note"), "grad_note", null=True, limit=MAX_TEXT)


def _finding(raw: Any, ids: set[str]) -> None:
    f = _obj(raw, "", ("code", "severity", "message"))
    _str(f["code"], "code")
    _choice(f["severity"], "severity", ("error", "warning", "info"))
    _str(f["message"], "message", limit=MAX_TEXT)
    _str(f.get("tensor"), "tensor", null=True)
    _ref(f.get("node"), "node", ids, null=True)
    _str(f.get("hint"), "hint", null=True, limit=MAX_TEXT)
    _str(f.get("file"), "file", null=True)
    _int(f.get("line"), "line", null=True)


def _function(raw: Any, ids: set[str]) -> None:
    c = _obj(raw, "", ("function", "inputs"))
    _str(c["function"], "function")
    _ref(c.get("node"), "node", ids, null=True)
    _int(c.get("line"), "line", null=True)
    for j, text in enumerate(_list(c["inputs"], "inputs")):
        _str(text, f"inputs[{j}]")


def _pass(raw: Any, ids: set[str], gradients: int, used: set[int | None]) -> None:
    p = _obj(raw, "", ("kind", "roots", "retain_graph", "create_graph", "error", "flow"))
    _choice(p["kind"], "kind", ("backward", "grad"))
    for i, node_id in enumerate(_list(p["roots"], "roots")):
        _ref(node_id, f"roots[{i}]", ids)
    _bool(p["retain_graph"], "retain_graph")
    _bool(p["create_graph"], "create_graph")
    _str(p["error"], "error", null=True, limit=MAX_TEXT)
    for node_id, raw_flow in _obj(p["flow"], "flow", ()).items():
        try:
            _ref(node_id, "", ids)
            _flow(raw_flow, gradients, used)
        except _Invalid as exc:
            raise exc.under(f"flow[{node_id!r:.40}]") from None
    _choice(p.get("by", "scenario"), "by", ("scenario", "gradtrace"))
    for i, name in enumerate(_list(p.get("root_names", []), "root_names")):
        _str(name, f"root_names[{i}]", null=True)
    _int(p.get("line"), "line", null=True)
    _str(p.get("code"), "code", null=True)
    _each(p.get("grad_changes", []), "grad_changes", _grad_change)
    _int(p.get("graph", 0), "graph")
    _bool(p.get("light", False), "light")


def _flow(raw: Any, gradients: int, used: set[int | None]) -> None:
    """A flow entry: each gradient an index into a table of that many, or null; the indexes
    are added to used."""
    f = _obj(raw, "", ("grad_outputs", "grad_inputs"))
    for key in ("grad_outputs", "grad_inputs", "unhooked"):
        if key not in f or (key == "unhooked" and f[key] is None):
            continue  # unhooked is optional
        refs = _list(f[key], key)
        if not all(g is None or (type(g) is int and 0 <= g < gradients) for g in refs):
            for j, g in enumerate(refs):  # not the common case: name the one at fault
                if g is not None:
                    _int(g, f"{key}[{j}]")
                    if g >= gradients:
                        raise _Invalid(f"{key}[{j}]", f"points at gradients[{g}], past the end "
                                       f"({gradients} entries)")
        used.update(refs)
    _int(f.get("order", 0), "order")


def _grad_change(raw: Any) -> None:
    c = _obj(raw, "", ("tensor", "before", "after"))
    _str(c["tensor"], "tensor")
    _summary(c["before"], "before")
    _summary(c["after"], "after")


def _second_order(raw: Any, path: str) -> None:
    if raw is None:
        return
    s = _obj(raw, path, ("root", "wrt", "blocks"))
    _str(s["root"], f"{path}.root")
    for i, name in enumerate(_list(s["wrt"], f"{path}.wrt")):
        _str(name, f"{path}.wrt[{i}]")
    for i, raw_block in enumerate(_list(s["blocks"], f"{path}.blocks")):
        where = f"{path}.blocks[{i}]"
        b = _obj(raw_block, where, ("a", "b", "values"))
        _str(b["a"], f"{where}.a")
        _str(b["b"], f"{where}.b")
        _values(b["values"], f"{where}.values")
    _str(s.get("error"), f"{path}.error", null=True, limit=MAX_TEXT)


def _ranks(raw: Any, path: str) -> None:
    if raw is None:
        return
    r = _obj(raw, path, ("rank", "world"))
    _int(r["rank"], f"{path}.rank")
    _int(r["world"], f"{path}.world")
    if not r["rank"] < r["world"]:
        raise _Invalid(path, f"rank {r['rank']} is not one of the world's {r['world']}")


def _steps(raw: Any, path: str, passes: int) -> None:
    if raw is None:
        return
    s = _obj(raw, path, ("leaves", "modules", "loss", "optimizer_steps", "grads"))
    leaves = _list(s["leaves"], f"{path}.leaves")
    for i, name in enumerate(leaves):
        _str(name, f"{path}.leaves[{i}]")
    modules = _list(s["modules"], f"{path}.modules")
    if len(modules) != len(leaves):
        raise _Invalid(f"{path}.modules", f"has {len(modules)} items for {len(leaves)} leaves")
    for i, name in enumerate(modules):
        _str(name, f"{path}.modules[{i}]", null=True)
    for key in ("loss", "optimizer_steps", "grads"):
        if len(_list(s[key], f"{path}.{key}")) != passes:
            raise _Invalid(f"{path}.{key}", f"has {len(s[key])} rows for {passes} passes")
    for i, loss in enumerate(s["loss"]):
        _number(loss, f"{path}.loss[{i}]", null=True)
    for i, count in enumerate(s["optimizer_steps"]):
        _int(count, f"{path}.optimizer_steps[{i}]")
    _int(s.get("optimizer_steps_after", 0), f"{path}.optimizer_steps_after")
    for key in ("optimized", "scale_free"):
        flags = _list(s.get(key, []), f"{path}.{key}")
        if flags and len(flags) != len(leaves):
            raise _Invalid(f"{path}.{key}", f"has {len(flags)} items for {len(leaves)} leaves")
        for i, flag in enumerate(flags):
            if flag is not None and not isinstance(flag, bool):
                raise _Invalid(f"{path}.{key}[{i}]", "expected true, false or null")
    for key, check in (("loss_scale", _number), ("loss_divisor", _number),
                       ("closure_call", _int)):
        scales = _list(s.get(key, []), f"{path}.{key}")
        if scales and len(scales) != passes:
            raise _Invalid(f"{path}.{key}", f"has {len(scales)} rows for {passes} passes")
        for i, scale in enumerate(scales):
            check(scale, f"{path}.{key}[{i}]", null=True)
    for i, row in enumerate(s["grads"]):
        if len(_list(row, f"{path}.grads[{i}]")) > len(leaves):
            raise _Invalid(f"{path}.grads[{i}]", f"has more items than the {len(leaves)} leaves")
        for j, g in enumerate(row):
            where = f"{path}.grads[{i}][{j}]"
            if g is None:
                continue
            if len(_list(g, where)) != 4:
                raise _Invalid(where, "expected [norm, max_abs, finite, kept]")
            _number(g[0], f"{where}[0]")
            _number(g[1], f"{where}[1]")
            _bool(g[2], f"{where}[2]")
            _bool(g[3], f"{where}[3]")


def _duration(value: Any, path: str) -> None:
    """A time in µs: a finite number, 0 or more."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise _Invalid(path, f"expected a time in µs (a finite number ≥ 0), found {value!r:.40}")


def _durations(value: Any, path: str) -> None:
    for i, x in enumerate(_list(value, path)):
        _duration(x, f"{path}[{i}]")


def _costs(raw: Any, path: str, ids: set[str], passes: int) -> None:
    """--profile's costs: every time finite and ≥ 0, every node id one of the trace's."""
    if raw is None:
        return
    c = _obj(raw, path, ("pass", "method", "device", "wall_us", "profiled_us", "nodes"))
    _int(c["pass"], f"{path}.pass")
    if not 1 <= c["pass"] <= max(passes, 1):
        raise _Invalid(f"{path}.pass", f"{c['pass']} is not one of the {passes} passes")
    _choice(c["method"], f"{path}.method", COST_METHODS)
    _str(c["device"], f"{path}.device")
    for key in ("wall_us", "profiled_us", "op_total_us"):
        _durations(c.get(key, []), f"{path}.{key}")
    _duration(c.get("accumulate_us", 0.0), f"{path}.accumulate_us")
    _duration(c.get("engine_us", 0.0), f"{path}.engine_us")
    if c.get("outside_us") is not None:
        _duration(c["outside_us"], f"{path}.outside_us")
    _duration(c.get("accumulate_spread_us", 0.0), f"{path}.accumulate_spread_us")
    _str(c.get("note"), f"{path}.note", null=True, limit=MAX_TEXT)
    for key in ("forward_us", "ops_us"):
        for name, value in _obj(c.get(key, {}), f"{path}.{key}", ()).items():
            _str(name, f"{path}.{key}")
            _duration(value, f"{path}.{key}.{name:.40}")
    peak = c.get("peak")
    if peak is not None:
        p = _obj(peak, f"{path}.peak", ("bytes",))
        _int(p["bytes"], f"{path}.peak.bytes", signed=True)
        _ref(p.get("node"), f"{path}.peak.node", ids, null=True)
        for i, s in enumerate(_list(p.get("saved", []), f"{path}.peak.saved")):
            item = _obj(s, f"{path}.peak.saved[{i}]", ("module", "bytes"))
            _str(item["module"], f"{path}.peak.saved[{i}].module")
            _int(item["bytes"], f"{path}.peak.saved[{i}].bytes")
    recomputed = c.get("recomputed")
    if recomputed is not None:
        r = _obj(recomputed, f"{path}.recomputed", ("time_us", "saved_bytes"))
        _duration(r["time_us"], f"{path}.recomputed.time_us")
        _int(r["saved_bytes"], f"{path}.recomputed.saved_bytes")
    nodes = _obj(c["nodes"], f"{path}.nodes", ())
    for node_id, cost in nodes.items():
        where = f"{path}.nodes.{node_id:.40}"
        _ref(node_id, where, ids)
        n = _obj(cost, where, ("time_us", "spread_us", "allocated", "freed"))
        _duration(n["time_us"], f"{where}.time_us")
        _duration(n["spread_us"], f"{where}.spread_us")
        _int(n["allocated"], f"{where}.allocated", signed=True)
        _int(n["freed"], f"{where}.freed")


def leaf_flow_only(data: dict[str, Any]) -> dict[str, Any]:
    """data with the flow of leaf nodes only; what is malformed in what is kept is left for
    validate_trace to name."""
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        return data
    leaves = {n["id"] for n in nodes if isinstance(n, dict) and n.get("kind") == "leaf"
              and isinstance(n.get("id"), str)}  # any other id is refused after
    passes = data.get("passes")
    return {**data,
            "passes": [{**p, "flow": _leaf_flow(p["flow"], leaves)}
                       if isinstance(p, dict) and isinstance(p.get("flow"), dict) else p
                       for p in passes] if isinstance(passes, list) else passes}


def _leaf_flow(flow: dict[str, Any], leaves: set[Any]) -> dict[str, Any]:
    # an entry's order is its position when left out: kept, from the whole flow
    return {node: {"order": i, **f} if isinstance(f, dict) else f
            for i, (node, f) in enumerate(flow.items()) if node in leaves}


def schema_1_upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """A /1 trace in the /2 shape: each flow gradient summary moved to a gradients table (equal
    ones once) and referred to by its index. A /1 summary is checked where it stands, named by
    its /1 path; anything else malformed is left for validate_trace to name."""
    table = _Table()
    passes = data.get("passes")
    try:
        if isinstance(passes, list):
            passes = [_pass_upgraded(p, f"passes[{i}]", table) if isinstance(p, dict) else p
                      for i, p in enumerate(passes)]
    except _Invalid as exc:
        raise TraceFileError(f"invalid trace: {exc}",
                             "regenerate it with `gradtrace show SCENARIO --json`") from None
    return {**data, "gradients": table.summaries, "passes": passes}


class _Table:
    """The gradients table a /1 trace's flow makes: each summary once, by its JSON text."""

    def __init__(self) -> None:
        self.summaries: list[Any] = []
        self._index: dict[str, int] = {}

    def ref(self, summary: Any, path: str) -> int | None:
        """The index of summary (None for None), checked and added when new."""
        if summary is None:
            return None
        key = json.dumps(summary, sort_keys=True)
        if key not in self._index:
            _summary(summary, path)
            self._index[key] = len(self.summaries)
            self.summaries.append(summary)
        return self._index[key]


def _pass_upgraded(p: dict[str, Any], path: str, table: _Table) -> dict[str, Any]:
    flow = p.get("flow")
    if not isinstance(flow, dict):
        return p
    out = {}
    for node, f in flow.items():
        if isinstance(f, dict):
            where = f"{path}.flow[{node!r:.40}]"
            f = {**f, **{key: [table.ref(s, f"{where}.{key}[{j}]") for j, s in enumerate(f[key])]
                         for key in ("grad_outputs", "grad_inputs")
                         if isinstance(f.get(key), list)}}
        out[node] = f
    return {**p, "flow": out}


def node_problem(raw: Any) -> str | None:
    """What breaks the contract in a node (its path first), or None; its id is only checked
    as an id: it refers to no other node."""
    try:
        _node(raw, set(), True, set())
    except _Invalid as exc:
        return _said(exc)
    return None


def summary_problem(raw: Any) -> str | None:
    """What breaks the contract in a gradient summary (its path first), or None."""
    try:
        _summary(raw, "")
    except _Invalid as exc:
        return _said(exc)
    return None


def steps_problem(raw: Any, passes: int) -> str | None:
    """What breaks the contract in a steps section of `passes` rows (its path first), or
    None: a run log's rows are checked as the trace's are."""
    try:
        _steps(raw, "", passes)
    except _Invalid as exc:
        return _said(exc)
    return None


def finding_problem(raw: Any) -> str | None:
    """What breaks the contract in a finding (its path first), or None; its node is only
    checked as a name: a run log holds no graph for it to point into."""
    try:
        node = raw.get("node") if isinstance(raw, dict) else None
        _str(node, "node", null=True)
        _finding(raw, set() if node is None else {node})
    except _Invalid as exc:
        return _said(exc)
    return None


def _said(problem: _Invalid) -> str:
    """A problem as told: its path (without the dot a path under "" starts with), then what."""
    path = problem.path.removeprefix(".")
    return f"{path}: {problem.problem}" if path else problem.problem
