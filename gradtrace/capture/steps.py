"""The light statistics of every pass: each named leaf's .grad after it (norm, max |g|,
finite, and whether the pass added to a .grad nothing had reset), the loss, and how many
optimizer steps were taken since the pass before. Cheap enough for every step of a loop."""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from ..compat.torch import foreach_norms, never_compiled, tensor_version
from ..extract.tensors import Named
from ..model.records import LeafStep, Steps

# A leaf's .grad as a pass begins or ends: the tensor (weakly: never kept alive for this)
# and its version counter.
GradState = tuple["weakref.ref[torch.Tensor]", int] | None
# A leaf's values when first seen: the tensor (weakly), its version and the sum of its values.
Fingerprint = tuple["weakref.ref[torch.Tensor]", int, str | None]


class StepLog:
    """A row per pass, a column per named leaf that requires grad (in the order first seen)."""

    def __init__(self) -> None:
        self.columns: dict[str, int] = {}  # leaf name -> its column
        self.leaf_ids: list[int] = []  # id() of each column's latest tensor: its module
        self.loss: list[float | None] = []
        self.optimizer_steps: list[int] = []
        self.rows: list[list[LeafStep | None]] = []
        self._stepped = 0  # optimizer steps taken so far
        self._stepped_at_last_pass = 0
        self._at_end: dict[str, GradState] = {}  # each leaf's .grad as the last pass ended
        self._first: dict[str, Fingerprint] = {}  # each leaf's values as first seen
        # the latest GradScaler.scale(loss) output and its scaler: the loss is its value
        # divided by the scale, as the script computed it
        self._scaled: tuple[weakref.ref[torch.Tensor], Any] | None = None

    @contextlib.contextmanager
    def counting_optimizer_steps(self) -> Iterator[None]:
        """Count every torch.optim optimizer step while the block runs (a public global hook)."""
        handle = register_optimizer_step_post_hook(self._count)
        try:
            yield
        finally:
            handle.remove()

    @never_compiled
    def _count(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stepped += 1

    def note_scaled(self, output: Any, scaler: Any) -> None:
        """GradScaler.scale(loss) returned output: a pass from it has the loss × the scale."""
        if isinstance(output, torch.Tensor):
            self._scaled = (weakref.ref(output), scaler)

    def leaves_of(self, named: Named) -> list[tuple[str, torch.Tensor]]:
        """The named leaves that require grad, each given its column."""
        leaves = [(n, t) for n, t in named if t.is_leaf and t.requires_grad]
        for name, t in leaves:
            column = self.columns.get(name)
            if column is None:
                self.columns[name] = len(self.columns)
                self.leaf_ids.append(id(t))
                self._first[name] = _fingerprint(t)
            else:  # the latest tensor under the name (bound again: a new model's)
                self.leaf_ids[column] = id(t)
        return leaves

    def untouched(self, leaves: list[tuple[str, torch.Tensor]]) -> list[GradState]:
        """Each leaf's .grad as this pass begins, when nothing changed it since the last pass
        ended (no zero_grad, no reset); else None."""
        states = []
        for name, t in leaves:
            g, end = t.grad, self._at_end.get(name)
            states.append(_state(g) if g is not None and end is not None and end[0]() is g
                          and end[1] == tensor_version(g) else None)
        return states

    def add(self, leaves: list[tuple[str, torch.Tensor]], untouched: list[GradState],
            roots: Sequence[Any], changed: set[str]) -> None:
        """The row of the pass that just ran; changed: the leaves whose .grad it changed (a
        .grad it left alone keeps its last row's statistics)."""
        row: list[LeafStep | None] = [None] * len(self.columns)
        last = self.rows[-1] if self.rows else []
        read: list[tuple[int, torch.Tensor, bool]] = []  # (column, .grad, kept): read now
        for (name, t), start in zip(leaves, untouched, strict=True):
            g, column = t.grad, self.columns[name]
            self._at_end[name] = None if g is None else _state(g)
            if g is None:
                continue
            previous = last[column] if column < len(last) else None
            if name not in changed and previous is not None and start is not None:
                # untouched since the last pass ended, and by this one: the same values
                row[column] = previous._replace(kept=False)
                continue
            # the same tensor, added to: autograd accumulated into what the last pass left
            read.append((column, g, start is not None and start[0]() is g
                         and tensor_version(g) != start[1]))
        for (column, _, kept), brief in zip(read, _briefs([g for _, g, _ in read]),
                                            strict=True):
            row[column] = None if brief is None else LeafStep(*brief, kept=kept)
        self.rows.append(row)
        self.loss.append(_loss(roots, self._scaled))
        self.optimizer_steps.append(self._stepped - self._stepped_at_last_pass)
        self._stepped_at_last_pass = self._stepped

    def changed(self, named: Named) -> frozenset[str]:
        """The leaves whose values are not what they were when a pass first named them
        (same tensor, a new version or sum): trained, or updated without autograd."""
        changed = set()
        for name, t in named:
            first = self._first.get(name)
            if first is not None and first[0]() is t and _fingerprint(t)[1:] != first[1:]:
                changed.add(name)
        return frozenset(changed)

    def steps(self, modules: dict[int, str]) -> Steps | None:
        """The Steps record (modules: id(leaf) -> the path of the module it belongs to)."""
        if not self.rows:
            return None
        width = len(self.columns)
        return Steps(
            leaves=tuple(self.columns), modules=tuple(map(modules.get, self.leaf_ids)),
            loss=tuple(self.loss), optimizer_steps=tuple(self.optimizer_steps),
            grads=tuple(tuple(row) + (None,) * (width - len(row)) for row in self.rows),
            optimizer_steps_after=self._stepped - self._stepped_at_last_pass)


def _fingerprint(t: torch.Tensor) -> Fingerprint:
    """The tensor (weakly), its version, and the sum of its values as text ("nan" equals
    itself): `.data` writes keep the version, so the sum tells those apart."""
    d = t.detach()
    try:
        d = torch.view_as_real(d) if d.is_complex() else d  # (casting would warn)
        total = repr(float(d.sum(dtype=torch.float64)))
    except (RuntimeError, TypeError, NotImplementedError):  # meta, quantized
        total = None
    return weakref.ref(t), tensor_version(t), total


def _state(g: torch.Tensor) -> GradState:
    return weakref.ref(g), tensor_version(g)


def _loss(roots: Sequence[Any], scaled: tuple[weakref.ref[torch.Tensor], Any] | None = None
          ) -> float | None:
    """The pass's one root's value, when it is one real number; divided by the scale when
    the root is a GradScaler's scaled loss (scaled: the latest, with its scaler)."""
    if len(roots) != 1 or not isinstance(roots[0], torch.Tensor):
        return None
    root = roots[0]
    if root.numel() != 1 or not root.is_floating_point() or root.is_meta:
        return None
    if scaled is not None and scaled[0]() is root:
        return float(root.detach()) / scaled[1].get_scale()
    return float(root.detach())


def _briefs(grads: list[torch.Tensor]) -> list[tuple[float, float, bool] | None]:
    """(norm, max |g|, finite) of each gradient, read in one go (None: values that cannot be
    read: meta, quantized)."""
    out: list[tuple[float, float, bool] | None] = [None] * len(grads)
    together = [i for i, g in enumerate(grads) if _plain(g, grads[0].device)]
    if len(together) < 2 or not _read_together(grads, together, out):
        together = []
    taken = set(together)
    norms: list[torch.Tensor] = []  # float64, one per gradient read
    ends: list[torch.Tensor] = []  # [min, max] as float64, one pair per gradient read
    where: list[int] = []
    for i in range(len(grads)):
        if i in taken:
            continue
        try:
            read = _norm_and_ends(grads[i])
        # Any tensor may be a .grad (nested, a subclass whose methods raise): none may stop
        # the run; its row says it has no statistics.
        except Exception:  # noqa: BLE001
            read = None
        if read is not None:
            norms.append(read[0])
            ends.append(read[1])
            where.append(i)
    if where:
        read_norms = torch.stack(norms).tolist()
        read_ends = torch.stack(ends).tolist()
        for i, norm, (lo, hi) in zip(where, read_norms, read_ends, strict=True):
            finite = math.isfinite(lo) and math.isfinite(hi)  # min and max hold NaN and inf
            top = max(hi, -lo) if lo == lo and hi == hi else math.nan
            out[i] = (norm, top, finite)
    return out


def _plain(g: torch.Tensor, device: torch.device) -> bool:
    """A dense tensor of real numbers on device, of torch's own type: its norms can be read
    with the others' in one call."""
    return type(g) is torch.Tensor and g.layout == torch.strided and g.device == device \
        and g.is_floating_point() and g.numel() > 0 and not g.is_meta


def _read_together(grads: list[torch.Tensor], where: list[int],
                   out: list[tuple[float, float, bool] | None]) -> bool:
    """Fill out[i] for i in where with (norm, max |g|, finite), read in two calls; False when
    this torch cannot."""
    chosen = [grads[i] for i in where]
    try:
        norms = foreach_norms(chosen, 2.0, torch.float64)  # float64: a norm cannot overflow
        tops = foreach_norms(chosen, math.inf, torch.float64)  # NaN and inf propagate
        if norms is None or tops is None:
            return False
        read = zip(torch.stack(norms).tolist(), torch.stack(tops).tolist(), strict=True)
    except Exception:  # noqa: BLE001 - one tensor at a time then, as for any odd .grad
        return False
    for i, (norm, top) in zip(where, read, strict=True):
        out[i] = (norm, top, math.isfinite(top))
    return True


def _norm_and_ends(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A gradient's norm (float64, so it cannot overflow) and its [min, max] (of |g| when
    complex; of the stored values when sparse), as CPU tensors."""
    if g.is_meta or g.is_quantized:
        return None
    g = g.detach()
    if g.layout != torch.strided:
        g = g.coalesce().values() if g.is_sparse else g.values()
    if g.is_complex():
        g = g.abs()
    if not g.numel():
        zero = torch.zeros((), dtype=torch.float64)
        return zero, torch.zeros(2, dtype=torch.float64)
    flat = g.reshape(-1)
    lo, hi = torch.aminmax(flat if g.is_floating_point() else flat.double())
    return (torch.linalg.vector_norm(flat, dtype=torch.float64).cpu(),
            torch.stack((lo, hi)).to(torch.float64).cpu())
