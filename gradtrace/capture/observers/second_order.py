"""Second derivatives of a scalar root with respect to the named leaves (`show --order 2`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ...extract.summary import shape_of
from ...extract.tensors import Named
from ...model.records import SecondOrder
from .base import Ending, Observer, Part, PassState, Recording


@dataclass(frozen=True)
class SecondOrderPart(Part):
    """--order 2's second derivatives (None: not asked for, or no root had a graph)."""

    second_order: SecondOrder | None


HESSIAN_LIMIT = 64  # leaf elements in all; the Hessian has this many squared entries at most
PLAIN = "the Hessian is computed for plain real tensors only"


def second_derivatives(root: torch.Tensor, root_name: str | None, named: Named) -> SecondOrder:
    """d2 root / da db for every pair of named leaves the root depends on.

    Uses torch.autograd.grad with create_graph=True and retain_graph=True, so neither the
    graph nor any .grad of the scenario changes.
    """
    name = root_name or "output"
    leaves = [(n, t) for n, t in named if t.is_leaf and t.requires_grad]
    if root.numel() != 1:
        return SecondOrder(name, (), {}, f"{name} is not a scalar "
                           f"(shape {list(shape_of(root))})")
    if root.grad_fn is None or not leaves:
        return SecondOrder(name, (), {}, f"{name} has no graph to differentiate")
    if root.is_complex():
        return SecondOrder(name, (), {}, f"{name} is complex: {PLAIN}")
    try:
        firsts = torch.autograd.grad(root, [t for _, t in leaves], create_graph=True,
                                     retain_graph=True, allow_unused=True)
    except RuntimeError as exc:  # e.g. the graph was freed: say so instead of failing the run
        return SecondOrder(name, (), {}, str(exc).splitlines()[0])
    used = [(n, t, g) for (n, t), g in zip(leaves, firsts, strict=True) if g is not None]
    odd = next((f"{n} is {kind}" for n, t, _ in used if (kind := _unsupported(t))), None)
    if odd is not None:
        return SecondOrder(name, tuple(n for n, _, _ in used), {}, f"{odd}: {PLAIN}")
    size = sum(t.numel() for _, t, _ in used)
    if size > HESSIAN_LIMIT:
        return SecondOrder(name, tuple(n for n, _, _ in used), {},
                           f"the leaves have {size} elements; the Hessian is shown for at "
                           f"most {HESSIAN_LIMIT}")
    return SecondOrder(name, tuple(n for n, _, _ in used), _blocks(used))


def _unsupported(t: torch.Tensor) -> str | None:
    """Why a leaf's second derivatives are not read (nested, complex), or None."""
    if t.is_nested:
        return "a nested tensor"
    return "complex" if t.is_complex() else None


def _dense(t: torch.Tensor) -> torch.Tensor:
    """t with its elements in a strided tensor (a sparse leaf's gradient is sparse)."""
    return t if t.layout == torch.strided else t.to_dense()


def _blocks(used: list[tuple[str, torch.Tensor, torch.Tensor]]
            ) -> dict[tuple[str, str], Any]:
    """The Hessian's block of every pair of leaves, as nested lists."""
    tensors = [t for _, t, _ in used]
    blocks = {}
    for a, ta, ga in used:
        rows: list[list[torch.Tensor]] = []  # rows[i][j]: d(ga.flat[i]) / d tensors[j]
        for element in _dense(ga).reshape(-1):
            seconds: tuple[torch.Tensor | None, ...] = (None,) * len(tensors)
            if element.requires_grad:  # else the first derivative is constant: zeros
                seconds = torch.autograd.grad(element, tensors, retain_graph=True,
                                              allow_unused=True)
            rows.append([_dense(torch.zeros_like(t) if s is None else s.detach())
                         for s, t in zip(seconds, tensors, strict=True)])
        for j, (b, tb, _) in enumerate(used):
            shape = tuple(ta.shape) + tuple(tb.shape)
            block = torch.stack([row[j] for row in rows]).reshape(shape) if rows \
                else torch.zeros(shape)  # a leaf without elements: an empty block
            blocks[(a, b)] = block.tolist()
    return blocks


class SecondDerivatives(Observer):
    """`--order 2`: the second derivatives of the first pass's root (or --root's, once it
    exists)."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self.result: SecondOrder | None = None

    @property
    def pending(self) -> bool:
        """Asked for and not made yet: the next pass names every tensor."""
        return self.result is None and self.recorder.options.derivative_order == 2

    def start(self, p: PassState) -> None:
        if self.pending and p.roots:
            asked = self.recorder.options.roots[0] if self.recorder.options.roots else None
            root, name = (p.roots[0], p.record.root_names[0]) if asked is None else next(
                ((t, n) for n, t in p.named if n == asked and t.grad_fn is not None),
                (None, None))
            if root is not None:
                with self.recorder.gate.own_calls():
                    self.result = second_derivatives(root, name, p.named)

    def ended(self, end: Ending) -> None:
        """A script that ran no pass: the derivatives of the first root."""
        if self.pending and end.outputs and not end.stopped:
            name, root = end.outputs[0]
            with self.recorder.gate.own_calls():
                self.result = second_derivatives(root, name, end.named)

    def captured(self, given: Any) -> SecondOrderPart:
        return SecondOrderPart(self.result)
