"""Trace A against trace B: nodes, edges, modules, tensors, gradients and findings."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..gcpause import gc_paused
from ..model.diffs import (
    EdgeChange,
    GradientChange,
    NodeChange,
    RankGradient,
    TensorChange,
    TraceDiff,
)
from ..model.profile import module_costs
from ..model.records import Finding, GradSummary, Trace
from ..model.texts import number
from ..model.values import flat_values
from .match import Matching, match_nodes

# float32 sums come out in another order on another machine or thread count: a relative
# error of about 1e-6 is not a change
RTOL = 1e-4
ATOL = 1e-6


@gc_paused
def compare(a: Trace, b: Trace, a_name: str, b_name: str, rtol: float = RTOL,
            atol: float = ATOL, matching: Matching | None = None) -> TraceDiff:
    """What differs between a and b; gradients differ when |a − b| > atol + rtol·|b|."""
    m = matching or match_nodes(a, b)
    nodes_a = {n.id: n for n in a.nodes}
    nodes_b = {n.id: n for n in b.nodes}
    nodes = [NodeChange("removed", nodes_a[x], None) for x in m.only_a]
    nodes += [NodeChange("added", None, nodes_b[y]) for y in m.only_b]
    nodes += [NodeChange("changed", nodes_a[x], nodes_b[y]) for x, y in m.pairs.items()
              if (nodes_a[x].type, nodes_a[x].module) != (nodes_b[y].type, nodes_b[y].module)]
    edges = _edge_changes(a, b, m, nodes_a, nodes_b)
    modules = sorted({n.module for c in nodes for n in (c.a, c.b) if n is not None and n.module}
                     | {n.module for c in edges for n in (c.src, c.dst) if n.module})
    new, fixed = _finding_changes(a.findings, b.findings)
    gradients = tuple(_gradient_changes(a, b, rtol, atol))
    ranks = None if a.ranks is None or b.ranks is None else (a.ranks, b.ranks)
    return TraceDiff(a_name, b_name, len(m.pairs), tuple(nodes), tuple(edges), tuple(modules),
                     tuple(_tensor_changes(a, b)), gradients, new, fixed,
                     (len(a.passes), len(b.passes)), rtol, atol, ranks,
                     _across_ranks(a, b, gradients, rtol, atol) if ranks else (),
                     module_costs(a, b))


def _edge_changes(a: Trace, b: Trace, m: Matching, nodes_a: dict[str, Any],
                  nodes_b: dict[str, Any]) -> list[EdgeChange]:
    in_b = set(b.edges)
    hit: set[Any] = set()
    out = []
    for e in a.edges:
        src, dst = m.pairs.get(e.src), m.pairs.get(e.dst)
        mapped = None if src is None or dst is None else e._replace(src=src, dst=dst)
        if mapped in in_b:
            hit.add(mapped)
        else:
            out.append(EdgeChange("removed", e, nodes_a[e.src], nodes_a[e.dst]))
    out += [EdgeChange("added", e, nodes_b[e.src], nodes_b[e.dst]) for e in b.edges
            if e not in hit]
    return out


def _tensor_changes(a: Trace, b: Trace) -> Iterable[TensorChange]:
    tensors_b = {t.name: t for t in b.tensors}
    names_a = set()
    for t in a.tensors:
        names_a.add(t.name)
        other = tensors_b.get(t.name)
        if other is None:
            yield TensorChange(t.name, "removed")
            continue
        if t.requires_grad != other.requires_grad:
            yield TensorChange(t.name, "requires_grad", t.requires_grad, other.requires_grad)
        if t.is_leaf != other.is_leaf:
            yield TensorChange(t.name, "is_leaf", t.is_leaf, other.is_leaf)
    yield from (TensorChange(t.name, "added") for t in b.tensors if t.name not in names_a)


def _gradient_changes(a: Trace, b: Trace, rtol: float, atol: float,
                      ) -> Iterable[GradientChange]:
    """Per pass, the gradient each leaf tensor on both sides received; then each named
    tensor's final .grad, unless its passes said it moved."""
    tensors_b = {t.name: t for t in b.tensors}
    both = [(t, tensors_b[t.name]) for t in a.tensors if t.name in tensors_b]
    moved: dict[str, list[GradientChange]] = {}
    for i, (pa, pb) in enumerate(zip(a.passes, b.passes, strict=False), 1):
        for ta, tb in both:
            if not (ta.is_leaf and tb.is_leaf):
                continue
            fa = pa.flow.get(ta.node) if ta.node else None  # no node: not in the graph
            fb = pb.flow.get(tb.node) if tb.node else None
            if fa is None and fb is None:
                continue
            ga = fa.grad_outputs[0] if fa is not None and fa.grad_outputs else None
            gb = fb.grad_outputs[0] if fb is not None and fb.grad_outputs else None
            change = gradient_change(ta.name, i, ga, gb, rtol, atol)
            if change is not None:
                moved.setdefault(ta.name, []).append(change)
    # A loop's steps run one graph again and again: each tensor is told once, at the first
    # pass it moved in, not once per step.
    loops = _loop(a) and _loop(b)
    for changes in moved.values():
        if loops and len(changes) > 1:
            later = ", ".join(str(c.pass_number) for c in changes[1:])
            yield replace(changes[0], detail=f"{changes[0].detail}; also in pass {later}")
        else:
            yield from changes
    for ta, tb in both:
        change = gradient_change(ta.name, None, ta.grad, tb.grad, rtol, atol)
        if change is not None and ta.name not in moved:  # else said per pass already
            yield change


