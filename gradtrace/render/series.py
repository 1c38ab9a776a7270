"""A training loop's steps as series over the passes: each leaf's (or module's) gradient norm,
and the loss; and their buckets, when a long run must fit a few characters or pixels.

Read by the terminal's steps view, the steps chart and the page's steps panel, so the three
say the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from ..model.records import LeafStep, Steps

# A pass's value in a series: a float (NaN or ±inf when the gradient was not finite), or
# None: no .grad after that pass (or no single-number loss).
Value = float | None


class Series(NamedTuple):
    """One line of the picture: a name (a leaf, or a module path), the leaves it sums, and its
    value in each pass."""

    name: str
    leaves: tuple[str, ...]
    values: tuple[Value, ...]


def finite_positive(x: Value) -> bool:
    """Drawable on a log scale."""
    return x is not None and math.isfinite(x) and x > 0


def non_finite(x: Value) -> bool:
    return x is not None and not math.isfinite(x)


def _norm(step: LeafStep | None) -> Value:
    if step is None:
        return None
    if not step.finite and math.isfinite(step.norm):
        return math.nan  # a non-finite .grad whose norm came out finite still counts as one
    return step.norm


def module_norm(norms: Sequence[Value]) -> Value:
    """A module's gradient norm in one pass: the square root of the sum of its leaves' squared
    norms (the norm of all its gradients as one vector). NaN when one is not finite; None when
    none of its leaves has a .grad."""
    present = [x for x in norms if x is not None]
    if not present:
        return None
    if any(not math.isfinite(x) for x in present):
        return math.inf if all(x == math.inf for x in present if not math.isfinite(x)) \
            else math.nan
    return math.sqrt(math.fsum(x * x for x in present))


def grad_series(steps: Steps, by_module: bool = False) -> list[Series]:
    """A series per leaf, in the order first seen; by_module: a series per module (a leaf
    outside any module stands for itself), in the order its first leaf was seen."""
    rows = list(steps.grads)  # read once: a watched run's are in a file
    per_leaf = [tuple(_norm(row[i]) if i < len(row) else None for row in rows)
                for i in range(len(steps.leaves))]
    if not by_module:
        return [Series(name, (name,), values)
                for name, values in zip(steps.leaves, per_leaf, strict=True)]
    return [Series(name, tuple(steps.leaves[i] for i in members),
                   tuple(module_norm([per_leaf[i][p] for i in members])
                         for p in range(len(steps.grads))))
            for name, members in _groups(steps).items()]


def _groups(steps: Steps) -> dict[str, list[int]]:
    """Each module's leaves (a leaf outside any module: its own), in the order first seen."""
    groups: dict[str, list[int]] = {}
    for i, (leaf, module) in enumerate(zip(steps.leaves, steps.modules, strict=True)):
        groups.setdefault(module if module is not None else leaf, []).append(i)
    return groups


class Brief(NamedTuple):
    """A series as a picture of a long run needs it, not its values: its marks (width
    buckets, as bucketed makes them), its first and last value, its finite extremes, whether
    it is drawn on a log scale, and the pass (1-based) it was first NaN or inf."""

    name: str
    leaves: tuple[str, ...]
    marks: list[Value]
    first: Value
    last: Value
    low: Value
    high: Value
    log: bool
    first_bad: int | None


class _Briefing:
    """A Brief made a value at a time."""

    def __init__(self, bounds: list[tuple[int, int]], pick: Callable[[list[float]], float]
                 ) -> None:
        self.ends, self.pick = [end for _, end in bounds], pick
        self.marks: list[Value] = []
        self.part: list[float] = []
        self.first: Value = None
        self.last: Value = None
        self.low: Value = None
        self.high: Value = None
        self.positive = self.negative = False
        self.first_bad: int | None = None

    def add(self, p: int, x: Value) -> None:
        """The value of pass p (0-based), the passes before it given."""
        if p == self.ends[len(self.marks)]:
            self._close()
        if x is None:
            return
        self.part.append(x)
        self.first = x if self.first is None else self.first
        self.last = x
        if not math.isfinite(x):
            self.first_bad = p + 1 if self.first_bad is None else self.first_bad
            return
        self.low = x if self.low is None else min(self.low, x)
        self.high = x if self.high is None else max(self.high, x)
        self.positive, self.negative = self.positive or x > 0, self.negative or x < 0

    def brief(self, name: str, leaves: tuple[str, ...]) -> Brief:
        while len(self.marks) < len(self.ends):
            self._close()
        return Brief(name, leaves, self.marks, self.first, self.last, self.low, self.high,
                     self.positive and not self.negative, self.first_bad)

    def _close(self) -> None:
        self.marks.append(_mark(self.part, self.pick))
        self.part = []


