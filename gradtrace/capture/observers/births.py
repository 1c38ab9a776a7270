"""Where a forward's NaN or Inf was born: read off the values the graph saved for backward,
before backward frees them, at the first pass whose root (the loss) is not finite, or at the
end for a named tensor no backward ran from (code that raises at its first NaN loss). Every
pass in detail whose root is not finite also notes the nodes whose saved values are not
finite: the NaN their gradients carry came from the forward, not from their derivative.

Cost: a pass asks whether its roots are finite only when that needs no wait for a device
(roots on the CPU), or when it may wait (DetailPlan.may_wait: in detail; in a watched run only
once a .grad was read not finite); nothing more happens unless one is not.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch

from ...compat.torch import sequence_number, unseen_by_modes
from ...extract.births import Birth, not_finite, plain, search
from ...extract.tensors import Named
from ...extract.walk import node_type, release, structure, walk
from ...model.facts import NonFiniteBorn
from ...model.records import Node, Source
from .base import Ending, Observer, PassState, Recording, lines_made


def bad_roots(roots: list[Any], any_device: bool) -> list[torch.Tensor]:
    """The roots with a graph whose values are not finite: only those on the CPU are asked
    unless any_device (asking a GPU's waits for it)."""
    if len(roots) == 1 and type(roots[0]) is torch.Tensor and roots[0].is_cpu \
            and roots[0].layout == torch.strided and not roots[0].is_nested \
            and roots[0].numel() == 1 and roots[0].is_floating_point():
        # a loop's every pass: a loss on the CPU, asked in a microsecond
        loss = roots[0]
        if loss.grad_fn is None:
            return []
        with unseen_by_modes():  # the script's own modes count only its own calls
            return [] if math.isfinite(loss.item()) else [loss]
    asked = [t for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None
             and plain(t) and (any_device or t.device.type == "cpu")]
    if not asked:
        return []
    return [t for t, bad in zip(asked, not_finite(asked), strict=True) if bad]


def kind_of(t: torch.Tensor) -> Literal["NaN", "Inf"]:
    """Whether a tensor that is not finite holds a NaN, else an Inf."""
    with torch.no_grad():
        return "NaN" if bool(torch.isnan(t).any()) else "Inf"


class NonFiniteBirths(Observer):
    """The first birth of a NaN or Inf as a fact; each pass's nodes whose saved values are
    not finite in its record (carriers)."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self.told = False  # the first one is told: later ones are its consequences
        self._held: list[Any] = []  # the nodes the fact names by id() (ids stay unique)
        # the birth told without its line: (the fact, its node, its graph's signature, the
        # node's place in it, how many nodes it has)
        self._untraced: tuple[NonFiniteBorn, Any, int, int, int] | None = None

    def start(self, p: PassState) -> None:
        if p.record.batched or (self.told and not p.detailed):
            return
        if p.detailed and not p.may_wait and any(
                isinstance(r, torch.Tensor) and not r.is_cpu for r in p.roots):
            p.record.carriers = None  # unknown: asking would wait for the device
        roots = bad_roots(p.roots, any_device=p.may_wait)
        if not roots:
            return
        found = search(roots, p.nodes, p.edges, self._recomputes)
        first, self.told = not self.told, True  # the birth is searched for once; later,
        # only passes in detail note their carriers (a diverged loop's light passes: nothing)
        p.record.first_not_finite = first
        if found is None:
            return
        if p.detailed:
            p.record.carriers = {id(p.nodes[i]) for i in found.carriers}
        if first:
            names = {id(t): n for t, n in zip(p.roots, p.record.root_names, strict=False)}
            self._tell(found, p.nodes, p.record.signature, p.named, p.number,
                       (names.get(id(roots[0])), roots[0]), stopped=False)

    def ended(self, end: Ending) -> None:
        """After the run: the birth told without its line given the line of its twin in a
        later pass (a graph alike, in detail); when no pass told one, the birth of the NaN
        or Inf of the named losses (one number each) with a graph whose values are not
        finite (the topmost of them are the roots; any backward from them would have told
        it)."""
        if self._untraced is not None:
            self._placed(*self._untraced)
        if self.told:
            return
        named, stopped = end.named, end.stopped
        # made since the last pass began: no backward went through them (the graphs of
        # those made before are freed, their values gone)
        last = self.recorder.passes[-1].roots if self.recorder.passes else []
        since = max((sequence_number(r) for r in last if r is not None), default=-1)
        # a loss: one number (an attention's -inf mask is meant, not a NaN born)
        bad = {id(t) for t in bad_roots([t for _, t in named if not t.is_leaf
                                         and t.numel() == 1
                                         and sequence_number(t.grad_fn) > since], True)}
        if not bad:
            return
        roots = _topmost([(n, t) for n, t in named if id(t) in bad])
        order, edges = walk([t.grad_fn for _, t in roots])
        try:
            birth = search([t for _, t in roots], order, edges, self._recomputes)
            if birth is not None:
                self._tell(birth, order, structure(order, edges), named, None, roots[0],
                           stopped=stopped)
        finally:
            release(order)

    def release(self) -> None:
        self._held.clear()
        self._untraced = None

    def _recomputes(self, node: Any) -> bool:
        """A node made inside torch.utils.checkpoint or under saved_tensors_hooks: reading
        what it saved runs the unpack hook (recomputes a checkpointed region), so it is not
        read."""
        marks = self.recorder.marks
        return id(node) in marks.recomputed or marks.packed(node)

    def _tell(self, found: Birth, order: list[Any], signature: int, named: Named,
              number: int | None, root: tuple[str | None, torch.Tensor], stopped: bool) -> None:
        self.told = True
        node = order[found.position]
        twin = self._twin(signature, found.position, len(order), node)
        if found.origin == "parameter":
            tensor = next((n for n, t in named if t is found.leaf), None)
        else:
            tensor = next((n for n, t in named if t.grad_fn is not None and t.grad_fn is node),
                          None)
        self._held.append(node)
        fact = NonFiniteBorn(
            number, root[0], kind_of(root[1]), found.kind, found.origin, node_type(node),
            *self._made(node, twin), tensor, found.certain, stopped,
            len(self.recorder.passes) - (number is not None), id(node),
            unread_above=found.unread_above)
        self.recorder.tell(fact)
        if twin is None and fact.made is fact.library is fact.module is None:
            # a graph first met in a loop's light stretch: its forward ran untraced, and
            # the next pass over it is recorded in detail, its lines noted
            self._untraced = (fact, node, signature, found.position, len(order))

    def _placed(self, told: NonFiniteBorn, node: Any, signature: int, position: int,
                count: int) -> None:
        """The birth told without a line, told again with its twin's, when a pass in
        detail over a graph alike ran since (the code's facts keep their order)."""
        twin = self._twin(signature, position, count, node)
        if twin is None:
            return
        made, library, module = self._made(node, twin)
        placed = told._replace(made=made, library=library, module=module)
        facts = self.recorder.facts
        facts[:] = [placed if f is told else f for f in facts]

    def _made(self, node: Any, twin: Any) -> tuple[Source | None, Source | None, str | None]:
        """The line, the library's line and the module that made node, each as the host
        knows it, else as its twin's (a frozen twin's node record says its own)."""
        host = self.recorder.host
        module = host.module_of(node)
        if module is None and twin is not None:
            module = twin.module if isinstance(twin, Node) else host.module_of(twin)
        return (*lines_made(host, node, twin), module)

    def _twin(self, signature: int, position: int, count: int, node: Any) -> Any:
        """The node at the same place in the latest pass in detail over a graph alike (of
        count nodes, node at position in it): a light step's forward runs without its lines
        and modules noted, and its twin's were (a frozen pass's twin is its node record)."""
        for q in reversed(self.recorder.passes):
            if q.signature != signature:
                continue
            if len(q.nodes) == count and q.nodes[position] is not node:
                return q.nodes[position]
            if q.frozen is not None and len(q.frozen.nodes) == count:
                return q.frozen.nodes[position]
        return None


def _topmost(named: Named) -> Named:
    """The named tensors that no other one's graph goes through (those others are made
    from them), in their order: the roots of a search over them all."""
    order, edges = walk([t.grad_fn for _, t in named])
    try:
        used = {src for src, *_ in edges}
        position = {node: i for i, node in enumerate(order)}
        return [(n, t) for n, t in named if position[t.grad_fn] not in used]
    finally:
        release(order)
