"""The per-tensor table: autograd flags and .grad before and after backward."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..model.labels import grad_text, shape_text
from ..model.records import Trace


def _flag(value: bool) -> Text:
    return Text(str(value), style="" if value else "dim")


def _grad(text: str, finite: bool = True) -> Text:
    return Text(text, style="dim" if text == "None" else ("" if finite else "bold red"))


COLUMNS = ("tensor", "shape", "value", "requires_grad", "is_leaf", "retains_grad", "grad_fn",
           "grad before", "grad after")
NO_WRAP = {"shape", "grad_fn", "requires_grad", "is_leaf", "retains_grad"}


def grad_notes(trace: Trace) -> Text:
    """Why each .grad is None (or has a graph), one line per reason naming its tensors."""
    by_note: dict[str, list[str]] = {}
    for t in trace.tensors:
        if t.grad_note:
            by_note.setdefault(t.grad_note, []).append(t.name)
    text = Text()
    for note, names in by_note.items():
        text.append("  " + ", ".join(f"{n}.grad" for n in names), style="cyan")
        text.append(f": {note}\n", style="dim")
    text.rstrip()
    return text


def tensor_table(trace: Trace) -> Group:
    """One row per named tensor, in binding order; then why a .grad is None."""
    table = Table(title="tensors", title_justify="left", header_style="bold")
    for column in COLUMNS:
        table.add_column(column, overflow="fold", no_wrap=column in NO_WRAP)
    for t in trace.tensors:
        table.add_row(
            Text(t.name, style="cyan"),
            Text(shape_text(t.dtype, t.shape)),
            Text(grad_text(t.value)),
            _flag(t.requires_grad),
            _flag(t.is_leaf),
            _flag(t.retains_grad),
            Text(t.grad_fn or "None", style="" if t.grad_fn else "dim"),
            _grad(grad_text(t.grad_before)),
            _grad(grad_text(t.grad), t.grad is None or t.grad.finite),
        )
    return Group(table, grad_notes(trace))
