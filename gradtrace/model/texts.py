"""Short texts of the Trace's parts, for findings, diff and renderers: shapes, numbers,
gradients, nodes, saved tensors, sizes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .records import GradSummary, Node, SavedTensor, Shape
from .values import flat_values

SMALL = 8  # gradients with at most this many elements are shown in full


def shape_text(dtype: str | None, shape: Shape | None) -> str:
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
    """ "None", "0.6", "[1, 1, 1]", or "[32] norm 3.21 in [-1.2, 5.4]" for large tensors
    ("[32] norm 3.21, |z| in [0.1, 5.4]" when complex; "… (local shard)": a DTensor's)."""
    if g is None:
        return "None"
    text = values_text(g, SMALL) or _brief(g)
    return text + " (local shard)" if g.local_shard else text


def _brief(g: GradSummary) -> str:
    dims = ", ".join(str(d) for d in g.shape)
    if g.note is not None:
        return f"[{dims}] {g.note}"
    if g.min is None:
        return f"[{dims}] empty"
    of = ", |z|" if g.is_complex else ""  # a complex gradient's range is of magnitudes
    return f"[{dims}] norm {number(g.norm)}{of} in [{number(g.min)}, {number(g.max)}]"


def received_text(grad_outputs: tuple[GradSummary | None, ...]) -> str:
    """What a node received: one gradient, or one per output ("out0 1, out1 None")."""
    if len(grad_outputs) == 1:
        return grad_text(grad_outputs[0])
    return ", ".join(f"out{i} {grad_text(g)}" for i, g in enumerate(grad_outputs))


def sent_text(grad_inputs: tuple[GradSummary | None, ...]) -> str:
    """What a node sent: one gradient, or one per input ("in0 1, in1 None")."""
    if len(grad_inputs) == 1:
        return grad_text(grad_inputs[0])
    return ", ".join(f"in{i} {grad_text(g)}" for i, g in enumerate(grad_inputs))


def node_title(node: Node) -> str:
    """ "AccumulateGrad → x", "MulBackward0 (y)", "MyPowBackward (y)"; a node with several
    named outputs names each, in output order: "SplitBackward0 (a, b)"."""
    if node.kind == "leaf":
        return f"{node.type} → {node.tensor or '(unnamed leaf)'}"
    names = node_names(node)
    return node.type + (f" ({names})" if names else "")


def node_names(node: Node) -> str | None:
    """The tensor a node made: "y"; each output's, "a, b" (an unnamed one "_": "_, b")."""
    if node.output_tensors:
        return ", ".join(name or "_" for name in node.output_tensors)
    return node.tensor


def output_title(node: Node, output: int) -> str:
    """The node as the maker of one of its outputs: "SplitBackward0 (b)" for output 1 of
    `a, b = x.chunk(2)`; the node's title where its outputs are not named apart."""
    if not node.output_tensors:
        return node_title(node)
    name = node.output_tensors[output] if output < len(node.output_tensors) else None
    return node.type + (f" ({name})" if name else "")


def saved_text(saved: tuple[SavedTensor, ...]) -> str:
    """ "saved: self float32[] 4 B, other (freed)"."""
    parts = []
    for s in saved:
        if s.status != "ok":
            parts.append(f"{s.name} ({s.status})")
        else:
            parts.append(f"{s.name} {shape_text(s.dtype, s.shape)} {s.bytes} B")
    return "saved: " + (", ".join(parts) if parts else "nothing")


def duration_text(us: float) -> str:
    """ "850 µs", "12.3 ms", "1.2 s"."""
    if us < 1000:
        return f"{us:.0f} µs"
    return f"{us / 1000:.3g} ms" if us < 1e6 else f"{us / 1e6:.3g} s"


def size_text(n: int) -> str:
    """ "512 B", "1.2 KB", "3.4 MB"; "-1.2 KB" for a balance below 0."""
    if n < 0:
        return "-" + size_text(-n)
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KB" if n < 1024**2 else f"{n / 1024**2:.1f} MB"
