"""The only graph walker: torch autograd objects in, plain model records out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import compress, islice, repeat
from typing import Any

import torch

from . import __version__
from .findings import trace_findings
from .gcpause import gc_paused
from .model import (
    CUSTOM,
    LEAF,
    OP,
    Edge,
    Finding,
    FunctionCall,
    GradChange,
    GradSummary,
    Node,
    NodeFlow,
    Pass,
    SavedTensor,
    SecondOrder,
    TensorInfo,
    Trace,
)
from .summary import summarize, to_summaries

Named = list[tuple[str, torch.Tensor]]


def walk(*root_groups: Iterable[Any]) -> tuple[list[Any], list[tuple[int, int, int, int]]]:
    """Breadth-first walk over next_functions, each node once by identity.

    Each group of roots is walked to the end before the next one starts (the outputs first,
    then the roots of the passes). Returns the nodes in discovery order and the edges as
    (src, dst, dst_input, src_output) indexes into that list.
    """
    order, edges, _ = indexed_walk(*root_groups)
    return order, edges


def indexed_walk(*root_groups: Iterable[Any]) -> tuple[
        list[Any], list[tuple[int, int, int, int]], dict[Any, int]]:
    """walk(), and the index it keeps: node -> its position in the list.

    Nodes are keyed by identity (autograd nodes keep object's hash and ==), which saves an
    id() call per edge.
    """
    index: dict[Any, int] = {}
    order: list[Any] = []
    edges: list[tuple[int, int, int, int]] = []
    find, add, link = index.get, order.append, edges.append  # bound once: the loop is hot
    start = 0
    for roots in root_groups:
        for root in roots:
            if root is not None and root not in index:
                index[root] = len(order)
                add(root)
        # The list is the queue: no recursion, no deque. A list iterator sees the items
        # appended while it runs, so this loop goes on until nothing new is found.
        for i, node in enumerate(islice(order, start, None), start):
            for slot, (child, output_nr) in enumerate(node.next_functions):
                if child is None:  # an input that needs no gradient: no edge, the slot counts
                    continue
                j = find(child)
                if j is None:
                    j = index[child] = len(order)
                    add(child)
                link((j, i, slot, output_nr))
        start = len(order)
    return order, edges, index


def release(nodes: list[Any]) -> None:
    """Drop node references root first, so torch frees a deep graph one node at a time.

    Freed leaf-first, the last reference to the root would free the whole chain recursively
    in C++ and overflow the stack on graphs of 60,000+ nodes (torch 2.13).
    """
    nodes.reverse()  # a list frees its items from the end
    del nodes[:]


def node_type(node: Any) -> str:
    """The node's class name: "MulBackward0", "AccumulateGrad", "MyPowBackward"."""
    return type(node).__name__


_KINDS: dict[type, str] = {}


def node_kind(node: Any) -> str:
    """"leaf" for AccumulateGrad, "custom" for an autograd.Function's node, else "op".

    The kind is a property of the node's class, so it is worked out once per class.
    """
    kind = _KINDS.get(type(node))
    if kind is None:
        if hasattr(type(node), "_forward_cls"):  # first: a user's ctx may have any attribute
            kind = CUSTOM
        elif hasattr(node, "variable"):
            kind = LEAF
        else:
            kind = OP
        _KINDS[type(node)] = kind
    return kind


_SAVED_ATTRS: dict[type, tuple[str, ...]] = {}


def saved_tensors(node: Any) -> tuple[SavedTensor, ...]:
    """The tensors a node saved for backward; a freed or changed buffer is reported, not raised."""
    if hasattr(node, "_forward_cls"):
        return _read_saved("saved_tensors", lambda: node.saved_tensors)
    attrs = _SAVED_ATTRS.get(type(node))
    if attrs is None:
        attrs = _SAVED_ATTRS[type(node)] = tuple(
            a for a in dir(node) if a.startswith("_saved_")
        )
    out: list[SavedTensor] = []
    for attr in attrs:
        out.extend(_read_saved(attr[len("_saved_"):], lambda a=attr: getattr(node, a)))
    return tuple(out)


def _read_saved(name: str, read: Any) -> tuple[SavedTensor, ...]:
    try:
        value = read()
    except RuntimeError as exc:
        # Reading raises once backward freed the buffers, or when a saved tensor was changed
        # in place; both are facts worth showing.
        status = "modified in place" if "inplace" in str(exc) else "freed"
        return (SavedTensor(name, None, None, 0, status),)
    if isinstance(value, torch.Tensor):
        return (_saved_record(name, value),)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
        return tuple(
            _saved_record(f"{name}[{i}]", t) for i, t in enumerate(value)
            if isinstance(t, torch.Tensor)
        )
    return ()  # a saved scalar, size or flag: not a tensor


def _saved_record(name: str, t: torch.Tensor) -> SavedTensor:
    return SavedTensor(name, tuple(t.shape), dtype_name(t.dtype), t.numel() * t.element_size())


def dtype_name(dtype: torch.dtype) -> str:
    """ "float32" rather than "torch.float32"."""
    return str(dtype).removeprefix("torch.")




def readable_grad(t: torch.Tensor) -> torch.Tensor | None:
    """t.grad, without torch's warning for non-leaf tensors that do not retain it."""
    if t.is_leaf or t.retains_grad:
        return t.grad
    return None


@dataclass
class RawPass:
    """A backward/grad call as it ran: torch node objects, not yet ids."""

    kind: str
    by: str
    roots: list[Any]
    root_names: list[str | None]
    retain_graph: bool
    create_graph: bool
    line: int | None = None
    code: str | None = None
    error: str | None = None
    grad_changes: list[GradChange] = field(default_factory=list)
    # id(node) -> (node, execution order, grad_outputs stats, grad_inputs stats)
    flow: dict[int, tuple[Any, int, list[Any], list[Any]]] = field(default_factory=dict)
    flow_failures: list[str] = field(default_factory=list)  # nodes whose flow is not recorded


@dataclass
class RawCall:
    """A custom Function.apply call: the class, its output's node, and detached input copies."""

    function: type
    node: Any
    line: int | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def describe_value(v: Any) -> str:
    """A short description of a Function input: "tensor float32[3, 3] requires_grad" or repr."""
    if isinstance(v, torch.Tensor):
        flag = " requires_grad" if v.requires_grad else ""
        return f"tensor {dtype_name(v.dtype)}{list(v.shape)}{flag}"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def detached_sources(named: Named) -> dict[str, str]:
    """{name: source} for named tensors that share memory with a graph tensor but are cut
    from its graph (made by .detach() or .data)."""
    in_graph: dict[int, tuple[str, torch.Tensor]] = {}
    for name, t in named:
        if t.grad_fn is not None and t.numel():
            in_graph.setdefault(t.untyped_storage().data_ptr(), (name, t))
    sources = {}
    for name, t in named:
        if t.grad_fn is not None or not t.numel():
            continue
        source, graph_tensor = in_graph.get(t.untyped_storage().data_ptr(), (None, None))
        # A view of t (chunk, slicing) shares t's memory without cutting anything.
        if source is not None and graph_tensor._base is not t:
            sources[name] = source
    return sources


def grad_note(t: torch.Tensor, node: str | None, reached: set[str],
              detached_from: str | None) -> str | None:
    """Why t.grad is None, in a learner's words; or that the gradient has a graph of its own."""
    grad = readable_grad(t)
    if grad is not None:
        if grad.grad_fn is not None:
            return f"has a graph: {node_type(grad.grad_fn)}, from create_graph=True"
        return None
    if not t.requires_grad:
        cut = f"; cut from {detached_from} by detach()" if detached_from else ""
        return "requires_grad is False" + cut
    if not t.is_leaf and not t.retains_grad:
        return "non-leaf: kept only after .retain_grad()"
    if detached_from:
        return f"cut from {detached_from} by detach()"
    if node is None or node not in reached:
        return "not reached by any backward pass"
    return "only torch.autograd.grad reached it: it returns gradients, it does not store them"


def tensor_info(
    name: str, t: torch.Tensor, node_ids: NodeIds, grad_before: GradSummary | None,
    reached: set[str], detached_from: str | None,
) -> TensorInfo:
    """One row of the tensor table."""
    if t.grad_fn is not None:
        node = node_ids.node(t.grad_fn)
    else:
        node = node_ids.leaf(t)
    grad = readable_grad(t)
    return TensorInfo(
        name=name,
        shape=tuple(t.shape),
        dtype=dtype_name(t.dtype),
        requires_grad=t.requires_grad,
        is_leaf=t.is_leaf,
        retains_grad=t.retains_grad,
        grad_fn=None if t.grad_fn is None else node_type(t.grad_fn),
        node=node,
        grad=None if grad is None else summarize(grad),
        grad_before=grad_before,
        value=summarize(t),
        grad_note=grad_note(t, node, reached, detached_from),
    )


@gc_paused
def build_trace(
    *,
    scenario: str | None,
    named: Named,
    outputs: Named,
    root_reason: str,
    passes: Sequence[RawPass],
    calls: Sequence[RawCall],
    findings: Sequence[Finding],
    saved_before: dict[int, tuple[Any, tuple[SavedTensor, ...]]] | None,
    grad_before: dict[str, GradSummary | None],
    stdout: str = "",
    second_order: SecondOrder | None = None,
    modules: dict[int, str] | None = None,
) -> Trace:
    """Walk the graph from the outputs (then from every pass's roots) and build the Trace.

    saved_before holds saved tensors read before a backward freed them; None means saved
    tensors are not read at all (faster; the Trace says so in saved_read). modules maps
    id(node), or a leaf's id(variable), to the path of the nn.Module that made or owns it.
    """
    modules = modules or {}
    output_nodes = [t.grad_fn for _, t in outputs]
    order, raw_edges, index = indexed_walk(output_nodes, [r for p in passes for r in p.roots])
    try:
        nodes, node_ids = _nodes(order, index, named, modules, saved_before)
        edges = _edges(raw_edges, node_ids.ids)
        trace_passes = tuple(_pass_record(p, node_ids) for p in passes)
        reached = {node for p in trace_passes for node in p.flow}
        detached = detached_sources(named)
        tensors = tuple(
            tensor_info(name, t, node_ids, grad_before.get(name), reached, detached.get(name))
            for name, t in named
        )
        findings = [*findings, *(
            Finding("detached", "info",
                    f"{name} shares memory with {source} but is cut from its graph (made by "
                    f".detach() or .data): no gradient flows from {name} back to {source}",
                    tensor=name)
            for name, source in detached.items()
        )]
        trace_calls = tuple(
            FunctionCall(
                c.function.__name__,
                node_ids.node(c.node) if c.node is not None else None,
                c.line,
                tuple(describe_value(a) for a in c.args),
            )
            for c in calls
        )
        output_ids = tuple(dict.fromkeys(node_ids.node(r) for r in output_nodes))
    finally:
        release(order)
    trace = Trace(
        scenario=scenario,
        gradtrace_version=__version__,
        torch_version=torch.__version__,
        outputs=output_ids,
        output_names=tuple(name for name, _ in outputs),
        root_reason=root_reason,
        nodes=tuple(nodes),
        edges=edges,
        tensors=tensors,
        passes=trace_passes,
        findings=tuple(findings),
        functions=trace_calls,
        stdout=stdout,
        second_order=second_order,
        saved_read=saved_before is not None,
    )
    more = trace_findings(trace)
    return replace(trace, findings=trace.findings + tuple(more)) if more else trace


class NodeIds:
    """The node id ("n<position in the walk>") of an autograd node, or of a leaf tensor."""

    def __init__(self, index: dict[Any, int], leaf_index: dict[int, int],
                 ids: list[str]) -> None:
        self.index, self.leaf_index, self.ids = index, leaf_index, ids

    def node(self, node: Any) -> str | None:
        i = self.index.get(node)
        return None if i is None else self.ids[i]

    def __contains__(self, node: Any) -> bool:
        return node in self.index

    def leaf(self, t: torch.Tensor) -> str | None:
        """The id of t's AccumulateGrad node, found by t itself (t.grad_fn is None)."""
        i = self.leaf_index.get(id(t))
        return None if i is None else self.ids[i]


def _nodes(order: list[Any], index: dict[Any, int], named: Named, modules: dict[int, str],
           saved_before: dict[int, tuple[Any, tuple[SavedTensor, ...]]] | None,
           ) -> tuple[list[Node], NodeIds]:
    """Node records, built column by column with map and zip: a big graph has 100,000s."""
    ids = [f"n{i}" for i in range(len(order))]
    classes = list(map(type, order))
    one_of_each = dict(zip(classes, order, strict=True))
    names = {cls: cls.__name__ for cls in one_of_each}
    kinds = {cls: node_kind(obj) for cls, obj in one_of_each.items()}
    name_of: dict[int, str] = {}  # id(grad_fn) or id(tensor) -> the tensor's first name
    for name, t in named:
        if t.grad_fn is not None:
            name_of.setdefault(id(t.grad_fn), name)
        name_of.setdefault(id(t), name)
    keys: list[int] = []  # what names and modules are keyed by: id(grad_fn), id(leaf tensor)
    leaf_index: dict[int, int] = {}
    # Without names or modules nothing asks for a leaf by its tensor: a big graph's 10,000s
    # of .variable reads are saved.
    if name_of or modules:
        keys = list(map(id, order))
        leaf_classes = {cls for cls, kind in kinds.items() if kind == LEAF}
        for i in compress(range(len(order)), map(leaf_classes.__contains__, classes)):
            keys[i] = id(order[i].variable)
            leaf_index[keys[i]] = i
    if saved_before is None:
        saved: Iterable[tuple[SavedTensor, ...]] = repeat(())
    else:
        saved = []
        for obj in order:
            cached = saved_before.get(id(obj))
            saved.append(cached[1] if cached is not None and cached[0] is obj
                         else saved_tensors(obj))
    columns = zip(ids, map(names.__getitem__, classes), map(kinds.__getitem__, classes),
                  map(name_of.get, keys) if name_of else repeat(None), saved,
                  map(modules.get, keys) if modules else repeat(None),
                  strict=False)  # ids set the length; repeat() never ends
    return list(map(tuple.__new__, repeat(Node), columns)), NodeIds(index, leaf_index, ids)


def _edges(raw_edges: list[tuple[int, int, int, int]], ids: list[str]) -> tuple[Edge, ...]:
    """Edges with node ids (Edge(...) without keywords: a big graph has 100,000s)."""
    make = tuple.__new__
    return tuple([make(Edge, (ids[s], ids[d], slot, k)) for s, d, slot, k in raw_edges])


def _flow_record(p: RawPass, node_ids: NodeIds) -> dict[str, NodeFlow]:
    records = sorted((r for r in p.flow.values() if r[0] in node_ids), key=lambda r: r[1])
    raws = [g for _, _, outs, ins in records for g in (*outs, *ins)]
    summaries = iter(to_summaries(raws))
    flow = {}
    for node, order, outs, ins in records:
        flow[node_ids.node(node)] = NodeFlow(tuple(next(summaries) for _ in outs),
                                            tuple(next(summaries) for _ in ins), order)
    return flow


def _pass_record(p: RawPass, node_ids: NodeIds) -> Pass:
    return Pass(
        kind=p.kind,
        roots=tuple(dict.fromkeys(node_ids.node(r) for r in p.roots if r is not None)),
        retain_graph=p.retain_graph,
        create_graph=p.create_graph,
        error=p.error,
        flow=_flow_record(p, node_ids),
        by=p.by,
        root_names=tuple(p.root_names),
        line=p.line,
        code=p.code,
        grad_changes=tuple(p.grad_changes),
    )
