"""Which named .grad a pass changed, from what to what: read before and after it, summarised
when the pass is kept (a loop's let-go-of steps never are)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..compat.torch import tensor_version
from ..extract.build import RawPass
from ..extract.summary import summarize_all
from ..extract.tensors import Named
from ..extract.walk import readable_grad
from ..model.records import GradChange, GradSummary


class GradBefore(NamedTuple):
    """A named tensor's .grad as a pass starts, to tell afterwards whether the pass changed it."""

    name: str
    tensor: torch.Tensor
    grad: torch.Tensor | None
    version: int | None
    summary: GradSummary | None


def grads_before(named: Named) -> list[GradBefore]:
    """Each named tensor's .grad as a pass starts, summarised in one go."""
    grads = [(name, t, readable_grad(t)) for name, t in named]
    held = iter(summarize_all([g for _, _, g in grads if g is not None]))
    return [GradBefore(name, t, g, None if g is None else tensor_version(g),
                       None if g is None else next(held)) for name, t, g in grads]


def changed_grads(before: list[GradBefore]) -> list[tuple[GradBefore, torch.Tensor | None]]:
    """The named tensors whose .grad the pass changed, and their .grad now."""
    changed = []
    for b in before:
        new = readable_grad(b.tensor)
        if not (new is b.grad and (new is None or tensor_version(new) == b.version)):
            changed.append((b, new))
    return changed


def summarised(changed: list[tuple[GradBefore, torch.Tensor | None]]) -> list[GradChange]:
    """The .grad changes, from what to what."""
    after = iter(summarize_all([new for _, new in changed if new is not None]))
    return [GradChange(b.name, b.summary, None if new is None else next(after))
            for b, new in changed]


def pending_summarised(p: RawPass) -> list[GradChange]:
    """A pass's pending .grad changes summarised now; a .grad changed in place since (a
    zero_grad(set_to_none=False)) is said to be so, not read as if it were the pass's."""
    unchanged = [g for _, _, g, version in p.pending_changes
                 if g is not None and tensor_version(g) == version]
    after = iter(summarize_all(unchanged))
    return [GradChange(name, before, None if g is None else next(after)
                       if tensor_version(g) == version else GradSummary(
                           tuple(g.shape), float("nan"), None, None, True, None,
                           "values unavailable (changed in place after the pass)"))
            for name, before, g, version in p.pending_changes]
