"""Which steps column each named leaf takes: the one it took first, whatever names it later
(`layer` in a loop over layers, then `net.layers[0]`)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from itertools import count

import torch

Taken = tuple["weakref.ref[torch.Tensor]", str]  # a leaf, weakly, and its column's name


class ColumnsTaken:
    """The column (by its name) each leaf tensor took, while it lives; each column's leaf."""

    def __init__(self) -> None:
        self._taken: dict[int, Taken] = {}  # id(leaf) -> the leaf and its column
        self._holder: dict[str, int] = {}  # a column -> id() of the leaf it holds

    def names(self, leaves: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
        """leaves, each under its column's name, no column twice: a new leaf's is its name's,
        a known one's its own unless a new one takes it by name (`old = model; model = Net()`)."""
        known: list[Taken | None] = [k if (k := self._taken.get(id(t))) is not None
                                     and k[0]() is t else None for _, t in leaves]
        if all(k is not None and k[1] == name for (name, _), k in zip(leaves, known, strict=True)):
            return leaves  # a loop's every pass: each leaf in its column, under its name
        claimed = {name for (name, _), k in zip(leaves, known, strict=True)
                   if k is None or k[1] == name}
        out = []
        for (name, t), k in zip(leaves, known, strict=True):
            column = name
            if k is not None and k[1] != name:
                column = next(c for c in self._choices(k[1], name) if c not in claimed)
                claimed.add(column)
            if k is None or k[1] != column:
                self._take(column, t, k)
            out.append((column, t))
        return out

    def _choices(self, own: str, name: str) -> Iterator[str]:
        """A moved leaf's columns, by preference: its own, its name's, then NAME#2, NAME#3 …
        with K on its module's part (`old#2.weight`), each one no other live leaf holds."""
        yield own
        owner, dot, attribute = name.rpartition(".")
        for k in count(1):
            column = f"{owner}#{k}{dot}{attribute}" if k > 1 and owner else \
                f"{name}#{k}" if k > 1 else name
            if self._held(column) is None:
                yield column

    def _held(self, column: str) -> torch.Tensor | None:
        taken = self._taken.get(self._holder.get(column, 0))
        return taken[0]() if taken is not None and taken[1] == column else None

    def _take(self, column: str, t: torch.Tensor, known: Taken | None) -> None:
        """t takes column (known: its own before, if any); the leaf that held it lets go."""
        before = self._holder.get(column)
        if before is not None and (was := self._taken.get(before)) is not None \
                and was[1] == column:
            del self._taken[before]
        if known is not None and self._holder.get(known[1]) == id(t):  # (a new leaf of this
            del self._holder[known[1]]  # pass may hold its old column already)
        self._taken[id(t)] = (weakref.ref(t), column)
        self._holder[column] = id(t)
