"""In-place changes to tensors saved for backward: which tensor, the line that made it and
the line that changed it."""

from __future__ import annotations

import linecache
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from ...compat.torch import NO_SEQUENCE, sequence_number, tensor_version
from ...extract.tensors import Named
from ...extract.walk import SavedCache, node_type, release, saved_reader, snapshot_saved, walk
from ...model.facts import SavedChanged
from ...model.records import SavedTensor, Source
from ..naming.statements import changed_in_place_after, changes_something_in_place
from .base import Ending, Host, InplaceModule, Observer, Part, PassState, Recording


@dataclass(frozen=True)
class SavedPart(Part):
    """The saved tensors read before a backward freed them (None: not read at all)."""

    saved_before: SavedCache | None


# Where a saved input sits among its node's inputs, by the name the node saved it under
_SLOT = {"self": 0, "input": 0, "other": 1}


def changed_saved(nodes: list[Any], saved_of: Callable[[Any], tuple[SavedTensor, ...]],
                  ) -> list[tuple[Any, str]]:
    """(node, saved name) for every saved tensor changed in place since it was saved."""
    return [(node, s.name) for node in nodes for s in saved_of(node)
            if s.status == "modified in place"]


# Note [the in-place op's node]
# An in-place op on a tensor that needs grad (x += r, x.relu_(), nn.ReLU(inplace=True)) makes
# a node whose first input is the edge the tensor had, and makes the tensor's grad_fn that
# node: every op on the tensor after it takes the new node, none the old edge. So of the
# nodes that took a saved tensor's edge as their first input after its node saved it, the
# one made last (autograd's sequence numbers count nodes as they are made) is the in-place
# op that changed it, or none changed it where autograd saw (under no_grad): told only when
# the line that made that node, or the module that did, changes something in place. No
# cost before a saved tensor is found changed; the line log gives the node's line, so a
# loop's light step (no line noted) is told without it, as a change autograd did not see is.


def saved_edge(node: Any, saved: str) -> tuple[Any, int] | None:
    """The (node, output) edge the tensor node saved as `saved` had when it was saved: its
    own output for its result, the input's edge for a saved input (None: not known)."""
    if saved == "result":
        return node, 0
    slot, inputs = _SLOT.get(saved), node.next_functions
    if slot is None or slot >= len(inputs) or inputs[slot][0] is None:
        return None
    edge: tuple[Any, int] = inputs[slot]
    return edge


Takers = dict[tuple[int, int], list[Any]]  # (id(node), output) -> the nodes taking it first


def first_takers(nodes: list[Any]) -> Takers:
    """The nodes by the edge each takes as its first input (an in-place op's: the tensor it
    changed)."""
    takers: Takers = {}
    for node in nodes:
        inputs = node.next_functions
        if inputs and inputs[0][0] is not None:
            takers.setdefault((id(inputs[0][0]), inputs[0][1]), []).append(node)
    return takers


def in_place_node(node: Any, saved: str, takers: Takers) -> Any | None:
    """The node of the op that changed in place what node saved as `saved`, among the nodes
    of takers (see Note [the in-place op's node]); None when none of them can be it."""
    edge, after = saved_edge(node, saved), sequence_number(node)
    if edge is None or after == NO_SEQUENCE:
        return None
    found, latest = None, after
    for other in takers.get((id(edge[0]), edge[1]), ()):
        number = sequence_number(other)
        if latest < number != NO_SEQUENCE:
            found, latest = other, number
    return found


class ChangedAt(NamedTuple):
    """The scenario line that changed a saved tensor in place, and the inplace=True module
    it called that did, if one did."""

    line: Source
    module: InplaceModule | None


