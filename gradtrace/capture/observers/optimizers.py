"""What the code's optimizers did with the gradients: zero_grad() calls that threw away a
backward's gradients before any step used them, steps and clipping that found no gradient
at all, and which leaves the optimizers hold (by torch's public optimizer hooks, and
wrappers on zero_grad and the clipping functions while the code runs)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from ...compat.torch import compiling, is_dtensor, never_compiled
from ...extract.tensors import Named
from ...model.facts import (
    ClipWithoutGradient,
    FrozenHeld,
    GradDiscarded,
    NotOptimized,
    StepWithoutGradient,
)
from ..naming.setup_lines import (
    Where,
    attribute_line,
    freezing_line,
    names_in_containers,
    on_purpose,
)
from .base import Observer, PassState, Recording

# A backward's mark on the leaves it reached: [a step used them, its number, its line]
Mark = list[Any]


class OptimizerUse(Observer):
    """The passes' gradients as the optimizers used, reset or clipped them."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        # AccumulateGrad's class: a pass's leaves are its nodes of that class
        probe: Any = torch.ones(1, requires_grad=True).view(1).grad_fn
        self._accumulate: Any = type(probe.next_functions[0][0])
        self._pending: dict[int, Mark] = {}  # id(leaf) -> the latest backward's mark on it
        # every leaf a backward accumulated into, by id() (weakly: never kept alive for this)
        self.reached: dict[int, weakref.ref[Any]] = {}
        self.held: set[int] = set()  # id() of every leaf a stepping optimizer holds
        self.sharded = False  # a stepping optimizer holds DTensors (FSDP2): no coverage
        self.steps = 0
        self.backwards = 0
        self._closure = 0  # inside an optimizer step given a closure (L-BFGS)
        self._discarded: dict[Where, list[Mark]] = {}  # by the zero_grad line
        self._thrown: dict[Where, set[int]] = {}  # id() of the leaves each line reset so
        self._before_step: dict[Where, int] = {}  # resets right before a step, by line
        self._pass_after: dict[Where, Where] = {}  # a discard's line -> its first backward's
        self._step_line: Where = (None, None)
        self._reset_since_pass: Where | None = None  # a discarding zero_grad since the pass
        self._passes_since_step = 0
        self._empty_steps: dict[Where, list[int]] = {}  # line -> [steps, after a backward]
        self._clips: dict[Where, list[int]] = {}  # line -> [empty clips, clips]
        self._built: dict[int, Where] = {}  # id(optimizer) -> the line that built it
        # each stepping optimizer's parameter count, as its parameters were last read
        self._seen: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.stepping: dict[Where, None] = {}  # the lines that built the stepping optimizers

    def finish(self, p: PassState) -> None:
        if p.record.kind != "backward" or p.error is not None:
            return
        self.backwards += 1
        self._passes_since_step += 1
        self._reset_since_pass = None
        if p.every_leaf:
            accumulate = self._accumulate
            leaves: Iterable[Any] = (n.variable for n in p.nodes if type(n) is accumulate)
        else:
            inputs = (p.given or {}).get("inputs")
            leaves = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or ())
        ids = []
        reached = self.reached
        for t in leaves:
            ids.append(i := id(t))
            if i not in reached:
                reached[i] = weakref.ref(t)
        if self._closure:
            return  # the step that called it uses its gradients
        mark: Mark = [False, p.number, (p.record.line, p.record.code)]
        pending = self._pending
        for i in ids:
            pending[i] = mark

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Follow every optimizer step, zero_grad() and clipping call while the block runs."""
        clip_module = importlib.import_module("torch.nn.utils.clip_grad")
        patches: list[tuple[Any, str, Callable[..., Any]]] = [
            (torch.optim.Optimizer, "__init__", self._building(torch.optim.Optimizer.__init__)),
            (torch.optim.Optimizer, "zero_grad", self._resetting(
                torch.optim.Optimizer.zero_grad,
                lambda o: [t for g in o.param_groups for t in g["params"]])),
            (torch.nn.Module, "zero_grad", self._resetting(
                torch.nn.Module.zero_grad, lambda m: list(m.parameters()))),
        ]
        for owner in (torch.nn.utils, clip_module):
            for name in ("clip_grad_norm_", "clip_grad_value_"):
                patches.append((owner, name, self._clipping(getattr(owner, name))))
        saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
        handles = [register_optimizer_step_pre_hook(self._step_begins),
                   register_optimizer_step_post_hook(self._step_ended)]
        try:
            for owner, name, wrapper in patches:
                setattr(owner, name, wrapper)
            yield
        finally:
            for handle in handles:
                handle.remove()
            for owner, name, original in saved:
                setattr(owner, name, original)

    @never_compiled
    def _step_begins(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if compiling():
            return
        params = [t for g in optimizer.param_groups for t in g["params"]]
        closure = _has_closure(args, kwargs)
        self._closure += closure
        self.steps += 1
        if self._seen.get(optimizer) != len(params):  # its parameters, once
            self._seen[optimizer] = len(params)
            self.held.update(map(id, params))
            self.stepping.setdefault(self._built.get(id(optimizer), (None, None)))
            self.sharded = self.sharded or (bool(params) and is_dtensor(params[0]))
        pending = self._pending
        empty = True
        for t in params:
            if pending:
                mark = pending.pop(id(t), None)
                if mark is not None:
                    mark[0] = True
            empty = empty and t.grad is None
        if not (empty and params):
            if self._reset_since_pass is not None:  # the step a discard came before
                self._step_line = self.recorder.caller_line()
        # a reset since the last backward: told with the zero_grad that did it (a closure
        # Lightning passes runs nothing); else an empty step, unless its closure makes the
        # gradients (L-BFGS)
        elif self._reset_since_pass is not None:
            self._step_line = self.recorder.caller_line()
            reset = self._reset_since_pass
            self._before_step[reset] = self._before_step.get(reset, 0) + 1
        elif not closure:
            counts = self._empty_steps.setdefault(self.recorder.caller_line(), [0, 0])
            counts[0] += 1
            counts[1] += self._passes_since_step > 0
        self._passes_since_step = 0

    @never_compiled
    def _step_ended(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._closure and not compiling() and _has_closure(args, kwargs):
            self._closure -= 1

    def _building(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        @never_compiled
        def __init__(optimizer: Any, *args: Any, **kwargs: Any) -> None:
            if not compiling():
                self._built.setdefault(id(optimizer), self.recorder.caller_line())
            original(optimizer, *args, **kwargs)
        return __init__

    def _resetting(self, original: Callable[..., Any],
                   leaves_of: Callable[[Any], list[Any]]) -> Callable[..., Any]:
        @functools.wraps(original)
        @never_compiled
        def zero_grad(owner: Any, *args: Any, **kwargs: Any) -> Any:
            if not self._closure and self._pending and not compiling():
                self._reset(leaves_of(owner))
            return original(owner, *args, **kwargs)
        return zero_grad

    def _reset(self, leaves: list[Any]) -> None:
        pending = self._pending
        thrown: dict[int, Mark] = {}
        ids: list[int] = []
        for t in leaves:
            m = pending.pop(id(t), None)
            if m is not None and not m[0]:
                thrown[id(m)] = m
                ids.append(id(t))
        if not thrown:
            return
        where = self.recorder.caller_line()
        self._discarded.setdefault(where, []).extend(thrown.values())
        self._thrown.setdefault(where, set()).update(ids)
        self._pass_after.setdefault(where, min(thrown.values(), key=lambda m: m[1])[2])
        self._reset_since_pass = where

    def _clipping(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        @never_compiled
        def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
            if compiling():
                return original(parameters, *args, **kwargs)
            if not isinstance(parameters, torch.Tensor):
                parameters = list(parameters)  # a generator, read once here
            leaves = [parameters] if isinstance(parameters, torch.Tensor) else parameters
            counts = self._clips.setdefault(self.recorder.caller_line(), [0, 0])
            counts[0] += bool(leaves) and all(t.grad is None for t in leaves)
            counts[1] += 1
            return original(parameters, *args, **kwargs)
        return clip

    def captured(self, given: Any) -> dict[str, Any]:
        return {"facts": (*given.facts, *self.facts(given.named, given.objects))}

    def facts(self, named: Named, objects: Sequence[tuple[str, Any]]) -> list[Any]:
        """What the optimizers did, as facts (named: the run's named tensors; objects: its
        named objects, whose modules may hold leaves names do not reach)."""
        facts: list[Any] = []
        for where, marks in self._discarded.items():
            passes = {m[1] for m in marks}
            # a line that resets what no optimizer holds serves a loop of its own (a manual
            # update), not the optimizer's
            if self.steps and 2 * len(passes) >= self.backwards \
                    and not self._thrown[where].isdisjoint(self.held):
                facts.append(GradDiscarded(
                    *where, len(passes), self.backwards, self.steps,
                    self._before_step.get(where, 0), *self._pass_after[where],
                    *self._step_line))
        for where, (empty, after) in self._empty_steps.items():
            if self.steps and 2 * empty >= self.steps:
                facts.append(StepWithoutGradient(*where, empty, self.steps, after))
        for where, (empty, clips) in self._clips.items():
            if empty and 2 * empty >= clips:
                facts.append(ClipWithoutGradient(*where, empty, clips))
        if self.steps and not self.sharded:
            facts.extend(self._coverage(named, objects))
        return facts

    def _coverage(self, named: Named, objects: Sequence[tuple[str, Any]]) -> list[Any]:
        leaves = [(name, t) for name, t in named
                  if isinstance(t, torch.Tensor) and t.is_leaf]
        loose = [name for name, t in leaves
                 if t.requires_grad and id(t) in self.reached and id(t) not in self.held
                 and (isinstance(t, torch.nn.Parameter) or ("." in name and "[" not in name))]
        seen = {id(t) for _, t in leaves}
        unnamed = {i: t for i, ref in self.reached.items() if i not in self.held
                   and i not in seen and isinstance(t := ref(), torch.nn.Parameter)}
        if unnamed:
            loose.extend(names_in_containers(objects, unnamed))
        # only parts of a model an optimizer trains: another model, trained by hand, is not
        owners = {_owner(name) for name, t in leaves if id(t) in self.held}
        loose = [name for name in loose if _owner(name) in owners]
        lines = self.recorder.script.lines
        facts: list[Any] = []
        if loose:
            built = next(iter(self.stepping), (None, None))
            facts.append(NotOptimized(tuple(loose), self.steps,
                                      *attribute_line(lines, tuple(loose), built), *built))
        frozen = tuple(name for name, t in leaves
                       if id(t) in self.held and not t.requires_grad)
        if frozen:
            line, code = freezing_line(lines, frozen)
            facts.append(FrozenHeld(frozen, self.steps, line, code,
                                    code is not None and on_purpose(lines, line)))
        return facts


def _owner(name: str) -> str:
    """The object a leaf's name starts from: model for model.blocks[0].weight."""
    return re.split(r"[.\[]", name, maxsplit=1)[0]


def _has_closure(args: Any, kwargs: Any) -> bool:
    """Whether an optimizer step was given a closure (L-BFGS: it runs backward itself)."""
    return any(callable(a) for a in (*args, *kwargs.values()))
