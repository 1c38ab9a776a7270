"""Which steps column each named leaf takes: the one it took first, whatever names it later
(`layer` in a loop over layers, then `net.layers[0]`)."""

from __future__ import annotations

import weakref

import torch


class ColumnsTaken:
    """The column (by its name) each leaf tensor took, while it lives."""

    def __init__(self) -> None:
        self._taken: dict[int, tuple[weakref.ref[torch.Tensor], str]] = {}

    def names(self, leaves: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
        """leaves, each under its column's name: the column it took, unless another leaf of
        these is named so now (`old = model; model = Net()`: the new model's leaves take the
        columns; the old ones go on under their names now)."""
        columns = [k[1] if (k := self._taken.get(id(t))) is not None and k[0]() is t else None
                   for _, t in leaves]
        by_name = {name for (name, _), column in zip(leaves, columns, strict=True)
                   if column is None}  # the names that new leaves take their columns by
        return [(name if column is None or column != name and column in by_name else column, t)
                for (name, t), column in zip(leaves, columns, strict=True)]

    def took(self, column: str, t: torch.Tensor, before: int | None = None) -> None:
        """The column took t (before: the id of the tensor it held until now)."""
        if before is not None and (k := self._taken.get(before)) is not None \
                and k[1] == column:
            del self._taken[before]
        self._taken[id(t)] = (weakref.ref(t), column)
