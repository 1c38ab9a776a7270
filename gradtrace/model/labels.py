"""Short texts and comparisons that analysis and renderers share: shapes, gradients, nodes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .records import GradSummary, Node
from .values import flat_values

SMALL = 8  # gradients with at most this many elements are shown in full


def shape_text(dtype: str | None, shape: tuple[int, ...] | None) -> str:
    """ "float32[3, 3]"; a scalar is "float32[]"."""
    dims = "?" if shape is None else ", ".join(str(d) for d in shape)
    return f"{dtype or '?'}[{dims}]"


def number(x: Any) -> str:
    """A float in at most 6 significant digits; bools and ints as they are."""
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def values_text(g: GradSummary, limit: int, fmt: Callable[[Any], str] = number) -> str | None:
    """ "0.6" or "[1, 1, 1]" when g's values are kept and at most limit; else None."""
    if g.values is None:
        return None
    flat = flat_values(g.values)
    if not g.shape:
        return fmt(flat[0])
    return "[" + ", ".join(map(fmt, flat)) + "]" if len(flat) <= limit else None


def grad_text(g: GradSummary | None) -> str:
    """ "None", "0.6", "[1, 1, 1]", or "[32] norm 3.21 in [-1.2, 5.4]" for large tensors."""
    if g is None:
        return "None"
    small = values_text(g, SMALL)
    if small is not None:
        return small
    dims = ", ".join(str(d) for d in g.shape)
    if g.note is not None:
        return f"[{dims}] {g.note}"
    if g.min is None:
        return f"[{dims}] empty"
    return f"[{dims}] norm {number(g.norm)} in [{number(g.min)}, {number(g.max)}]"


def node_title(node: Node) -> str:
    """ "AccumulateGrad → x", "MulBackward0 (y)", "MyPowBackward (y)"."""
    if node.kind == "leaf":
        return f"{node.type} → {node.tensor or '(unnamed leaf)'}"
    return node.type + (f" ({node.tensor})" if node.tensor else "")


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
        pairs = zip(flat_values(a.values), flat_values(b.values), strict=True)
        return all(_close(x, y) for x, y in pairs)
    return _close(a.norm, b.norm)


def _close(x: Any, y: Any) -> bool:
    if x == y:  # also equal infinities
        return True
    if x != x or y != y:  # NaN
        return x != x and y != y
    return abs(x - y) <= 1e-6 * max(1.0, abs(x), abs(y))
