"""Which leaves the stepping optimizers hold, and which of the leaves backward reached they
miss: a layer in a plain list, a head added after the optimizer was built; and the frozen
parameters they hold."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import torch

from ...compat.torch import is_dtensor
from ...extract.tensors import Named
from ...model.facts import FrozenHeld, NotOptimized
from ...model.records import Steps
from ..naming.setup_lines import (
    Where,
    attribute_line,
    freezing_line,
    name_head,
    names_in_containers,
    on_purpose,
)
from ..naming.sharded import submodules


class Held:
    """The leaves the stepping optimizers hold (by id), the leaves backward reached (weakly:
    a leaf that dies is forgotten), and the lines that built the optimizers."""

    def __init__(self) -> None:
        self.steps = 0
        self.ids: set[int] = set()
        self.frozen: set[int] = set()  # held, and frozen when their optimizer first stepped
        self.scale_free: set[int] = set()  # held by one whose update ignores the grad's size
        self.reached: dict[int, weakref.ref[Any]] = {}
        # each frozen one's name when a pass first named it, and it (weakly): the code may
        # bind the name again before it ends (`model = torch.load(best)`)
        self.frozen_named: dict[int, tuple[str, weakref.ref[Any]]] = {}
        self.lines: dict[Where, None] = {}  # the lines that built the stepping optimizers
        self.sharded = False  # a stepping optimizer holds DTensors (FSDP2): no coverage
        self._seen: dict[int, tuple[Any, int]] = {}  # id(optimizer) -> (a ref, its count)

    def stepped(self, optimizer: Any, params: list[Any], built: Where) -> None:
        """An optimizer steps: its parameters are read when it is new or they changed."""
        self.steps += 1
        seen = self._seen.get(id(optimizer))
        if seen is not None and seen[0]() is optimizer and seen[1] == len(params):
            return
        try:
            ref: Any = weakref.ref(optimizer)
        except TypeError:  # an optimizer with __slots__ and no __weakref__
            ref = functools.partial(lambda o: o, optimizer)
        self._seen[id(optimizer)] = (ref, len(params))
        tensors = [t for t in params if isinstance(t, torch.Tensor)]
        self.frozen.update(id(t) for t in tensors if id(t) not in self.ids and not t.requires_grad)
        self.ids.update(map(id, tensors))
        self.scale_free.update(id(t) for group in getattr(optimizer, "param_groups", ())
                               if _scale_free(optimizer, group)
                               for t in group.get("params", ()))
        self.lines.setdefault(built)
        self.sharded = self.sharded or any(is_dtensor(t) for t in tensors[:1])

    def holds(self, t: Any) -> bool:
        return id(t) in self.ids

    def stepping(self) -> frozenset[int] | None:
        """The leaves (by id) the stepping optimizers hold; None before a step, and for
        sharded ones (no coverage)."""
        return frozenset(self.ids) if self.steps and not self.sharded else None

    def marked(self, steps: Steps, leaf_ids: list[int]) -> Steps:
        """steps with Steps.optimized (empty when stepping() is None) and Steps.scale_free
        of its leaves (by id) as they stand now."""
        held = self.stepping()
        return replace(steps, optimized=() if held is None else tuple(
            i in held for i in leaf_ids), scale_free=tuple(i in self.scale_free for i in leaf_ids))

    def name_frozen(self, named: Named) -> None:
        """Note the names a pass gives the frozen ones not named yet."""
        if len(self.frozen_named) < len(self.frozen):
            for name, t in named:
                if id(t) in self.frozen and id(t) not in self.frozen_named:
                    self.frozen_named[id(t)] = (name, weakref.ref(t))

    def reached_by(self, leaves: Iterable[Any], pending: dict[int, Any]) -> list[int]:
        """The ids of a pass's leaves, each noted as reached (and, once it dies, dropped from
        what is reached and from pending)."""
        ids, reached = [], self.reached
        for t in leaves:
            ids.append(i := id(t))
            if i not in reached:
                reached[i] = weakref.ref(t, functools.partial(_forget, reached, pending, i))
        return ids


# Optimizers whose update does not grow with the gradient's size: those that divide it by its
# running size (a param group with "eps": torch's Adam family, RMSprop, Adagrad, Adadelta;
# transformers' Adafactor; Accelerate's and Lightning's wrappers show their groups) and those
# that take its sign. A module whose gradient is 10,000 times smaller than another's (a
# freshly made attention's query and key) learns as fast under them.
SIGN_BASED = frozenset({"Rprop", "Lion"})


def _scale_free(optimizer: Any, group: Any) -> bool:
    return isinstance(group, dict) and ("eps" in group or type(optimizer).__name__ in SIGN_BASED)


def _forget(reached: dict[int, Any], pending: dict[int, Any], key: int, _: Any) -> None:
    reached.pop(key, None)
    pending.pop(key, None)


def coverage_facts(held: Held, named: Named, objects: Sequence[tuple[str, Any]],
                   lines: list[str]) -> list[Any]:
    """NotOptimized for the leaves backward reached that no stepping optimizer holds (parts
    of a model one trains: not a solver's inputs, not a model trained by hand); FrozenHeld for
    the held parameters frozen from the first step to the end."""
    if not held.steps or held.sharded:
        return []
    leaves = [(name, t) for name, t in named if isinstance(t, torch.Tensor) and t.is_leaf]
    modules = {path for path, _ in submodules(objects)}
    loose = [name for name, t in leaves
             if t.requires_grad and id(t) in held.reached and not held.holds(t)
             and (isinstance(t, torch.nn.Parameter) or name.rpartition(".")[0] in modules)]
    seen = {id(t) for _, t in leaves}
    unnamed = {i: t for i, ref in list(held.reached.items()) if i not in held.ids
               and i not in seen and isinstance(t := ref(), torch.nn.Parameter)}
    if unnamed:
        loose.extend(names_in_containers(objects, unnamed))
    # parts of a model an optimizer trains (another, trained by hand, is not); when no
    # named model is held at all (rebuilt since), every one
    owners = {name_head(name) for name, t in leaves if held.holds(t)}
    loose = [name for name in loose if not owners or name_head(name) in owners]
    facts: list[Any] = []
    if loose:
        built = next(iter(held.lines), (None, None))
        facts.append(NotOptimized(tuple(loose), held.steps,
                                  *attribute_line(lines, tuple(loose), built), *built))
    frozen = tuple(name for name, t in leaves
                   if id(t) in held.frozen and not t.requires_grad)
    frozen += tuple(name for i, (name, ref) in held.frozen_named.items()  # named no more
                    if i not in seen and (t := ref()) is not None and not t.requires_grad)
    if frozen:
        line, code = freezing_line(lines, frozen)
        facts.append(FrozenHeld(frozen, held.steps, line, code,
                                code is not None and on_purpose(lines, line)))
    return facts

