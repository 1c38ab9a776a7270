"""The Trace: a plain, torch-free record of one scenario's autograd graph, tensors and passes.

Built once by the extractor; every renderer, the JSON form and `diff` read only this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import TraceFileError

SCHEMA = "gradtrace.trace/1"

# Node kinds, as in the JSON contract.
OP, LEAF, CUSTOM = "op", "leaf", "custom"


@dataclass(frozen=True, slots=True)
class SavedTensor:
    """A tensor a node saved for backward; status says whether it can still be read."""

    name: str
    shape: tuple[int, ...] | None
    dtype: str | None
    bytes: int
    status: str = "ok"  # "ok" | "freed" | "modified in place"


class Node(NamedTuple):
    """One autograd node (a grad_fn, or the AccumulateGrad of a leaf).

    Node and Edge are named tuples, not dataclasses: a big graph has 100,000s of them, and a
    tuple is built several times faster. Both are immutable all the same.
    """

    id: str
    type: str
    kind: str
    tensor: str | None
    saved: tuple[SavedTensor, ...] = ()
    module: str | None = None  # dotted path of the nn.Module whose forward made it


class Edge(NamedTuple):
    """Gradient flows dst -> src: src is dst.next_functions[dst_input]."""

    src: str
    dst: str
    dst_input: int
    src_output: int


class GradSummary(NamedTuple):
    """A gradient in brief; values holds the nested list when it has at most 64 elements.

    A named tuple, like Node: a pass over a big model makes one per gradient.
    """

    shape: tuple[int, ...]
    norm: float
    min: float | None
    max: float | None
    finite: bool
    values: Any = None


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """A named tensor of the scenario, as it stands at the end of the run."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    requires_grad: bool
    is_leaf: bool
    retains_grad: bool
    grad_fn: str | None
    node: str | None
    grad: GradSummary | None
    grad_before: GradSummary | None = None  # .grad before the first backward pass
    value: GradSummary | None = None  # the tensor's own data, summarised like a gradient
    grad_note: str | None = None  # why .grad is None, or that it has a graph of its own


@dataclass(frozen=True, slots=True)
class GradChange:
    """A named tensor whose .grad a pass changed."""

    tensor: str
    before: GradSummary | None
    after: GradSummary | None


@dataclass(frozen=True, slots=True)
class NodeFlow:
    """What one node received (per output) and sent (per input) during a pass."""

    grad_outputs: tuple[GradSummary | None, ...]
    grad_inputs: tuple[GradSummary | None, ...]
    order: int  # position in the pass's execution order, 0 first


@dataclass(frozen=True, slots=True)
class Pass:
    """One backward() / autograd.grad() call, by the scenario or by gradtrace."""

    kind: str  # "backward" | "grad"
    roots: tuple[str, ...]
    retain_graph: bool
    create_graph: bool
    error: str | None
    flow: dict[str, NodeFlow] = field(default_factory=dict)
    by: str = "scenario"  # "scenario" | "gradtrace"
    root_names: tuple[str | None, ...] = ()
    line: int | None = None
    code: str | None = None
    grad_changes: tuple[GradChange, ...] = ()

    def sent(self, edge: Edge) -> GradSummary | None:
        """What edge.dst sent to edge.src in this pass (None if nothing was sent)."""
        f = self.flow.get(edge.dst)
        return f.grad_inputs[edge.dst_input] if f and edge.dst_input < len(f.grad_inputs) else None

    def received(self, edge: Edge) -> GradSummary | None:
        """What edge.src received for the output this edge leaves from, after any hooks."""
        f = self.flow.get(edge.src)
        return f.grad_outputs[edge.src_output] if f and edge.src_output < len(f.grad_outputs) \
            else None


