"""Which named .grad a pass changed, from what to what: summarised on the tensors' device
as the pass starts and ends (so later in-place changes of .grad cannot reach the numbers),
read when the pass's detail is shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from ...compat.torch import tensor_version
from ...extract.summary import Pending, read_summaries, summaries_now
from ...extract.tensors import Named
from ...extract.walk import readable_grad
from ...model.records import GradChange, GradSummary
from .base import Observer, Part, PassState, Recording


@dataclass(frozen=True)
class GradChangesPart(Part):
    """Each named .grad before the first pass (None: it had none)."""

    grad_before: dict[str, GradSummary | None]


class GradBefore(NamedTuple):
    """A named tensor's .grad as a pass starts, to tell afterwards whether the pass changed it."""

    name: str
    tensor: torch.Tensor
    grad: torch.Tensor | None
    version: int | None
    summary: Pending | None


# A .grad change not read yet: the name, its summaries before and after (None: no .grad)
PendingChange = tuple[str, Pending | None, Pending | None]


def grads_before(named: Named) -> list[GradBefore]:
    """Each named tensor's .grad as a pass starts, summarised (not read) in one go."""
    grads = [(name, t, readable_grad(t)) for name, t in named]
    held = iter(summaries_now([g for _, _, g in grads if g is not None]))
    return [GradBefore(name, t, g, None if g is None else tensor_version(g),
                       None if g is None else next(held)) for name, t, g in grads]


def changed_grads(before: list[GradBefore], swapped: dict[str, Any]) -> list[PendingChange]:
    """The named tensors whose .grad the pass changed (read off the tensor a name was
    swapped to, if it was), with their .grad now summarised (not read): called as the pass
    ends, before the code's next line runs."""
    changed = []
    for b in before:
        new = readable_grad(swapped.get(b.name, b.tensor))
        if not (new is b.grad and (new is None or tensor_version(new) == b.version)):
            changed.append((b, new))
    after = iter(summaries_now([new for _, new in changed if new is not None]))
    return [(b.name, b.summary, None if new is None else next(after)) for b, new in changed]


def read_changes(changes: Sequence[PendingChange]) -> list[GradChange]:
    """The .grad changes, from what to what, read in one go."""
    pending = [s for _, before, after in changes for s in (before, after) if s is not None]
    read = iter(read_summaries(pending))
    return [GradChange(name, None if before is None else next(read),
                       None if after is None else next(read))
            for name, before, after in changes]


class GradChanges(Observer):
    """Which named .grad each pass in detail changed; the .grads before the first pass."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self._first: dict[str, Pending | None] | None = None  # read with the trace
        self._before: list[GradBefore] = []

    def start(self, p: PassState) -> None:
        self._before = grads_before(p.named) if p.detailed else []  # a light step keeps none
        if self._first is None:
            self._first = {b.name: b.summary for b in self._before}

    def finish(self, p: PassState) -> None:
        if p.detailed:  # read with the trace, if it is shown then
            p.record.pending_changes = changed_grads(self._before, p.swapped)
        self._before = []

    def captured(self, given: Any) -> GradChangesPart:
        """Read what passes in detail summarised as they ran (the recorder read their batch)."""
        for p in self.recorder.passes:
            if p.pending_changes:
                p.grad_changes, p.pending_changes = read_changes(p.pending_changes), []
        first = self._first or {}
        read = iter(read_summaries([s for s in first.values() if s is not None]))
        return GradChangesPart({name: None if s is None else next(read)
                                for name, s in first.items()})
