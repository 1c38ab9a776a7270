"""The light statistics of every pass: each named leaf's .grad after it (norm, max |g|,
finite, and whether the pass added to a .grad nothing had reset), the loss, and how many
optimizer steps were taken since the pass before. Computed on the gradients' device as the
pass ends (what the code does to .grad afterwards cannot reach them) and read in batches:
cheap enough for every step of a loop, with no host-device synchronisation."""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from ...compat.torch import never_compiled, tensor_version
from ...extract.tensors import Named
from ...model.records import LeafStep, Steps
from ...model.spilled import SpilledRows
from . import step_stats
from .base import Observer, Part, PassState, Recording
from .readback import Readback
from .step_columns import ColumnsTaken
from .step_rows import PENDING, SAME, resolved_rows, row_finite
from .step_stats import Carried, Fingerprint, GradState, Scaled, grad_state


@dataclass(frozen=True)
class StepsPart(Part):
    """The steps' statistics; the leaves whose values changed, and those bound again."""

    steps: Steps | None
    updated: frozenset[str]
    fresh: frozenset[str]
    step_leaf_ids: tuple[int, ...]  # id() of each column's tensor, the last pass's


class StepLog(Observer):
    """A row per pass, a column per named leaf that requires grad (in the order first seen)."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self.readback = Readback()  # reads the rows' numbers, in batches
        self.columns: dict[str, int] = {}  # leaf name -> its column
        self.leaf_ids: list[int] = []  # id() of each column's latest tensor: its module
        self._taken = ColumnsTaken()  # which column each leaf took
        self._owners: list[str | None] = []  # a parameter's module, as its name says
        self.loss: list[float | None] = []
        self.optimizer_steps: list[int] = []
        # LeafStep, None (no .grad, or none readable), PENDING or SAME until steps(); with a
        # listener, the rows from _base on (those before went to _spilled once read)
        self.rows: list[list[Any]] = []
        self._base = 0
        self._spilled: SpilledRows | None = None
        self._stepped = 0  # optimizer steps taken so far
        self._stepped_at_last_pass = 0
        self.not_finite_read = 0  # rows read so far that hold a .grad not finite
        self._at_end: dict[str, GradState] = {}  # each leaf's .grad as the last pass ended
        self._first: dict[str, Fingerprint] = {}  # each leaf's values as first seen
        # GradScaler.scale(loss)'s latest output, its loss and scale (its gradients' factor)
        self._scaled: Scaled | None = None
        self.loss_scale: list[float | None] = []  # a pass's scale, once read
        self.loss_divisor: list[float | None] = []  # k of a pass from `loss / k`
        self.closure_call: list[int | None] = []  # the optimizer closure call a pass ran in
        self._divided: tuple[torch.Tensor, float] | None = None  # read before backward
        # each pass's leaves, their .grads as it began, and those changed in place since
        # the pass before (clipped, unscaled, zeroed): slot -> whether non-zero, once read
        self._pass: tuple[list[tuple[str, torch.Tensor]], list[GradState], Carried] = \
            ([], [], {})
        self._carried: dict[int, bool] = {}
        self._slots = 0
        self._unread: list[int] = []  # per row of self.rows, its vectors not read yet
        self._settled = 0  # the rows told as read (RunListener.read)
        self._settled_last: tuple[LeafStep | None, ...] = ()  # the last of them

    def start(self, p: PassState) -> None:
        leaves = self.leaves_of(p.named)
        untouched, changed = step_stats.as_left(leaves, self._at_end)
        self._pass = leaves, untouched, self.carried(changed)
        one = p.roots[0] if len(p.roots) == 1 and not p.record.batched else None
        self._divided = step_stats.divided_of(one, self._scaled, self.recorder.marks.packed)

    def finish(self, p: PassState) -> None:
        p.record.row = self._base + len(self.rows)
        leaves, untouched, carried = self._pass
        if p.swapped:  # by the names the pass gave (not its columns': they may be others)
            now = {id(t): p.swapped[n] for n, t in p.named if n in p.swapped}
            for name, t in leaves:
                if id(t) in now:  # its module is the latest tensor's
                    self.leaf_ids[self.columns[name]] = id(now[id(t)])
            leaves = [(name, now.get(id(t), t)) for name, t in leaves]
        # inside torch.func transforms the root is a batched wrapper: no loss read
        self.add(leaves, untouched, carried, () if p.record.batched else p.roots)
        self.closure_call.append(p.record.closure_call)
        self._pass = ([], [], {})

    def captured(self, given: Any) -> StepsPart:
        seen = dict(zip(self.columns, ids := tuple(self.leaf_ids), strict=True))  # last pass's
        return StepsPart(self.steps(given.modules), self.changed(given.named), frozenset(
            n for n, t in given.named if seen.get(n, id(t)) != id(t)), ids)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Count every torch.optim optimizer step while the block runs (a public global hook)."""
        with register_optimizer_step_post_hook(self._count):  # its handle removes it
            yield

    @never_compiled
    def _count(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stepped += not self.recorder.gate.elsewhere()

    def note_scaled(self, output: Any, loss: Any, scale: Any) -> None:
        """GradScaler.scale(loss) returned output, loss × scale: a pass from it has loss, and
        gradients scale times those the optimizer will step with."""
        self._scaled = step_stats.scaled(output, loss, scale, self.recorder.marks.packed) \
            or self._scaled

    def leaves_of(self, named: Named) -> list[tuple[str, torch.Tensor]]:
        """The named leaves that require grad, each under the name of the column it takes."""
        leaves = self._taken.names([(n, t) for n, t in named if t.is_leaf and t.requires_grad])
        summed: dict[torch.device, list[tuple[Fingerprint, torch.Tensor]]] = {}
        for name, t in leaves:
            column = self.columns.get(name)
            if column is None:
                self.columns[name] = len(self.columns)
                self.leaf_ids.append(id(t))
                self._owners.append(name.rpartition(".")[0]
                                    if isinstance(t, torch.nn.Parameter) else None)
                first = self._first[name] = [weakref.ref(t), tensor_version(t), None]
                total = step_stats.sum_now(t)
                if total is not None:
                    summed.setdefault(total.device, []).append((first, total))
            else:  # the latest tensor under the name (bound again: a new model's)
                self.leaf_ids[column] = id(t)
        for sums in summed.values():  # the values as first seen, read with the rows
            self.readback.later(torch.stack([total for _, total in sums]),
                                partial(step_stats.fill_sums, [first for first, _ in sums]))
        return leaves

    def carried(self, chosen: list[tuple[str, torch.Tensor]]) -> Carried:
        """The .grads the last pass left, changed in place since (clipped, unscaled, zeroed):
        by name, the tensor, its version and the slot that says, once read, whether it was
        non-zero as this pass began (a pass adding to it adds to what the step before used)."""
        carried: Carried = {}
        for values, indices in step_stats.norms_now([g for _, g in chosen]):
            slots = list(range(self._slots, self._slots + len(indices)))
            self._slots += len(indices)
            for i, slot in zip(indices, slots, strict=True):
                name, g = chosen[i]
                carried[name] = (weakref.ref(g), tensor_version(g), slot)
            self.readback.later(values, partial(self._fill_carried, slots))
        return carried

    def _fill_carried(self, slots: list[int], values: list[float]) -> None:
        for slot, norm in zip(slots, values, strict=True):
            self._carried[slot] = norm != 0.0  # NaN counts: it was not reset

    def add(self, leaves: list[tuple[str, torch.Tensor]], untouched: list[GradState],
            carried: Carried, roots: Sequence[Any]) -> None:
        """The row of the pass that just ran, computed on the gradients' device and read
        later (a .grad untouched since the last pass ended, and by this one, keeps its last
        row's statistics)."""
        row: list[Any] = [None] * len(self.columns)
        self._unread.append(0)
        last = self.rows[-1] if self.rows else []
        read: list[tuple[int, torch.Tensor, bool | int]] = []  # (column, .grad, kept)
        for (name, t), start in zip(leaves, untouched, strict=True):
            g, column = t.grad, self.columns[name]
            self._at_end[name] = None if g is None else grad_state(g)
            if g is None:
                continue
            previous = last[column] if column < len(last) else None
            # the same tensor as the last pass left, untouched since (start), and by this one
            untouched_too = start is not None and start[0]() is g
            added_to = start is not None and untouched_too and tensor_version(g) != start[1]
            if untouched_too and not added_to and previous is not None:
                row[column] = SAME  # the same values
                continue
            # added to: autograd accumulated into what the last pass left; or into what it
            # left changed in place since, if that was not zero (read later: its slot)
            changed = carried.get(name)
            kept: bool | int = added_to
            if changed is not None and changed[0]() is g and tensor_version(g) != changed[1]:
                kept = changed[2]
            read.append((column, g, kept))
        self.rows.append(row)
        self.loss.append(None)
        self.loss_scale.append(None)
        loss, scale = step_stats.loss_of(roots, self._scaled)
        divided = self._divided if loss is not None else None  # (scaled or not)
        self.loss_divisor.append(None if divided is None else divided[1])
        loss = loss if divided is None else divided[0].reshape(())
        at = len(self.loss) - 1  # the row's, of all rows
        if scale is not None:  # the row's norms are divided by it
            self._later(scale, partial(step_stats.fill_scale, self.loss_scale, at))
        for values, indices, with_loss in step_stats.briefs_now([g for _, g, _ in read], loss):
            chosen = [(read[i][0], read[i][2]) for i in indices]
            for column, _ in chosen:
                row[column] = PENDING
            self._later(values, partial(self._fill_row, row, chosen, self.loss
                                        if with_loss else None, at))
        self.optimizer_steps.append(self._stepped - self._stepped_at_last_pass)
        self._stepped_at_last_pass = self._stepped

    def _later(self, values: Any, reader: Callable[[list[float]], None]) -> None:
        """reader gets the values once read; the latest row waits for them (only a listener
        asks which rows were read: without one, nothing is counted in a pass)."""
        if self.recorder.options.listener is None:
            self.readback.later(values, reader)
            return
        at = self._base + len(self.rows) - 1  # rows before it may go meanwhile
        self._unread[-1] += 1

        def read(numbers: list[float]) -> None:
            reader(numbers)
            self._unread[at - self._base] -= 1

        self.readback.later(values, read)

    def _fill_row(self, row: list[Any], chosen: list[tuple[int, bool | int]],
                  losses: list[float | None] | None, at: int, values: list[float]) -> None:
        """Put the read (norms..., (min, max) of each...) of the chosen (column, kept) into
        row, and the loss after them into losses[at] (None: the vector holds no loss)."""
        count = len(chosen)
        all_finite = True
        for k, (column, kept) in enumerate(chosen):
            lo, hi = values[count + 2 * k], values[count + 2 * k + 1]
            finite = math.isfinite(lo) and math.isfinite(hi)  # min and max hold NaN and inf
            if not isinstance(kept, bool):  # read in an earlier vector: its slot's answer
                kept = self._carried.pop(kept, False)
            row[column] = LeafStep(values[k], max(hi, -lo) if lo == lo and hi == hi
                                   else math.nan, finite, kept)
            all_finite = all_finite and finite
        self.not_finite_read += not all_finite
        if losses is not None:
            losses[at] = values[3 * count]

    def changed(self, named: Named) -> frozenset[str]:
        """The leaves whose values are not what they were when a pass first named them
        (same tensor, a new version or sum): trained, or updated without autograd."""
        self.readback.read()
        return frozenset(name for name, t in named if (first := self._first.get(name))
                         is not None and first[0]() is t
                         and step_stats.moved(step_stats.fingerprint(t), first[1:]))

    def steps(self, modules: dict[int, str]) -> Steps | None:
        """The Steps record (modules: id(leaf) -> the path of the module it belongs to)."""
        if not self.loss:
            return None
        self.readback.read()
        if self._spilled is not None:  # a listener was told them: each row went to the file
            self.read_since()
            self._spilled.width = len(self.columns)  # a row read before a column: None in it
        return self._part(slice(None), self._spilled if self._spilled is not None else tuple(
            resolved_rows(self.rows, self.loss_scale, (), len(self.columns))), tuple(
            modules.get(i, o if self._first[n][0]() is None else None)  # a dead module: its
            for n, i, o in zip(self.columns, self.leaf_ids, self._owners, strict=True)))

    def read_since(self) -> tuple[int, Steps] | None:
        """The rows read since the last call as Steps (modules as their names say), with the
        first's 0-based row (None: none); into a temporary file, memory keeping the last."""
        end, idle = self._settled, not self.readback.pending  # idle: the rest stay unread
        while end - self._base < len(self.rows) and (idle or not self._unread[end - self._base]):
            end += 1
        if end == self._settled:
            return None
        first, self._settled = self._settled, end
        grads = resolved_rows(self.rows[first - self._base:end - self._base],
                              self.loss_scale[first:end], self._settled_last, len(self.columns))
        self._settled_last = grads[-1]
        self._spilled = self._spilled if self._spilled is not None else SpilledRows()
        self._spilled.extend(grads)
        if end - 1 > self._base:  # the last read row stays, as read: a SAME after it is it
            del self.rows[:end - 1 - self._base], self._unread[:end - 1 - self._base]
            self._base, self.rows[0] = end - 1, list(self._settled_last)
        return first, self._part(slice(first, end), tuple(grads), tuple(self._owners))

    def _part(self, part: slice, grads: Sequence[tuple[LeafStep | None, ...]],
              modules: tuple[str | None, ...]) -> Steps:
        """The Steps of the rows in part, as read (grads)."""
        scales, divisors = self.loss_scale[part], self.loss_divisor[part]
        calls = self.closure_call[part]
        return Steps(tuple(self.columns), modules, tuple(self.loss[part]),
                     tuple(self.optimizer_steps[part]), grads,
                     self._stepped - self._stepped_at_last_pass,
                     loss_scale=tuple(scales) if any(scales) else (),
                     loss_divisor=tuple(divisors) if any(divisors) else (),
                     closure_call=tuple(calls) if any(calls) else ())

    def finite(self, row: int) -> bool | None:
        """Whether every .grad of the row is finite (None: not read yet)."""
        if self._spilled is not None and row < self._base:
            return all(g is None or g.finite for g in self._spilled[row])
        return row_finite(self.rows, row - self._base)