@dataclass(frozen=True, slots=True)
class Finding:
    """Something worth telling the user, with its severity: "error", "warning" or "info"."""

    code: str
    severity: str
    message: str
    tensor: str | None = None
    node: str | None = None
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A custom autograd.Function.apply call the scenario made."""

    function: str
    node: str | None
    line: int | None
    inputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SecondOrder:
    """Second derivatives of a scalar root: blocks[(a, b)] is d2 root / da db, nested lists."""

    root: str
    wrt: tuple[str, ...]
    blocks: dict[tuple[str, str], Any]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    """Graph + tensors + passes + findings of one scenario run."""

    scenario: str | None
    gradtrace_version: str
    torch_version: str
    outputs: tuple[str, ...]
    output_names: tuple[str, ...]
    root_reason: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    tensors: tuple[TensorInfo, ...]
    passes: tuple[Pass, ...]
    findings: tuple[Finding, ...]
    functions: tuple[FunctionCall, ...] = ()
    stdout: str = ""
    second_order: SecondOrder | None = None
    saved_read: bool = True  # False: saved tensors were not read, so every saved is empty

    # Conveniences for notebooks; the renderers are imported when called, so this module
    # stays free of them.
    def to_json(self) -> str:
        """The canonical JSON text (schema gradtrace.trace/1)."""
        from .render.json import to_json

        return to_json(self)

    def to_dot(self, **options: Any) -> str:
        """Graphviz DOT text; options as DrawOptions (saved, grads, max_nodes, fold, focus…)."""
        from .render.dot import to_dot
        from .render.drawing import DrawOptions, drawing

        return to_dot(drawing(self, DrawOptions(**options)))

    def to_mermaid(self, **options: Any) -> str:
        """Mermaid flowchart text, for Markdown."""
        from .render.drawing import DrawOptions, drawing
        from .render.mermaid import to_mermaid

        return to_mermaid(drawing(self, DrawOptions(**options)))

    def _repr_svg_(self) -> str | None:
        """Jupyter shows the graph as SVG (None, so it falls back to text, without Graphviz)."""
        from .errors import ExportError
        from .render.dot import render

        try:
            return render(self.to_dot(), "svg").decode("utf-8")
        except ExportError:
            return None

    def __rich__(self) -> Any:
        """The tree and the tensor table, for rich.print and the rich console."""
        from rich.console import Group

        from .render.table import tensor_table
        from .render.tree import graph_tree

        return Group(graph_tree(self), tensor_table(self))

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract's dict (schema gradtrace.trace/1), keys in a fixed order."""
        return {
            "schema": SCHEMA,
            "gradtrace_version": self.gradtrace_version,
            "torch_version": self.torch_version,
            "scenario": self.scenario,
            "outputs": list(self.outputs),
            "output_names": list(self.output_names),
            "root_reason": self.root_reason,
            "nodes": [_node_dict(n) for n in self.nodes],
            "edges": [
                {"src": e.src, "dst": e.dst, "dst_input": e.dst_input, "src_output": e.src_output}
                for e in self.edges
            ],
            "tensors": [_tensor_dict(t) for t in self.tensors],
            "passes": [_pass_dict(p) for p in self.passes],
            "findings": [_finding_dict(f) for f in self.findings],
            "functions": [
                {"function": c.function, "node": c.node, "line": c.line, "inputs": list(c.inputs)}
                for c in self.functions
            ],
            "stdout": self.stdout,
            "second_order": _second_order_dict(self.second_order),
            "saved_read": self.saved_read,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        """Rebuild a Trace from its JSON dict; raises TraceFileError if it is not one."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise TraceFileError(
                f"not a gradtrace trace (schema {found!r}, expected {SCHEMA!r})",
                "make one with `gradtrace show SCENARIO --json > trace.json`",
            )
        try:
            return cls(
                scenario=data["scenario"],
                gradtrace_version=data["gradtrace_version"],
                torch_version=data["torch_version"],
                outputs=tuple(data["outputs"]),
                output_names=tuple(data.get("output_names", ())),
                root_reason=data.get("root_reason", ""),
                nodes=tuple(
                    Node(
                        n["id"], n["type"], n["kind"], n["tensor"],
                        tuple(_saved_from(s) for s in n["saved"]), n.get("module"),
                    )
                    for n in data["nodes"]
                ),
                edges=tuple(
                    Edge(e["src"], e["dst"], e["dst_input"], e["src_output"])
                    for e in data["edges"]
                ),
                tensors=tuple(_tensor_from(t) for t in data["tensors"]),
                passes=tuple(_pass_from(p) for p in data["passes"]),
                findings=tuple(
                    Finding(
                        f["code"], f["severity"], f["message"],
                        f.get("tensor"), f.get("node"), f.get("hint"),
                    )
                    for f in data["findings"]
                ),
                functions=tuple(
                    FunctionCall(c["function"], c.get("node"), c.get("line"), tuple(c["inputs"]))
                    for c in data.get("functions", ())
                ),
                stdout=data.get("stdout", ""),
                second_order=_second_order_from(data.get("second_order")),
                saved_read=data.get("saved_read", True),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFileError(
                f"trace JSON is incomplete or malformed: {type(exc).__name__}: {exc}",
                "regenerate it with `gradtrace show SCENARIO --json`",
            ) from exc


def _node_dict(n: Node) -> dict[str, Any]:
    return {
        "id": n.id,
        "type": n.type,
        "kind": n.kind,
        "tensor": n.tensor,
        "saved": [
            {"name": s.name, "shape": _list(s.shape), "dtype": s.dtype, "bytes": s.bytes,
             "status": s.status}
            for s in n.saved
        ],
        "module": n.module,
    }


def _saved_from(d: dict[str, Any]) -> SavedTensor:
    return SavedTensor(d["name"], _tuple(d["shape"]), d["dtype"], d["bytes"], d.get("status", "ok"))


def summary_dict(g: GradSummary | None) -> dict[str, Any] | None:
    """A GradSummary as JSON data; non-finite floats become the strings "nan", "inf", "-inf"."""
    if g is None:
        return None
    d: dict[str, Any] = {
        "shape": list(g.shape),
        "norm": _json_float(g.norm),
        "min": _json_float(g.min),
        "max": _json_float(g.max),
        "finite": g.finite,
    }
    if g.values is not None:
        d["values"] = _json_values(g.values)
    return d


def summary_from(d: dict[str, Any] | None) -> GradSummary | None:
    """Inverse of summary_dict."""
    if d is None:
        return None
    return GradSummary(
        tuple(d["shape"]), _py_float(d["norm"]), _py_float(d["min"]), _py_float(d["max"]),
        d["finite"], _py_values(d["values"]) if "values" in d else None,
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
        d["name"], tuple(d["shape"]), d["dtype"], d["requires_grad"], d["is_leaf"],
        d["retains_grad"], d["grad_fn"], d["node"], summary_from(d["grad"]),
        summary_from(d.get("grad_before")), summary_from(d.get("value")), d.get("grad_note"),
    )


def _pass_dict(p: Pass) -> dict[str, Any]:
    return {
        "kind": p.kind,
        "roots": list(p.roots),
        "retain_graph": p.retain_graph,
        "create_graph": p.create_graph,
        "error": p.error,
        "flow": {
            node: {
                "grad_outputs": [summary_dict(g) for g in f.grad_outputs],
                "grad_inputs": [summary_dict(g) for g in f.grad_inputs],
                "order": f.order,
            }
            for node, f in p.flow.items()
        },
        "by": p.by,
        "root_names": list(p.root_names),
        "line": p.line,
        "code": p.code,
        "grad_changes": [
            {"tensor": c.tensor, "before": summary_dict(c.before), "after": summary_dict(c.after)}
            for c in p.grad_changes
        ],
    }


def _pass_from(d: dict[str, Any]) -> Pass:
    return Pass(
        kind=d["kind"],
        roots=tuple(d["roots"]),
        retain_graph=d["retain_graph"],
        create_graph=d["create_graph"],
        error=d["error"],
        flow={
            node: NodeFlow(
                tuple(summary_from(g) for g in f["grad_outputs"]),
                tuple(summary_from(g) for g in f["grad_inputs"]),
                f.get("order", 0),
            )
            for node, f in d["flow"].items()
        },
        by=d.get("by", "scenario"),
        root_names=tuple(d.get("root_names", ())),
        line=d.get("line"),
        code=d.get("code"),
        grad_changes=tuple(
            GradChange(c["tensor"], summary_from(c["before"]), summary_from(c["after"]))
            for c in d.get("grad_changes", ())
        ),
    )


def _second_order_dict(s: SecondOrder | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "root": s.root,
        "wrt": list(s.wrt),
        "blocks": [{"a": a, "b": b, "values": _json_values(v)} for (a, b), v in s.blocks.items()],
        "error": s.error,
    }


def _second_order_from(d: dict[str, Any] | None) -> SecondOrder | None:
    if d is None:
        return None
    return SecondOrder(
        d["root"], tuple(d["wrt"]),
        {(b["a"], b["b"]): _py_values(b["values"]) for b in d["blocks"]}, d.get("error"),
    )


def _finding_dict(f: Finding) -> dict[str, Any]:
    d: dict[str, Any] = {"code": f.code, "severity": f.severity, "message": f.message}
    for key in ("tensor", "node", "hint"):
        if getattr(f, key) is not None:
            d[key] = getattr(f, key)
    return d


def _list(shape: tuple[int, ...] | None) -> list[int] | None:
    return None if shape is None else list(shape)


def _tuple(shape: list[int] | None) -> tuple[int, ...] | None:
    return None if shape is None else tuple(shape)


def _json_float(x: float | None) -> float | str | None:
    # JSON has no NaN or Infinity; strict parsers (jq, browsers) reject Python's extension.
    if x is None or x == x and x not in (float("inf"), float("-inf")):
        return x
    return "nan" if x != x else ("inf" if x > 0 else "-inf")


def flat_values(values: Any) -> list[Any]:
    """The items of a nested list, in order (iteratively); a non-list is one item."""
    out, todo = [], [values]
    while todo:
        item = todo.pop()
        if isinstance(item, list):
            todo.extend(reversed(item))
        else:
            out.append(item)
    return out


def _map_leaves(v: Any, fn: Any) -> Any:
    """Apply fn to every non-list item of a nested list (iteratively), returning a copy."""
    if not isinstance(v, list):
        return fn(v)
    out: list[Any] = []
    todo: list[tuple[list[Any], list[Any]]] = [(v, out)]
    while todo:
        src, dst = todo.pop()
        for item in src:
            if isinstance(item, list):
                child: list[Any] = []
                dst.append(child)
                todo.append((item, child))
            else:
                dst.append(fn(item))
    return out


def _json_values(v: Any) -> Any:
    return _map_leaves(v, lambda x: _json_float(x) if isinstance(x, float) else x)


_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _py_float(x: float | str | None) -> float | None:
    return _SPECIAL[x] if isinstance(x, str) else x


def _py_values(v: Any) -> Any:
    return _map_leaves(v, _py_float)


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Where a Function's analytical Jacobian disagrees with the numerical one."""

    output: int
    input: int
    numerical: Any  # nested lists (rows: input elements, columns: output elements)
    analytical: Any
    max_abs: float
    max_rel: float
    worst: tuple[int, int]  # (input element, output element) of the largest difference


@dataclass(frozen=True, slots=True)
class CheckResult:
    """gradcheck and gradgradcheck of one custom Function at one input signature."""

    scenario: str
    function: str
    line: int | None
    inputs: tuple[str, ...]
    gradcheck: str  # "pass" | "fail" | "error" | "skipped"
    gradgradcheck: str  # "pass" | "fail" | "error" | "skipped"
    message: str | None = None
    from_float32: bool = False
    smells: tuple[str, ...] = ()
    mismatch: Mismatch | None = None

    @property
    def ok(self) -> bool:
        """Both checks passed (or the second was skipped) and nothing smells."""
        return self.gradcheck in ("pass", "skipped") \
            and self.gradgradcheck in ("pass", "skipped") and not self.smells

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "scenario": self.scenario, "function": self.function, "line": self.line,
            "inputs": list(self.inputs), "gradcheck": self.gradcheck,
            "gradgradcheck": self.gradgradcheck, "ok": self.ok, "message": self.message,
            "from_float32": self.from_float32, "smells": list(self.smells), "mismatch": None,
        }
        if self.mismatch is not None:
            m = self.mismatch
            d["mismatch"] = {"output": m.output, "input": m.input,
                             "numerical": _json_values(m.numerical),
                             "analytical": _json_values(m.analytical),
                             "max_abs": _json_float(m.max_abs), "max_rel": _json_float(m.max_rel),
                             "worst": list(m.worst)}
        return d
