"""The per-tensor table: autograd flags and .grad before and after backward, one line a row."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from ..model.records import GradSummary, TensorInfo, Trace
from ..model.texts import shape_text, values_text
from .numbers import number_text

COLUMNS = ("tensor", "shape", "value", "requires_grad", "is_leaf", "retains_grad", "grad_fn",
           "grad before", "grad after")
# On a narrow terminal columns go in this order, never the tensor's name or its gradient;
# its value, the one a learner reads first, goes last.
DROP_ORDER = ("grad before", "retains_grad", "is_leaf", "grad_fn", "requires_grad", "shape",
              "value")
CELL_VALUES = 4  # a gradient with more elements is shown by its norm in a cell
# The columns that hold the evidence of a finding, by its code: kept whatever the width.
EVIDENCE = {
    "grad-accumulating": ("grad before",),
    "grad-changed-after": ("grad before",),
    "unreached-leaf": ("requires_grad",),
    "graph-cut": ("requires_grad", "grad_fn"),
    "no-graph": ("requires_grad", "grad_fn"),
    "detached": ("grad_fn",),
    "nan-value": ("value",),
}


def compact(x: Any) -> str:
    """A number in at most 4 significant digits, so a cell never needs to break it."""
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def cell_text(g: GradSummary | None) -> str:
    """ "None", "0.6", "[1, 1, 1]", or "norm 3.21" for a bigger tensor."""
    if g is None:
        return "None"
    if g.note is not None:
        return "n/a"
    small = values_text(g, CELL_VALUES, compact)
    if small is not None:
        return small
    return "empty" if g.min is None else f"norm {compact(g.norm)}"


def grad_notes(tensors: list[TensorInfo]) -> Text:
    """Why each .grad is None (or has a graph), one line per reason naming its tensors."""
    by_note: dict[str, list[str]] = {}
    for t in tensors:
        if t.grad_note:
            by_note.setdefault(t.grad_note, []).append(t.name)
    text = Text(no_wrap=True, overflow="ellipsis")
    for note, names in by_note.items():
        shown = ", ".join(f"{n}.grad" for n in names[:6])
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        text.append(f"  {shown}{more}", style="cyan")
        text.append(f": {note}\n", style="dim")
    text.rstrip()
    return text


def _cells(t: TensorInfo) -> dict[str, Text]:
    def flag(value: bool) -> Text:
        return Text(str(value), style="" if value else "dim")

    def grad(g: GradSummary | None) -> Text:
        style = "dim" if g is None else ("" if g.finite else "bold red")
        return number_text(cell_text(g), style)

    return {
        "tensor": Text(t.name, style="cyan"),
        "shape": Text(shape_text(t.dtype, t.shape)),
        "value": number_text(cell_text(t.value)),
        "requires_grad": flag(t.requires_grad),
        "is_leaf": flag(t.is_leaf),
        "retains_grad": flag(t.retains_grad),
        "grad_fn": Text(t.grad_fn or "None", style="" if t.grad_fn else "dim"),
        "grad before": grad(t.grad_before),
        "grad after": grad(t.grad),
    }


class TensorTable:
    """The table, fitted to the width it is drawn in: every row one line; columns that do not
    fit are left out (and named), never wrapped through a number."""

    def __init__(self, trace: Trace, max_rows: int | None = None) -> None:
        self.tensors = list(trace.tensors)
        self.max_rows = max_rows
        self.evidence = {c for f in trace.findings for c in EVIDENCE.get(f.code, ())}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown = self.tensors if self.max_rows is None else self.tensors[:self.max_rows]
        rows = [_cells(t) for t in shown]
        widths = {c: max([len(c), *(r[c].cell_len for r in rows)]) for c in COLUMNS}
        columns = list(COLUMNS)
        dropped = []
        empty = "grad before" not in self.evidence and shown and all(
            t.grad_before is None for t in shown)
        if empty:  # a column that says nothing: no .grad before any backward
            columns.remove("grad before")
        for column in DROP_ORDER:
            if sum(widths[c] + 3 for c in columns) + 1 <= options.max_width:
                break
            # a finding's evidence stays, however narrow
            if column in columns and column not in self.evidence:
                columns.remove(column)
                dropped.append(column)
        table = Table(title="tensors", title_justify="left", header_style="bold")
        for column in columns:
            table.add_column(column, no_wrap=True, overflow="ellipsis",
                             min_width=min(len(column), 12))
        for row in rows:
            table.add_row(*(row[c] for c in columns))
        yield table
        notes = []
        if len(shown) < len(self.tensors):
            notes.append(f"… {len(self.tensors) - len(shown)} more tensors (--all)")
        if dropped:
            notes.append(f"columns left out at {options.max_width} columns: "
                         f"{', '.join(reversed(dropped))} (a wider terminal, or --json)")
        if notes:
            yield Text("\n".join(notes), style="yellow")
        if empty:
            yield Text("  grad before: None for every tensor (no .grad before the first "
                       "backward), so not shown", style="dim")


def tensor_table(trace: Trace, max_rows: int | None = None) -> Group:
    """One row per named tensor, in binding order (the first max_rows); then why a .grad is
    None."""
    parts: list[Text | TensorTable] = [TensorTable(trace, max_rows),
                                       grad_notes(list(trace.tensors))]
    if trace.passes and all(p.by == "gradtrace" for p in trace.passes):
        parts.append(Text("  grad after: after the backward gradtrace ran once the script had "
                          "ended; the script's own .grad stayed as it left them", style="dim"))
    return Group(*parts)
