"""A saved trace is untrusted input: check it against the JSON contract before using it.

The first problem is reported with its JSON path (`nodes[3].id: …`). Nested values are walked
without recursion and bounded in depth; names and ids are bounded in length.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from ..errors import TraceFileError

MAX_NAME = 1_000  # ids, names, types, dtypes, module paths, source lines
MAX_TEXT = 1_000_000  # messages, hints, errors (stdout is only cut when shown)
MAX_DEPTH = 64  # nesting of value lists: a tensor has at most 64 dimensions
NUMBER_WORDS = ("nan", "inf", "-inf")
NODE_ID = re.compile(r"n[0-9]{1,9}")  # the contract's ids: n0, n1, …


class _Invalid(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")


def validate_trace(data: Any) -> None:
    """Raise TraceFileError naming the first place where data breaks the contract."""
    try:
        _trace(data)
    except _Invalid as exc:
        raise TraceFileError(f"invalid trace: {exc}",
                             "regenerate it with `gradtrace show SCENARIO --json`") from None


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


def _int(value: Any, path: str, null: bool = False) -> None:
    if value is None and null:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Invalid(path, f"expected a whole number ≥ 0, found {value!r:.40}")


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
    s = _obj(value, path, ("shape", "norm", "min", "max", "finite"))
    _shape(s["shape"], f"{path}.shape")
    _number(s["norm"], f"{path}.norm")
    _number(s["min"], f"{path}.min", null=True)
    _number(s["max"], f"{path}.max", null=True)
    _bool(s["finite"], f"{path}.finite")
    if "values" in s:
        _values(s["values"], f"{path}.values", s["shape"])
    _str(s.get("note"), f"{path}.note", null=True)


def _ref(value: Any, path: str, ids: set[str], null: bool = False) -> None:
    if value is None and null:
        return
    _str(value, path)
    if value not in ids:
        raise _Invalid(path, f"points at {value!r:.40}, which is not a node id")


def _trace(data: Any) -> None:
    top = _obj(data, "", ("schema", "gradtrace_version", "torch_version", "scenario",
                          "outputs", "nodes", "edges", "tensors", "passes", "findings"))
    for key in ("gradtrace_version", "torch_version"):
        _str(top[key], key)
    _str(top["scenario"], "scenario", null=True, limit=MAX_TEXT)
    ids: set[str] = set()
    for i, raw in enumerate(_list(top["nodes"], "nodes")):
        path = f"nodes[{i}]"
        node = _obj(raw, path, ("id", "type", "kind", "tensor", "saved"))
        _str(node["id"], f"{path}.id")
        if not NODE_ID.fullmatch(node["id"]):
            raise _Invalid(f"{path}.id", f"{node['id']!r:.40} is not a node id like n0, n1, …")
        if node["id"] in ids:
            raise _Invalid(f"{path}.id", f"{node['id']!r:.40} is used twice")
        ids.add(node["id"])
        _str(node["type"], f"{path}.type")
        _choice(node["kind"], f"{path}.kind", ("op", "leaf", "custom"))
        _str(node["tensor"], f"{path}.tensor", null=True)
        _str(node.get("module"), f"{path}.module", null=True)
        _bool(node.get("recomputed", False), f"{path}.recomputed")
        if node.get("source") is not None:
            source = _obj(node["source"], f"{path}.source", ("file", "line", "code"))
            _str(source["file"], f"{path}.source.file")
            _int(source["line"], f"{path}.source.line")
            _str(source["code"], f"{path}.source.code")
        for j, raw_saved in enumerate(_list(node["saved"], f"{path}.saved")):
            where = f"{path}.saved[{j}]"
            saved = _obj(raw_saved, where, ("name", "shape", "dtype", "bytes"))
            _str(saved["name"], f"{where}.name")
            _shape(saved["shape"], f"{where}.shape", null=True)
            _str(saved["dtype"], f"{where}.dtype", null=True)
            _int(saved["bytes"], f"{where}.bytes")
            _choice(saved.get("status", "ok"), f"{where}.status",
                    ("ok", "freed", "modified in place"))
    for i, node_id in enumerate(_list(top["outputs"], "outputs")):
        _ref(node_id, f"outputs[{i}]", ids)
    for i, name in enumerate(_list(top.get("output_names", []), "output_names")):
        _str(name, f"output_names[{i}]")
    _str(top.get("root_reason", ""), "root_reason")
    for i, raw in enumerate(_list(top["edges"], "edges")):
        path = f"edges[{i}]"
        edge = _obj(raw, path, ("src", "dst", "dst_input", "src_output"))
        _ref(edge["src"], f"{path}.src", ids)
        _ref(edge["dst"], f"{path}.dst", ids)
        _int(edge["dst_input"], f"{path}.dst_input")
        _int(edge["src_output"], f"{path}.src_output")
    for i, raw in enumerate(_list(top["tensors"], "tensors")):
        path = f"tensors[{i}]"
        t = _obj(raw, path, ("name", "shape", "dtype", "requires_grad", "is_leaf",
                             "retains_grad", "grad_fn", "node", "grad"))
        _str(t["name"], f"{path}.name")
        _shape(t["shape"], f"{path}.shape")
        _str(t["dtype"], f"{path}.dtype")
        for flag in ("requires_grad", "is_leaf", "retains_grad"):
            _bool(t[flag], f"{path}.{flag}")
        _str(t["grad_fn"], f"{path}.grad_fn", null=True)
        _ref(t["node"], f"{path}.node", ids, null=True)
        for key in ("grad", "grad_before", "value"):
            _summary(t.get(key), f"{path}.{key}")
        _str(t.get("grad_note"), f"{path}.grad_note", null=True, limit=MAX_TEXT)
    for i, raw in enumerate(_list(top["passes"], "passes")):
        _pass(raw, f"passes[{i}]", ids)
    for i, raw in enumerate(_list(top["findings"], "findings")):
        path = f"findings[{i}]"
        f = _obj(raw, path, ("code", "severity", "message"))
        _str(f["code"], f"{path}.code")
        _choice(f["severity"], f"{path}.severity", ("error", "warning", "info"))
        _str(f["message"], f"{path}.message", limit=MAX_TEXT)
        _str(f.get("tensor"), f"{path}.tensor", null=True)
        _ref(f.get("node"), f"{path}.node", ids, null=True)
        _str(f.get("hint"), f"{path}.hint", null=True, limit=MAX_TEXT)
        _str(f.get("file"), f"{path}.file", null=True)
        _int(f.get("line"), f"{path}.line", null=True)
    for i, raw in enumerate(_list(top.get("functions", []), "functions")):
        path = f"functions[{i}]"
        c = _obj(raw, path, ("function", "inputs"))
        _str(c["function"], f"{path}.function")
        _ref(c.get("node"), f"{path}.node", ids, null=True)
        _int(c.get("line"), f"{path}.line", null=True)
        for j, text in enumerate(_list(c["inputs"], f"{path}.inputs")):
            _str(text, f"{path}.inputs[{j}]")
    _str(top.get("stdout", ""), "stdout", limit=2**62)
    _second_order(top.get("second_order"), "second_order")
    _bool(top.get("saved_read", True), "saved_read")


def _pass(raw: Any, path: str, ids: set[str]) -> None:
    p = _obj(raw, path, ("kind", "roots", "retain_graph", "create_graph", "error", "flow"))
    _choice(p["kind"], f"{path}.kind", ("backward", "grad"))
    for i, node_id in enumerate(_list(p["roots"], f"{path}.roots")):
        _ref(node_id, f"{path}.roots[{i}]", ids)
    _bool(p["retain_graph"], f"{path}.retain_graph")
    _bool(p["create_graph"], f"{path}.create_graph")
    _str(p["error"], f"{path}.error", null=True, limit=MAX_TEXT)
    flow = _obj(p["flow"], f"{path}.flow", ())
    checked: set[int] = set()  # a /2 gradient referred to many times is checked once
    for node_id, raw_flow in flow.items():
        where = f"{path}.flow[{node_id!r:.40}]"
        _ref(node_id, where, ids)
        f = _obj(raw_flow, where, ("grad_outputs", "grad_inputs"))
        for key in ("grad_outputs", "grad_inputs"):
            for j, summary in enumerate(_list(f[key], f"{where}.{key}")):
                if id(summary) not in checked:
                    _summary(summary, f"{where}.{key}[{j}]")
                    checked.add(id(summary))
        _int(f.get("order", 0), f"{where}.order")
    _choice(p.get("by", "scenario"), f"{path}.by", ("scenario", "gradtrace"))
    for i, name in enumerate(_list(p.get("root_names", []), f"{path}.root_names")):
        _str(name, f"{path}.root_names[{i}]", null=True)
    _int(p.get("line"), f"{path}.line", null=True)
    _str(p.get("code"), f"{path}.code", null=True)
    for i, raw_change in enumerate(_list(p.get("grad_changes", []), f"{path}.grad_changes")):
        where = f"{path}.grad_changes[{i}]"
        c = _obj(raw_change, where, ("tensor", "before", "after"))
        _str(c["tensor"], f"{where}.tensor")
        _summary(c["before"], f"{where}.before")
        _summary(c["after"], f"{where}.after")


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


def as_schema_1(data: dict[str, Any]) -> dict[str, Any]:
    """A /2 trace in the /1 shape: each flow gradient index replaced by the summary it points
    at, and each flow entry's order (left out: its position) filled in. A bad index is named
    by its JSON path; anything else malformed is left for validate_trace to name."""
    try:
        gradients = _list(data.get("gradients", []), "gradients")
        passes = _list(data.get("passes", []), "passes")
        return {**data, "passes": [_pass_1(p, f"passes[{i}]", gradients)
                                   if isinstance(p, dict) else p for i, p in enumerate(passes)]}
    except _Invalid as exc:
        raise TraceFileError(f"invalid trace: {exc}",
                             "regenerate it with `gradtrace show SCENARIO --json`") from None


def _pass_1(p: dict[str, Any], path: str, gradients: list[Any]) -> dict[str, Any]:
    flow = p.get("flow")
    if not isinstance(flow, dict):
        return p
    return {**p, "flow": {node: _flow_1(f, i, f"{path}.flow[{node!r:.40}]", gradients)
                          if isinstance(f, dict) else f
                          for i, (node, f) in enumerate(flow.items())}}


def _flow_1(f: dict[str, Any], position: int, path: str,
            gradients: list[Any]) -> dict[str, Any]:
    out = {"order": position, **f}  # entries are in run order: order is left out then
    for key in ("grad_outputs", "grad_inputs"):
        if key in f:
            out[key] = [None if g is None else _index(g, f"{path}.{key}[{j}]", gradients)
                        for j, g in enumerate(_list(f[key], f"{path}.{key}"))]
    return out


def _index(value: Any, path: str, table: list[Any]) -> Any:
    _int(value, path)
    if value >= len(table):
        raise _Invalid(path, f"points at gradients[{value}], past the end ({len(table)} "
                       "entries)")
    return table[value]
