"""In-place changes to tensors saved for backward: which tensor, the line that made it and
the line that changed it."""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any

import torch

from ...compat.torch import tensor_version
from ...extract.tensors import Named
from ...extract.walk import SavedCache, node_type, release, saved_reader, snapshot_saved, walk
from ...model.facts import SavedChanged
from ...model.records import SavedTensor, Source
from ..naming.statements import changed_in_place_after
from .base import Observer, PassState, Recording


def changed_saved(nodes: list[Any], saved_of: Callable[[Any], tuple[SavedTensor, ...]],
                  ) -> list[tuple[Any, str]]:
    """(node, saved name) for every saved tensor changed in place since it was saved."""
    return [(node, s.name) for node in nodes for s in saved_of(node)
            if s.status == "modified in place"]


def saved_changed(node: Any, saved: str, named: Named,
                  source_of: Callable[[Any], Source | None]) -> SavedChanged:
    """Which tensor node saved as `saved` and which line changed it in place, when told."""
    inputs = {id(child) for child, _ in node.next_functions if child is not None}
    name, changer = None, None
    for n, t in named:
        grad_fn = t.grad_fn
        if t.is_leaf or not tensor_version(t) or grad_fn is None:
            continue
        if grad_fn is node:  # changed where autograd does not see it (under no_grad)
            name = n
            break
        first = grad_fn.next_functions[0][0] if grad_fn.next_functions else None
        if first is not None and (first is node if saved == "result" else id(first) in inputs):
            name, changer = n, grad_fn  # the in-place op rebased the tensor onto a new node
            break
    made = source_of(node)
    changed = None if changer is None else source_of(changer)
    if changed is None and saved == "result" and made is not None:
        # a tensor no name holds now (a local of forward()): the line after the one that
        # made it that changed, in place, the name that line bound
        at = changed_in_place_after(linecache.getlines(made.file), made.line)
        changed = None if at is None else Source(made.file, at, linecache.getline(
            made.file, at).strip())
    return SavedChanged(name, node_type(node), saved, made, changed, id(node))


def same_tensor_saved_twice(changed: list[tuple[Any, str]]) -> set[tuple[int, str]]:
    """(id(node), saved name) of each input saved as self or other that is the result
    another changed node saved: the same tensor (`g = sigmoid(x); y = g * h; g.mul_(2)`),
    told once, as that result."""
    results = {id(node) for node, saved in changed if saved == "result"}
    twice = set()
    for node, saved in changed:
        slot = {"self": 0, "other": 1}.get(saved)
        inputs = node.next_functions
        if slot is not None and slot < len(inputs) and inputs[slot][0] is not None \
                and id(inputs[slot][0]) in results:
            twice.add((id(node), saved))
    return twice


class SavedTensors(Observer):
    """The saved tensors of passes in detail, read before backward frees them (with
    --saved), and a fact for each one changed in place."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self.saved_before: SavedCache = {}  # holds the nodes: released by release()
        self._checked: dict[int, Any] = {}  # checked nodes (held: their ids stay unique)
        self._told: set[tuple[str | None, int | None]] = set()  # (tensor, line)

    def start(self, p: PassState) -> None:
        if self.recorder.options.saved and p.detailed:
            snapshot_saved(self.saved_before, p.nodes)
        if not p.leaves_only:  # (a leaf changed in place fails autograd itself)
            self.check(p.nodes, p.named, detailed=p.detailed)  # before the pass: pre-flight

    def finish(self, p: PassState) -> None:
        if p.record.error_kind == "inplace":
            self.check(p.nodes, p.named, force=True)

    def forget(self, nodes: list[Any]) -> None:
        for node in nodes:
            self.saved_before.pop(node, None)

    def captured(self, given: Any) -> dict[str, Any]:
        return {"saved_before": self.saved_before if self.recorder.options.saved else None}

    def release(self) -> None:
        self.saved_before.clear()
        self._checked.clear()

    def check_from(self, roots: list[Any], named: Named) -> None:
        """A fact for each saved tensor changed in place in the graph behind roots."""
        order = walk([t.grad_fn for t in roots if isinstance(t, torch.Tensor)])[0]
        self.check(order, named, force=True)
        release(order)

    def check(self, nodes: list[Any], named: Named, force: bool = False,
              detailed: bool = True) -> None:
        """A fact for each saved tensor changed in place: read when saved tensors are read
        anyway (a pass in detail), when a named non-leaf was changed in place, or when the
        pass failed so."""
        if not (force or (self.recorder.options.saved and detailed)
                or any(tensor_version(t) and not t.is_leaf for _, t in named)):
            return
        changed = changed_saved(nodes, saved_reader(self.saved_before))
        # a tensor saved twice (its op's output, another op's input): one fact, the
        # "output of" one, which says where it was made
        twice = same_tensor_saved_twice(changed)
        for node, saved in sorted(changed, key=lambda c: c[1] != "result"):
            if id(node) in self._checked or (id(node), saved) in twice:
                continue
            self._checked[id(node)] = node
            fact = saved_changed(node, saved, named, self.recorder.host.source_of)
            key = (fact.tensor, None if fact.changed is None else fact.changed.line)
            if fact.tensor is None or key not in self._told:
                self._told.add(key)
                self.recorder.facts.append(fact)