def _across_ranks(a: Trace, b: Trace, gradients: tuple[GradientChange, ...], rtol: float,
                  atol: float) -> tuple[RankGradient, ...]:
    """For each tensor whose gradient moved between two ranks (in a pass, or its .grad), its
    .grad on both: equal where DDP (or another allreduce) averaged the ranks' gradients."""
    grads_a = {t.name: t.grad for t in a.tensors}
    grads_b = {t.name: t.grad for t in b.tensors}
    moved = dict.fromkeys(c.tensor for c in gradients)
    return tuple(
        RankGradient(name, grads_a[name], grads_b[name], grads_a[name] is not None and
                     gradient_change(name, None, grads_a[name], grads_b[name], rtol, atol)
                     is None)
        for name in moved if name in grads_a and name in grads_b)


def _loop(trace: Trace) -> bool:
    """Whether the trace's passes run one graph more than once (a training loop's steps; a
    trace saved before passes told their graph has no steps and is not one)."""
    return trace.steps is not None and len({p.graph for p in trace.passes}) < len(trace.passes)


def gradient_change(name: str, pass_number: int | None, a: GradSummary | None,
                    b: GradSummary | None, rtol: float, atol: float) -> GradientChange | None:
    """How a tensor's gradient moved from a to b, or None when it did not (within tolerance)."""
    if a is None and b is None:
        return None
    if a is None:
        return GradientChange(name, pass_number, "appeared", a, b, "appeared")
    if b is None:
        return GradientChange(name, pass_number, "vanished", a, b, "vanished")
    detail = _moved(a, b, rtol, atol)
    return None if detail is None else GradientChange(name, pass_number, "changed", a, b,
                                                      detail)


def _moved(a: GradSummary, b: GradSummary, rtol: float, atol: float) -> str | None:
    """The first number that moved beyond the tolerance ("norm 0.52 → 0.61"), or None."""
    if a.shape != b.shape:
        return f"shape {list(a.shape)} → {list(b.shape)}"
    if a.note != b.note:
        return f"{a.note or 'summarised'} → {b.note or 'summarised'}"
    for what, x, y in (("norm", a.norm, b.norm), ("min", a.min, b.min), ("max", a.max, b.max)):
        if not _close(x, y, rtol, atol):
            return f"{what} {number(x)} → {number(y)}"
    if a.values is not None and b.values is not None:
        for i, (x, y) in enumerate(zip(flat_values(a.values), flat_values(b.values),
                                       strict=False)):
            if not _close(x, y, rtol, atol):
                return f"element {i}: {number(x)} → {number(y)}"
    return None


def _close(x: Any, y: Any, rtol: float, atol: float) -> bool:
    if x is None or y is None:
        return x is y
    if not (math.isfinite(x) and math.isfinite(y)):
        return x == y or (math.isnan(x) and math.isnan(y))
    return abs(x - y) <= atol + rtol * abs(y)


def _finding_changes(a: tuple[Finding, ...], b: tuple[Finding, ...],
                     ) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """Findings of B not in A (new) and of A not in B (fixed)."""
    return _unmatched(b, a), _unmatched(a, b)


def _unmatched(these: tuple[Finding, ...], those: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """The findings of these with no counterpart in those, told apart by code and tensor:
    messages carry line numbers and values that move with any edit."""
    left = Counter((f.code, f.tensor) for f in those)
    out = []
    for f in these:
        if left[f.code, f.tensor] > 0:
            left[f.code, f.tensor] -= 1
        else:
            out.append(f)
    return tuple(out)
