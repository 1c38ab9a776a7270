"""Gradient summaries: shape, norm, min, max, finiteness, and the values of small tensors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from ..compat.torch import local_shard, shard_count
from ..gcpause import gc_paused
from ..model.records import GradSummary, Shape
from ..model.values import flat_values
from .blocks import widened_stats

VALUES_LIMIT = 64  # tensors with at most this many elements keep their values
_BLAS = (torch.float32, torch.float64)


class StatsTable:
    """(squared norm, min, max) of many gradients: computed where the gradients live, read
    as Python floats in one go when a row is first asked for (never one read per gradient).

    Why not keep three 0-d tensors per gradient until then: in a backward hook, hundreds of
    small tensors kept alive between the engine's gradient buffers fragment the heap, and
    every large gradient after them lands on fresh pages (page faults cost more than the
    statistics). So every few gradients the pending 0-d tensors are stacked into one (on
    their device, not read) and freed.
    """

    STACK = 16 * 3

    def __init__(self, stack: int | None = STACK) -> None:
        """stack: how many pending tensors are stacked into one at once (None: none until
        read: a pass's few .grads summarised as it ends)."""
        self._pending: list[torch.Tensor] = []
        self._stacked: list[torch.Tensor] = []  # float64 vectors, not read yet
        self._floats: list[float] = []  # the rows read
        self._size = 0  # how many statistics were added (3 a row)
        self._stack_at = stack

    def add(self, square: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> int:
        """Keep one gradient's statistics; returns its row."""
        pending = self._pending
        pending += (square, lo, hi)
        row = self._size // 3
        self._size += 3
        if len(pending) == self._stack_at:
            self._stack()
        return row

    def row(self, i: int) -> list[float]:
        """Squared norm, min and max of row i."""
        if self._pending or self._stacked:
            self._read()
        return self._floats[3 * i:3 * i + 3]

    def with_zeros(self, i: int) -> int:
        """A new row: row i's statistics for its elements with zeros added (what a select or
        slice sends back: the same norm; min and max take in 0 unless they are NaN)."""
        square, lo, hi = self.row(i)
        self._floats += (square, lo if lo != lo else min(lo, 0.0),
                         hi if hi != hi else max(hi, 0.0))
        self._size += 3
        return self._size // 3 - 1

    def _stack(self) -> None:
        pending = self._pending
        if len({t.dtype for t in pending}) > 1:  # torch.stack wants one dtype
            pending = [t.double() for t in pending]
        self._stacked.append(torch.stack(pending).to(torch.float64))
        self._pending = []

    def _read(self) -> None:
        """Every row not read yet, read: one copy for all when they share a device."""
        if self._pending:
            self._stack()
        stacked, self._stacked = self._stacked, []
        if len({t.device for t in stacked}) == 1:
            stacked = [torch.cat(stacked)]
        for values in stacked:
            self._floats += values.tolist()


class StatsRow(NamedTuple):
    """Where a gradient's (squared norm, min, max) went: a row of a StatsTable."""

    table: StatsTable
    row: int


class RawStats(NamedTuple):
    """A gradient as a hook keeps it: shape, and its statistics' row or (small) its values."""

    shape: Shape
    place: StatsRow | None
    values: torch.Tensor | complex | None  # a number for a 0-d gradient (no clone)
    is_complex: bool = False  # its statistics are of |z|
    local_shard: bool = False  # a DTensor's local shard was read
    shards: int = 0  # the ranks it is split among, each element on one (0: not so, or not known)


def shape_of(t: torch.Tensor) -> Shape:
    """t's shape as plain data: ints, and "ragged" for a nested tensor's ragged dimension.

    Not torch's "j1": that numbers nested tensors in the order the process made them, so a
    second trace of one script in one process would say "j2" (and diff see a change)."""
    if not t.is_nested:
        return tuple(t.shape)
    if t.layout == torch.strided:
        return tuple(_size_or_ragged(t, i) for i in range(t.dim()))
    return tuple(d if isinstance(d, int) else plain_size(d) for d in t.shape)


def plain_size(size: Any) -> int | str:
    """A size of a shape that is not an int (a SymInt): its int, or "ragged" (a jagged
    tensor's ragged size, torch's nested int "j1", has none)."""
    try:
        return int(size)
    except (AttributeError, RuntimeError, TypeError):  # a nested int has no value
        return "ragged"


def _size_or_ragged(t: torch.Tensor, dim: int) -> int | str:
    try:
        return int(t.size(dim))
    except RuntimeError:  # "Given dimension 1 is irregular and does not have a size."
        return "ragged"


def is_dense(t: torch.Tensor) -> bool:
    """Whether t's elements fill one block of memory: contiguous, or a transpose/permute of
    a contiguous tensor."""
    if t.is_contiguous():
        return True
    expected = 1
    for stride, size in sorted(zip(t.stride(), t.shape, strict=True)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def dense_flat(t: torch.Tensor) -> torch.Tensor | None:
    """A 1-D view of a dense tensor's block of memory, else None. Norm, min and max do not
    care about element order, and reducing a flat block is several times faster."""
    if t.is_contiguous():
        return t.view(-1)
    return t.as_strided((t.numel(),), (1,)) if is_dense(t) else None


def grad_stats(t: torch.Tensor, table: StatsTable) -> RawStats:
    """Shape, where in table its (squared norm, min, max) went, and a copy of small values.

    Cheap enough for a backward hook: two passes over the data, no sync, no reference to t
    kept. A BLAS dot gives the squared norm at about half vector_norm's cost.
    """
    d = t.detach() if t.requires_grad else t
    if type(d) is not torch.Tensor and (local := local_shard(d)) is not None:
        return grad_stats(local, table)._replace(local_shard=True, shards=shard_count(d))
    if d.is_nested:  # a ragged shape holds no nested list: statistics of its elements only
        flat = torch.cat([c.reshape(-1) for c in d.unbind()])
        return _table_stats(flat, table)._replace(shape=shape_of(d))
    if d.numel() <= VALUES_LIMIT:  # the statistics are computed from the values, later
        if not d.dim() and type(d) is torch.Tensor and d.layout == torch.strided \
                and d.device.type == "cpu" and not d.is_quantized:
            return RawStats((), None, d.item())  # a number: no tensor to clone and keep
        return RawStats(tuple(d.shape), None,
                        (d.to_dense() if d.layout != torch.strided else d).clone())
    if d.dtype in _BLAS and d.layout == torch.strided and d.is_contiguous():  # hot: kept short
        flat = d.view(-1) if d.dim() != 1 else d
        lo, hi = torch.aminmax(flat)
        row = table.add(torch.dot(flat, flat), lo, hi)
        return RawStats(tuple(d.shape), StatsRow(table, row), None)
    return _table_stats(d, table)


def _table_stats(d: torch.Tensor, table: StatsTable) -> RawStats:
    """grad_stats of any tensor, its statistics added to table (no values kept)."""
    if d.layout != torch.strided:
        d = d.to_dense()
    is_complex = d.is_complex()
    if is_complex:
        d = d.abs()
    # half precision would sum squares in half precision: widen it, like integers (a big
    # one a block at a time: no widened copy of it whole)
    wide = torch.float64 if not d.is_floating_point() else torch.float32
    found = None if d.dtype in _BLAS else widened_stats(d, wide)
    if found is not None:
        return RawStats(tuple(d.shape), StatsRow(table, table.add(*found)), None, is_complex)
    f = d if d.dtype in _BLAS else d.to(wide)
    dense = dense_flat(f)
    lo, hi = torch.aminmax(f if dense is None else dense)
    square = torch.linalg.vector_norm(f).square() if dense is None else torch.dot(dense, dense)
    return RawStats(tuple(d.shape), StatsRow(table, table.add(square, lo, hi)), None,
                    is_complex)


@gc_paused
def to_summaries(raws: Sequence[RawStats | None]) -> list[GradSummary | None]:
    """GradSummaries of grad_stats results (shared ones once)."""
    made: dict[int, GradSummary] = {}
    for raw in raws:
        if raw is None or id(raw) in made:
            continue
        shape, place, values, is_complex, local, shards = raw
        if place is None:
            assert values is not None  # grad_stats keeps one or the other
            if type(values) is float:  # a 0-d gradient's number: the common case, short
                norm = values if values > 0 else abs(values)  # one float object, if it can
                made[id(raw)] = GradSummary((), norm, values, values, math.isfinite(values),
                                            values)
                continue
            if not isinstance(values, torch.Tensor):  # a complex number
                made[id(raw)] = _small_summary(shape, values)
                continue
            try:
                made[id(raw)] = _small_summary(shape, values.tolist())._replace(
                    local_shard=local, shards=shards)
            except Exception as exc:  # noqa: BLE001 - as in summarize: say why, never crash
                made[id(raw)] = unavailable(values, exc)
            continue
        square, lo, hi = place.table.row(place.row)
        norm = math.sqrt(square) if square >= 0 else square  # NaN stays NaN
        # min and max propagate NaN and hold any infinity, so they alone tell finiteness
        made[id(raw)] = GradSummary(shape, norm, lo, hi,
                                    math.isfinite(lo) and math.isfinite(hi),
                                    is_complex=is_complex, local_shard=local,
                                    shards=shards)
    return [None if raw is None else made[id(raw)] for raw in raws]


def _small_summary(shape: Shape, listed: Any) -> GradSummary:
    items = flat_values(listed)
    is_complex = any(isinstance(v, complex) for v in items)
    if is_complex:
        listed = None  # JSON has no complex numbers: statistics of |z| only
    flat = [abs(v) if isinstance(v, complex) else float(v) for v in items]
    if not flat:
        return GradSummary(shape, 0.0, None, None, True, listed, is_complex=is_complex)
    lo, hi = min(flat), max(flat)
    if any(v != v for v in flat):  # min/max in Python skip NaN, torch's propagate it
        lo = hi = float("nan")
    norm = math.sqrt(math.fsum(v * v for v in flat))
    return GradSummary(shape, norm, lo, hi, all(math.isfinite(v) for v in flat), listed,
                       is_complex=is_complex)


def summarize(t: torch.Tensor) -> GradSummary:
    """Shape, norm, min, max and finiteness of a tensor; its values when it is small. A tensor
    whose data cannot be read gets a summary that says why instead."""
    try:
        summary = to_summaries([grad_stats(t, StatsTable())])[0]
    # Any tensor may come here (meta, quantized, nested, subclasses whose methods raise): none
    # may crash a report, so whatever reading it raises is turned into the reason.
    except Exception as exc:  # noqa: BLE001
        return unavailable(t, exc)
    assert summary is not None
    return summary


# A summary as a pass ends: statistics computed where the tensor lives, not read yet
Pending = RawStats | GradSummary


def summaries_now(tensors: Sequence[torch.Tensor]) -> list[Pending]:
    """Each tensor's statistics computed now, on its device, and not read (no sync): what
    the code does to the tensors afterwards (zero_(), a clip, an optimizer step) cannot
    reach them. read_summaries() reads them, all of one table in one go."""
    table = StatsTable(stack=None)
    pending: list[Pending] = []
    for t in tensors:
        try:
            pending.append(grad_stats(t, table))
        except Exception as exc:  # noqa: BLE001 - as in summarize: say why, never crash
            pending.append(unavailable(t, exc))
    return pending


def read_summaries(pending: Sequence[Pending]) -> list[GradSummary]:
    """The GradSummaries of summaries_now() results."""
    made = iter(to_summaries([p for p in pending if isinstance(p, RawStats)]))
    read = []
    for p in pending:
        summary = p if isinstance(p, GradSummary) else next(made)
        assert summary is not None  # to_summaries gives one for each RawStats
        read.append(summary)
    return read


def unavailable(t: torch.Tensor, exc: Exception) -> GradSummary:
    """The summary of a tensor whose values cannot be read, saying why."""
    shape: Shape
    try:
        shape = shape_of(t)
    except Exception:  # noqa: BLE001 - a broken subclass
        shape = ()
    why = ("a meta tensor has no data" if t.is_meta else "quantized" if t.is_quantized
           else f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return GradSummary(shape, float("nan"), None, None, True, None,
                       f"values unavailable ({why[:200]})")
