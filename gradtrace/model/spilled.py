"""The steps' rows of a long run kept in a temporary file, not in memory: a sequence of rows
(tuples of LeafStep or None) that reads back a block of rows at a time. A watched run of any
length keeps only the rows still on their way; its trace's steps are this."""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from .records import LeafStep

Row = tuple[LeafStep | None, ...]
BLOCK = 1 << 18  # bytes read back at a time (at least a row) when iterated
# a cell's flags byte: no .grad, a .grad, finite, kept (as the row was read)
_NONE, _PRESENT, _FINITE, _KEPT = 0, 1, 2, 4


class SpilledRows(Sequence[Row]):
    """Rows appended to an unnamed temporary file (removed when this is collected): each
    row's flags a byte per cell, then its cells' norm and max |g| as float64s; in memory,
    where each row starts and how wide it is."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the rows
        self._starts = array("q")  # each row's offset in the file
        self._widths = array("l")  # each row's cells
        self._end = 0
        self.width = 0  # rows read back as wide as this at least (None after their cells)

    def append(self, row: Row) -> None:
        """One more row, written at the file's end."""
        flags = bytes(_NONE if g is None else
                      _PRESENT | _FINITE * g.finite | _KEPT * g.kept for g in row)
        numbers = array("d", [x for g in row if g is not None for x in (g.norm, g.max_abs)])
        self._file.seek(self._end)
        self._file.write(flags)
        self._file.write(numbers.tobytes())
        self._starts.append(self._end)
        self._widths.append(len(row))
        self._end += len(flags) + numbers.itemsize * len(numbers)

    def extend(self, rows: Sequence[Row]) -> None:
        for row in rows:
            self.append(row)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Row, ...]: ...

    def __getitem__(self, index: int | slice) -> Row | tuple[Row, ...]:
        if isinstance(index, slice):
            return tuple(self._rows(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("row index out of range")
        return next(self._rows(index, index + 1, 1))

    def __iter__(self) -> Iterator[Row]:
        return self._rows(0, len(self), 1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return NotImplemented if not isinstance(other, Sequence) else False
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # as a list's: its rows can grow

    def __reduce__(self) -> tuple[Any, ...]:
        return tuple, (tuple(self),)  # a copy elsewhere holds its rows, not the file

    def _rows(self, start: int, stop: int, step: int) -> Iterator[Row]:
        """The rows start, start + step, … before stop, read about BLOCK bytes at a time."""
        chosen = range(start, stop, step)
        first = 0
        while first < len(chosen):
            low = high = chosen[first]
            last = first
            while last + 1 < len(chosen) and abs(self._at(chosen[last + 1]) - self._at(low)) \
                    < BLOCK:
                last += 1
                low, high = min(low, chosen[last]), max(high, chosen[last])
            self._file.seek(self._starts[low])
            data = self._file.read(self._at(high + 1) - self._starts[low])
            for i in chosen[first:last + 1]:
                row = self._decoded(data, self._starts[i] - self._starts[low], self._widths[i])
                yield row + (None,) * (self.width - len(row)) if len(row) < self.width else row
            first = last + 1

    def _at(self, row: int) -> int:
        """Where row starts in the file (the file's end for the row after the last)."""
        return self._starts[row] if row < len(self._starts) else self._end

    @staticmethod
    def _decoded(data: bytes, at: int, width: int) -> Row:
        flags = data[at:at + width]
        numbers = array("d")
        present = width - flags.count(_NONE)
        numbers.frombytes(data[at + width:at + width + 16 * present])
        cells: list[LeafStep | None] = []
        k = 0
        for flag in flags:
            if flag == _NONE:
                cells.append(None)
            else:
                cells.append(LeafStep(numbers[k], numbers[k + 1], bool(flag & _FINITE),
                                      bool(flag & _KEPT)))
                k += 2
        return tuple(cells)
