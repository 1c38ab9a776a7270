"""Short texts only the renderers need: saved tensors, what a node received, scalars."""

from __future__ import annotations

from ..model.labels import grad_text, shape_text
from ..model.records import GradSummary, SavedTensor
from ..model.values import flat_values


def saved_text(saved: tuple[SavedTensor, ...]) -> str:
    """ "saved: self float32[] 4 B, other (freed)"."""
    parts = []
    for s in saved:
        if s.status != "ok":
            parts.append(f"{s.name} ({s.status})")
        else:
            parts.append(f"{s.name} {shape_text(s.dtype, s.shape)} {s.bytes} B")
    return "saved: " + (", ".join(parts) if parts else "nothing")


def received_text(grad_outputs: tuple[GradSummary | None, ...]) -> str:
    """What a node received: one gradient, or one per output ("out0 1, out1 None")."""
    if len(grad_outputs) == 1:
        return grad_text(grad_outputs[0])
    return ", ".join(f"out{i} {grad_text(g)}" for i, g in enumerate(grad_outputs))


def scalar(g: GradSummary | None) -> float | None:
    """The value of a one-element gradient, else None."""
    if g is None or g.values is None:
        return None
    flat = flat_values(g.values)
    return flat[0] if len(flat) == 1 and isinstance(flat[0], float) else None


def size_text(n: int) -> str:
    """ "512 B", "1.2 KB", "3.4 MB"."""
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KB" if n < 1024**2 else f"{n / 1024**2:.1f} MB"