def grad_briefs(steps: Steps, by_module: bool, width: int) -> list[Brief]:
    """grad_series(steps, by_module) in brief (marks: max of each bucket), made a row at a
    time: a long run's rows, read back from a file, are never all held at once."""
    groups = _groups(steps) if by_module else {
        leaf: [i] for i, leaf in enumerate(steps.leaves)}
    bounds = bucket_bounds(len(steps.grads), width)
    making = [_Briefing(bounds, max) for _ in groups]
    members = list(groups.values())
    for p, row in enumerate(steps.grads):
        norms = [_norm(g) for g in row]
        for briefing, leaves in zip(making, members, strict=True):
            values = [norms[i] if i < len(norms) else None for i in leaves]
            briefing.add(p, module_norm(values) if by_module else values[0])
    return [briefing.brief(name, tuple(steps.leaves[i] for i in leaves))
            for briefing, (name, leaves) in zip(making, groups.items(), strict=True)]


def loss_brief(steps: Steps, width: int) -> Brief | None:
    """loss_series(steps) in brief (marks: the mean of each bucket); None without a loss."""
    if all(x is None for x in steps.loss):
        return None
    briefing = _Briefing(bucket_bounds(len(steps.loss), width), mean)
    for p, x in enumerate(steps.loss):
        briefing.add(p, x)
    return briefing.brief("loss", ())


def loss_series(steps: Steps) -> Series | None:
    """The loss of each pass; None when no pass had a single-number loss."""
    if all(x is None for x in steps.loss):
        return None
    return Series("loss", (), tuple(steps.loss))


def log_scale(values: Sequence[Value]) -> bool:
    """Whether values are drawn on a log scale: when none is negative and one is positive
    (a gradient norm always; a loss when it is never below zero)."""
    numbers = [x for x in values if x is not None and math.isfinite(x)]
    return all(x >= 0 for x in numbers) and any(x > 0 for x in numbers)


Row = TypeVar("Row", Series, Brief)


def chosen(rows: list[Row], limit: int | None) -> list[Row]:
    """rows, or limit - 1 of them and room for the "… more" line: those with a NaN or inf
    chosen first (none hides behind "… more"), the rest in order, all in their order."""
    if limit is None or len(rows) <= limit:
        return rows
    room = max(limit - 1, 1)
    bad = [i for i, s in enumerate(rows) if (s.first_bad is not None if isinstance(s, Brief)
                                              else any(non_finite(x) for x in s.values))][:room]
    good = [i for i in range(len(rows)) if i not in set(bad)][:room - len(bad)]
    return [rows[i] for i in sorted(bad + good)]


def first_non_finite(series: Series) -> int | None:
    """The pass (1-based) where series was first NaN or inf."""
    return next((p for p, x in enumerate(series.values, 1) if non_finite(x)), None)


def bucket_bounds(count: int, width: int) -> list[tuple[int, int]]:
    """count passes in at most width buckets of consecutive passes, [start, end) each, sizes
    differing by at most one."""
    if count <= width:
        return [(i, i + 1) for i in range(count)]
    return [(count * b // width, count * (b + 1) // width) for b in range(width)]


def bucketed(values: Sequence[Value], width: int,
             pick: Callable[[list[float]], float] = max) -> list[Value]:
    """values in at most width buckets: a bucket is non-finite (NaN or inf) when one of its
    passes was, else pick of its values (max: a spike is never averaged away), else None."""
    return [_mark([x for x in values[start:end] if x is not None], pick)
            for start, end in bucket_bounds(len(values), width)]


def _mark(part: list[float], pick: Callable[[list[float]], float]) -> Value:
    """A bucket's mark: its first non-finite value, else pick of its values, else None."""
    bad = [x for x in part if not math.isfinite(x)]
    return bad[0] if bad else pick(part) if part else None


def mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)
