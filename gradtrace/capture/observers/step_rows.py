"""A row of the steps' statistics: what its entries hold while their numbers are on the
device, and the row as read (a loss scale divided out, a repeat resolved)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...model.records import LeafStep

# A row's entry while its numbers are on the device, and one that repeats the row before's
PENDING = object()
SAME = object()


def resolved(entry: Any, before: LeafStep | None, scale: float | None) -> LeafStep | None:
    """A row's entry as read, divided by the pass's loss scale: SAME is the row before's,
    not kept."""
    if entry is SAME:
        return None if before is None else before._replace(kept=False)
    if entry is PENDING:
        return None
    if entry is None or scale is None:
        return entry
    return entry._replace(norm=entry.norm / scale, max_abs=entry.max_abs / scale)


def resolved_rows(rows: Sequence[list[Any]], scales: Sequence[float | None],
                  last: tuple[LeafStep | None, ...], width: int
                  ) -> list[tuple[LeafStep | None, ...]]:
    """Rows as read, each `width` wide (last: the row before the first's, as resolved)."""
    grads: list[tuple[LeafStep | None, ...]] = []
    for row, scale in zip(rows, scales, strict=True):
        last = tuple(resolved(entry, last[column] if column < len(last) else None, scale)
                     for column, entry in enumerate(row)) + (None,) * (width - len(row))
        grads.append(last)
    return grads


def row_finite(rows: Sequence[list[Any]], row: int) -> bool | None:
    """Whether every .grad of the row is finite (None: not read yet)."""
    finite = True
    for column, entry in enumerate(rows[row]):
        back = row
        while entry is SAME:  # the row before's (a row of the first pass is none)
            back -= 1
            entry = rows[back][column]
        if entry is PENDING:
            return None
        finite = finite and (not isinstance(entry, LeafStep) or entry.finite)
    return finite