def changed_at(changer: Any, host: Host) -> ChangedAt | None:
    """The line that made changer, when that line (or the library line below it) changes
    something in place or the module that made changer was built with inplace=True."""
    line, library = (None, None) if changer is None else host.lines_of(changer)
    if line is None:
        return None
    module = host.inplace_module_of(changer)
    if module is not None or changes_something_in_place(line.code) or (
            library is not None and changes_something_in_place(library.code)):
        return ChangedAt(line, module)
    return None


def saved_changed(node: Any, saved: str, named: Named, takers: Takers,
                  host: Host) -> SavedChanged:
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
    made = host.source_of(node)
    found = changed_at(changer if changer is not None else in_place_node(node, saved, takers),
                       host)
    changed = None if found is None else found.line
    if changed is None and changer is not None:
        changed = host.source_of(changer)
    if changed is None and saved == "result" and made is not None:
        # a tensor no name holds now (a local of forward()): the line after the one that
        # made it that changed, in place, the name that line bound
        at = changed_in_place_after(linecache.getlines(made.file), made.line)
        changed = None if at is None else Source(made.file, at, linecache.getline(
            made.file, at).strip())
    module = None if found is None else found.module
    return SavedChanged(name, node_type(node), saved, made, changed, id(node),
                        inplace_module=None if module is None else module.kind,
                        inplace_path=None if module is None else module.path)


def same_tensor_saved_twice(changed: list[tuple[Any, str]]) -> set[tuple[int, str]]:
    """(id(node), saved name) of each input saved as self, input or other that is the result
    another changed node saved: the same tensor (`g = sigmoid(x); y = g * h; g.mul_(2)`),
    told once, as that result."""
    results = {id(node) for node, saved in changed if saved == "result"}
    twice = set()
    for node, saved in changed:
        slot = _SLOT.get(saved)
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
        # holds the nodes (released by release()); never reads what a hook packed
        self.saved_before = SavedCache(recorder.marks.packed)
        self._checked: dict[int, Any] = {}  # checked nodes (held: their ids stay unique)
        self._told: set[tuple[str | None, ...]] = set()  # told_as(…) of the facts told

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

    def captured(self, given: Any) -> SavedPart:
        return SavedPart(self.saved_before if self.recorder.options.saved else None)

    def release(self) -> None:
        self.saved_before.clear()
        self._checked.clear()

    def ended(self, end: Ending) -> None:
        """When no pass read the graph's saved tensors: those changed in place in the graph
        behind the roots (what the trace reads, its facts say)."""
        if not end.outputs or self.recorder.passes or not self.recorder.options.saved:
            return
        order = walk([t.grad_fn for _, t in end.outputs if isinstance(t, torch.Tensor)])[0]
        self.check(order, end.named, force=True)
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
        # results first, each in the order the forward made them: a line that changed many
        # (a residual block's, run by every block) is told at the first it changed
        told: dict[tuple[str | None, ...], int] = {}  # this check's: where in facts
        facts: list[SavedChanged] = []
        takers = first_takers(nodes) if changed else {}
        for node, saved in sorted(changed, key=lambda c: (c[1] != "result",
                                                           sequence_number(c[0]))):
            if id(node) in self._checked or (id(node), saved) in twice:
                continue
            self._checked[id(node)] = node
            fact = saved_changed(node, saved, named, takers, self.recorder.host)
            key = told_as(fact)
            if key in told:  # one more tensor its line changed: counted on the first's fact
                first = facts[told[key]]
                facts[told[key]] = first._replace(others=first.others + 1)
            elif key is None or key not in self._told:
                if key is not None:
                    told[key] = len(facts)
                    self._told.add(key)
                facts.append(fact)
        for fact in facts:
            self.recorder.tell(fact)


def told_as(fact: SavedChanged) -> tuple[str | None, ...] | None:
    """What makes two facts one: the line that changed their tensors, else the named tensor
    (None: nothing, an unnamed tensor changed at a line not known)."""
    if fact.changed is not None:
        return fact.changed.file, str(fact.changed.line)
    return None if fact.tensor is None else (fact.tensor,)

