"""Rows of the tensor table: a named tensor's flags, gradient, and why its .grad is None."""

from __future__ import annotations

from typing import Any

import torch

from ..compat.torch import is_view_of, local_shard
from ..model.records import GradSummary, TensorInfo
from .summary import shape_of, summarize
from .walk import NodeIds, dtype_name, node_type, readable_grad

# (name, tensor) pairs in binding order: what labels the graph and the table
Named = list[tuple[str, torch.Tensor]]


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
        if t.grad_fn is not None:
            key = _memory(t)
            if key is not None:
                in_graph.setdefault(key, (name, t))
    sources = {}
    for name, t in named:
        if t.grad_fn is not None:
            continue
        key = _memory(t)
        found = None if key is None else in_graph.get(key)
        # A view of t (chunk, slicing) shares t's memory without cutting anything.
        if found is not None and not is_view_of(found[1], t):
            sources[name] = found[0]
    return sources


def _memory(t: torch.Tensor) -> int | None:
    """Where t's elements live, or None when that says nothing (empty, meta, sparse …)."""
    if not t.numel() or t.is_meta or t.layout != torch.strided:
        return None
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:  # a tensor without storage (a subclass, a functional wrapper)
        return None


def grad_note(t: torch.Tensor, node: str | None, reached: set[str],
              detached_from: str | None, filled: bool = False) -> str | None:
    """Why t.grad is None, in a learner's words; or that the gradient has a graph of its own.
    filled: a pass gave it a .grad, so the scenario set it back to None."""
    grad = readable_grad(t)
    if grad is not None:
        if grad.grad_fn is not None:
            return f"has a graph: {node_type(grad.grad_fn)}, from create_graph=True"
        if local_shard(grad) is not None:
            return "a DTensor: shape and statistics are of this rank's local shard"
        return None
    if not t.requires_grad:
        cut = f"; cut from {detached_from} by detach()" if detached_from else ""
        return "requires_grad is False" + cut
    if not t.is_leaf and not t.retains_grad:
        return "non-leaf: kept only after .retain_grad()"
    if detached_from:
        return f"cut from {detached_from} by detach()"
    if filled:
        return "a backward pass filled it, then the scenario set it to None " \
               "(zero_grad(), or .grad = None)"
    if node is None or node not in reached:
        return "not reached by any backward pass"
    return "only torch.autograd.grad reached it: it returns gradients, it does not store them"


def tensor_info(
    name: str, t: torch.Tensor, node_ids: NodeIds, grad_before: GradSummary | None,
    reached: set[str], detached_from: str | None, filled: bool = False,
) -> TensorInfo:
    """One row of the tensor table."""
    if t.grad_fn is not None:
        node = node_ids.node(t.grad_fn)
    else:
        node = node_ids.leaf(t)
    grad = readable_grad(t)
    return TensorInfo(
        name=name,
        shape=shape_of(t),
        dtype=dtype_name(t.dtype),
        requires_grad=t.requires_grad,
        is_leaf=t.is_leaf,
        retains_grad=t.retains_grad,
        grad_fn=None if t.grad_fn is None else node_type(t.grad_fn),
        node=node,
        grad=None if grad is None else summarize(grad),
        grad_before=grad_before,
        value=summarize(t),
        grad_note=grad_note(t, node, reached, detached_from, filled),
    )
