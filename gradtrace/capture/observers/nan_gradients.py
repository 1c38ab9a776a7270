"""Where a watched run's first non-finite gradient was born, told while the run goes on: a
pass in detail whose row is read with a .grad not finite has its graph made plain data (a
copy: the pass keeps its own detail for the trace) and judged as the trace's nan-gradient
is, so that `watch` tells it, and `--stop-on nan-gradient` stops, at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ...extract.captured import RawPass
from ...extract.nan_gradient import nan_gradient_of
from ...model.records import Finding
from .base import Observer, PassState, Recording

# Passes judged at most until one tells where its first non-finite gradient was born: that
# is the one a run stops at; a diverged loop's later passes only repeat it (the report says
# them all).
JUDGED = 4


class NanGradients(Observer):
    """A listener's passes in detail whose rows are not read yet; judged as they are read."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self._waiting: dict[int, tuple[int, RawPass]] = {}  # row -> (pass number, pass)
        self._judged = 0
        self._in_detail: set[int] = set()  # the rows of passes in detail (not light)

    def finish(self, p: PassState) -> None:
        record = p.record
        if self.recorder.options.listener is not None and p.detailed and record.flow \
                and record.row is not None and self._judged < JUDGED:
            self._waiting[record.row] = (p.number, record)
            self._in_detail.add(record.row)

    def read(self, end: int, finite: Callable[[int], bool | None]) -> list[Finding]:
        """The rows before `end` were read: the nan-gradient of each pass in detail whose
        row holds a .grad not finite (finite: a row's verdict, None when not read)."""
        found: list[Finding] = []
        for row in sorted(r for r in self._waiting if r < end):
            number, p = self._waiting.pop(row)
            if finite(row) is not False or not (p.flow and p.roots) or self._judged >= JUDGED:
                continue
            self._judged += 1
            graph = self.recorder.frozen_of(replace(p, flow=dict(p.flow)))
            origin = nan_gradient_of(p, graph, number, self.recorder.script.path,
                                     lambda r: r not in self._in_detail and finite(r) is False)
            if origin is not None:  # the run's first: later passes only repeat it
                found.append(origin)
                self._judged = JUDGED
        return found

    def release(self) -> None:
        self._waiting.clear()
