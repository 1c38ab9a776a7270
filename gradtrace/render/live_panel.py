"""`gradtrace watch`'s panel on a terminal: the step, the loss's and the largest modules'
gradient-norm sparklines so far, steps per second and gradtrace's own share of the time.

A run's series grow without end, so each is kept in at most WIDTH marks as it grows: a mark
is a bucket of consecutive passes (a norm's largest, the loss's mean, as the steps view picks);
when WIDTH are full, neighbours merge and each bucket holds twice as many passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import add, itemgetter, mul

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model.records import Steps
from .numbers import number_text
from .series import Value, bucketed, grad_series, log_scale, loss_series, mean
from .steps import WIDTH, sparkline
from .table import compact

NORM, FINITE = itemgetter(0), itemgetter(2)  # of a LeafStep, read in C
PANEL_LINES = 5  # the panel's lines besides its modules' rows: title, header, loss, more, blank


class Sparks:
    """One series as it grows, in at most WIDTH marks, and its latest value."""

    def __init__(self, pick: Callable[[list[float]], float]) -> None:
        self.pick = pick
        self.marks: list[Value] = []  # full buckets of `size` passes each
        self.part: list[Value] = []  # the bucket being filled
        self.size = 1
        self.last: Value = None  # the latest value that is not None

    def add(self, values: Sequence[Value]) -> None:
        """The values of the passes that follow."""
        self.last = next((x for x in reversed(values) if x is not None), self.last)
        start = 0
        while start < len(values):  # a bucket's worth at a time
            end = start + self.size - len(self.part)
            self.part.extend(values[start:end])
            start = end
            if len(self.part) == self.size:
                self.marks.append(self._mark(self.part))
                self.part = []
                if len(self.marks) == WIDTH:
                    self.marks = [self._mark(self.marks[i:i + 2]) for i in range(0, WIDTH, 2)]
                    self.size *= 2

    def shown(self) -> list[Value]:
        """The marks to draw: the full buckets, then the one being filled."""
        return self.marks + ([self._mark(self.part)] if self.part else [])

    def _mark(self, values: list[Value]) -> Value:
        return bucketed(values, 1, self.pick)[0]


class RunSparks:
    """A watched run's steps so far, as the panel draws them: the loss and each module's
    gradient norm (a leaf outside any module stands for itself)."""

    def __init__(self) -> None:
        self.steps = 0
        self.loss = Sparks(mean)
        self.modules: dict[str, Sparks] = {}

    def add(self, rows: Steps) -> None:
        """Rows read since the last call (their leaves: every column so far)."""
        loss = loss_series(rows)
        self.loss.add(loss.values if loss is not None else [None] * len(rows.grads))
        for name, values in module_norms(rows).items():
            sparks = self.modules.get(name)
            if sparks is None:  # first seen in these rows: none before them
                sparks = self.modules[name] = Sparks(max)
                sparks.add([None] * self.steps)
            sparks.add(values)
        self.steps += len(rows.grads)

    def largest(self, count: int) -> list[str]:
        """The count modules with the largest latest norm (a NaN or inf first), in the order
        first seen."""
        def size(name: str) -> float:
            last = self.modules[name].last
            return -1.0 if last is None else math.inf if not math.isfinite(last) else last

        chosen = set(sorted(self.modules, key=size, reverse=True)[:max(count, 0)])
        return [name for name in self.modules if name in chosen]


def module_norms(rows: Steps) -> dict[str, Sequence[Value]]:
    """Each module's gradient norm in each row, as grad_series(rows, by_module=True) says,
    in C when every leaf has a finite .grad in every row (the usual case, a pass's cost)."""
    n = len(rows.leaves)
    columns = list(zip(*rows.grads, strict=True)) if all(
        len(row) == n and None not in row for row in rows.grads) else []
    norms: list[list[float]] = []
    for column in columns:
        values = list(map(NORM, column))
        if not math.isfinite(sum(values)) or False in map(FINITE, column):
            break
        norms.append(values)
    if not rows.grads or len(norms) < n:
        return {s.name: s.values for s in grad_series(rows, by_module=True)}
    squares: dict[str, list[float]] = {}
    for leaf, module, xs in zip(rows.leaves, rows.modules, norms, strict=True):
        name = leaf if module is None else module
        total = squares.get(name)
        squares[name] = list(map(mul, xs, xs) if total is None
                             else map(add, total, map(mul, xs, xs)))
    return {name: list(map(math.sqrt, total)) for name, total in squares.items()}


@dataclass(frozen=True)
class Pace:
    """How fast the run goes: steps per second, and the share of its time gradtrace spent in
    what it covers (says which)."""

    steps_per_second: float
    own_share: float
    covers: str


def live_panel(run: RunSparks, pace: Pace, height: int) -> RenderableType:
    """The panel, height lines at most (a terminal's): the loss, and as many of the modules
    with the largest latest gradient norm as fit; then a blank line, where the cursor waits."""
    title = Text(f"step {run.steps:,}", style="bold", no_wrap=True, overflow="ellipsis")
    title.append(f"  ·  {pace.steps_per_second:,.1f} steps/s  ·  {pace.own_share:.1%} of the "
                 f"time in gradtrace's {pace.covers}", style="dim")
    table = Table(box=None, header_style="dim", pad_edge=False, show_edge=False)
    table.add_column("module", no_wrap=True, overflow="ellipsis", max_width=36, min_width=8)
    size = run.loss.size
    table.add_column(f"passes 1…{run.steps:,}" + (f", a mark: {size:,}" if size > 1 else ""),
                     no_wrap=True, min_width=WIDTH)
    table.add_column("last", justify="right", no_wrap=True)
    _row(table, "loss", run.loss, "bold")
    shown = run.largest(height - PANEL_LINES)
    for name in shown:
        _row(table, name, run.modules[name], "cyan")
    parts: list[RenderableType] = [title, table]
    if len(shown) < len(run.modules):
        more = len(run.modules) - len(shown)
        parts.append(Text(f"… {more} more module{'' if more == 1 else 's'} (smaller norms)",
                          style="dim"))
    return Group(*parts, Text(""))


def _row(table: Table, name: str, sparks: Sparks, style: str) -> None:
    marks = sparks.shown()
    table.add_row(Text(name, style=style), sparkline(marks, log_scale(marks)),
                  _value(sparks.last))


def _value(x: Value) -> Text:
    return Text("-", style="dim") if x is None else number_text(compact(x))
