"""What gradient summaries say beyond their fields: whether two are the same gradient, the
value of a one-element one, and what a module hook replaced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .records import BACKWARD_HOOK_NODE, GradSummary, Node, NodeFlow
from .values import flat_values


def scalar(g: GradSummary | None) -> float | None:
    """The value of a one-element gradient, else None."""
    if g is None or g.values is None:
        return None
    flat = flat_values(g.values)
    return flat[0] if len(flat) == 1 and isinstance(flat[0], float) else None


def same_gradient(a: GradSummary | None, b: GradSummary | None) -> bool:
    """Whether two summaries describe the same gradient (values when kept, else the norms)."""
    if a is b:  # the flow shares one summary between the ends of an edge: the common case
        return True
    if a is None or b is None:
        return False
    if a.note is not None or b.note is not None:
        return True  # one could not be read: nothing says they differ
    if a.shape != b.shape:
        return False
    if a.values is not None and b.values is not None:
        return close_numbers(flat_values(a.values), flat_values(b.values))
    return _close(a.norm, b.norm)


def close_numbers(xs: Sequence[Any], ys: Sequence[Any]) -> bool:
    """Whether two rows of numbers are equal but for float32 noise (NaN equals NaN)."""
    return len(xs) == len(ys) and all(map(_close, xs, ys))


def hook_replaced(node: Node, flow: NodeFlow) -> tuple[GradSummary | None, ...] | None:
    """What node itself sent when a module backward hook on it changed that (None: no hook
    changed it). A BackwardHookFunctionBackward node is an identity: it sends what it got."""
    own = flow.unhooked
    if own is None and node.type == BACKWARD_HOOK_NODE and node.hooks:
        own = flow.grad_outputs[:len(flow.grad_inputs)]
    if own is None or all(map(same_gradient, own, flow.grad_inputs)):
        return None
    return own


def _close(x: Any, y: Any) -> bool:
    if x is None or y is None:  # a statistic one side could not read
        return x is y
    if x == y:  # also equal infinities
        return True
    if x != x or y != y:  # NaN
        return x != x and y != y
    return abs(x - y) <= 1e-6 * max(1.0, abs(x), abs(y))
