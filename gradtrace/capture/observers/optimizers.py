"""What the code's optimizers did with the gradients: zero_grad() calls that threw away a
backward's gradients before any step used them, steps and clipping that found no gradient
at all, and which leaves the optimizers hold (by torch's public optimizer hooks, and
wrappers on zero_grad and the clipping functions while the code runs). Counts only: what
they amount to is judged in findings/training.py."""

from __future__ import annotations

import contextlib
import functools
import importlib
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ...compat.torch import compiling, never_compiled
from ...model.facts import ClipWithoutGradient, Fact, GradDiscarded, StepWithoutGradient
from ..naming.setup_lines import Where
from ..naming.where import forwards
from .base import Observer, Part, PassState, Recording
from .coverage import Held, coverage_facts

NOWHERE: Where = (None, None)


@dataclass(slots=True)
class Mark:
    """A backward pass's mark on the leaves it reached, until a step uses or a reset drops
    them."""

    number: int
    where: Where  # its line
    used: bool = False  # an optimizer step used them
    # one leaf it reached and the .grad it left (weakly): a step that finds another .grad
    # there used what the code made of them (per-sample clipping), not the pass's own
    leaf: Any = None
    grad: Any = None


@dataclass(slots=True)
class Resets:
    """What one zero_grad() line threw away."""

    passes: dict[int, Where] = field(default_factory=dict)  # pass number -> its line
    held: bool = False  # some of it an optimizer holds (not a loop trained by hand)
    before_step: int = 0  # resets right before a step, with no backward between
    step: Where = NOWHERE  # the step one came before


@dataclass(slots=True)
class Counts:
    """How often a step or clipping line ran, and how often with no gradient at all."""

    calls: int = 0
    empty: int = 0
    after_backward: int = 0  # of the empty ones, those with a backward since the step before


@dataclass(frozen=True)
class OptimizersPart(Part):
    """What optimizers did with the gradients, as facts; id() of the leaves stepping
    optimizers hold (None: none stepped, or they hold shards)."""

    optimizer_facts: tuple[Fact, ...]
    held: frozenset[int] | None
    scale_free: frozenset[int]  # of those, the ones stepped by an amount the grad's size
    # does not grow (Held.scale_free)


class OptimizerUse(Observer):
    """The passes' gradients as the optimizers used, reset or clipped them."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        # AccumulateGrad's class: a pass's leaves are its nodes of that class
        probe: Any = torch.ones(1, requires_grad=True).view(1).grad_fn
        self._accumulate: Any = type(probe.next_functions[0][0])
        self._pending: dict[int, Mark] = {}  # id(leaf) -> the latest backward's mark on it
        self.held = Held()
        self.backwards = 0
        self._closure = 0  # inside a closure an optimizer step runs (L-BFGS, Lightning)
        self._closure_calls = 0  # the closures' calls so far
        self._resets: dict[Where, Resets] = {}  # by the zero_grad line
        self._trained: set[Where] = set()  # the backward lines of passes a step used
        self._replaced: set[Where] = set()  # ... whose .grad the code replaced before it
        self._reset_since_pass: Resets | None = None
        self._passes_since_step = 0
        self._steps: dict[Where, Counts] = {}  # empty steps, by the step's line
        self._clips: dict[Where, Counts] = {}  # by the clipping line
        self._built: dict[int, Where] = {}  # id(optimizer) -> the line that built it

    def start(self, p: PassState) -> None:
        p.record.closure_call = self._closure_calls if self._closure else None

    def finish(self, p: PassState) -> None:
        self.held.name_frozen(p.named)
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
        ids = self.held.reached_by(leaves, self._pending)
        if not self._closure and ids:  # else the step that called it uses its gradients
            mark = Mark(p.number, (p.record.line, p.record.code), leaf=self.held.reached[ids[0]])
            g = getattr(mark.leaf(), "grad", None)
            mark.grad = None if g is None else weakref.ref(g)
            self._pending.update(dict.fromkeys(ids, mark))

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Follow every optimizer step, zero_grad() and clipping call while the block runs."""
        clip_module = importlib.import_module("torch.nn.utils.clip_grad")
        optimizer = torch.optim.Optimizer
        patches: list[tuple[Any, str, Callable[..., Any]]] = [
            (optimizer, "__init__", self._building(optimizer.__init__)),
            (optimizer, "zero_grad", self._resetting(
                optimizer.zero_grad, lambda o: [t for g in o.param_groups for t in g["params"]])),
            (torch.nn.Module, "zero_grad", self._resetting(
                torch.nn.Module.zero_grad, lambda m: list(m.parameters()))),
        ]
        for owner in (torch.nn.utils, clip_module):
            for name in ("clip_grad_norm_", "clip_grad_value_"):
                patches.append((owner, name, self._clipping(getattr(owner, name))))
        saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
        handle = register_optimizer_step_pre_hook(self._step_begins)
        try:
            for owner, name, wrapper in patches:
                setattr(owner, name, wrapper)
            yield
        finally:
            handle.remove()
            for owner, name, original in saved:
                setattr(owner, name, original)

    @never_compiled
    def _step_begins(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        if compiling() or self.recorder.gate.elsewhere():
            return None
        params = [t for g in optimizer.param_groups for t in g["params"]]
        self.held.stepped(optimizer, params, self._built.get(id(optimizer), NOWHERE))
        pending = self._pending
        empty = True
        for t in params:
            if pending and (mark := pending.pop(id(t), None)) is not None and not mark.used:
                mark.used = True
                leaf = mark.leaf()
                if leaf is None or mark.grad is None or leaf.grad is mark.grad():
                    self._trained.add(mark.where)
                else:  # the code put a .grad of its own there: its passes are its own
                    self._replaced.add(mark.where)
            empty = empty and getattr(t, "grad", None) is None
        closure = next((i for i, a in enumerate((*args, *kwargs.values())) if callable(a)),
                       None)
        reset, self._reset_since_pass = self._reset_since_pass, None
        if reset is not None:  # told with the zero_grad that did it
            reset.before_step += 1
            reset.step = self.recorder.caller_line()
        elif empty and params and closure is None:  # a closure makes its own (L-BFGS)
            counts = self._steps.setdefault(self.recorder.caller_line(), Counts())
            counts.empty += 1
            counts.after_backward += self._passes_since_step > 0
        self._passes_since_step = 0
        return None if closure is None else self._inside(args, kwargs, closure)

    def _inside(self, args: Any, kwargs: Any, at: int) -> tuple[Any, Any]:
        """The step's arguments with its closure wrapped: passes and resets inside it are
        the step's own, until it returns or raises."""
        given = (*args, *kwargs.values())[at]

        @functools.wraps(given)
        def closure(*a: Any, **k: Any) -> Any:
            self._closure += 1
            self._closure_calls += 1
            try:
                return given(*a, **k)
            finally:
                self._closure -= 1

        if at < len(args):
            return (*args[:at], closure, *args[at + 1:]), kwargs
        key = list(kwargs)[at - len(args)]
        return args, {**kwargs, key: closure}

    def _building(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        @never_compiled
        @forwards
        def __init__(optimizer: Any, *args: Any, **kwargs: Any) -> None:
            if not compiling() and not self.recorder.gate.elsewhere():
                self._built.setdefault(id(optimizer), self.recorder.caller_line())
            original(optimizer, *args, **kwargs)
        return __init__

    def _resetting(self, original: Callable[..., Any],
                   leaves_of: Callable[[Any], list[Any]]) -> Callable[..., Any]:
        @functools.wraps(original)
        @never_compiled
        @forwards
        def zero_grad(owner: Any, *args: Any, **kwargs: Any) -> Any:
            if not self._closure and self._pending and not compiling() \
                    and not self.recorder.gate.elsewhere():
                self._reset(leaves_of(owner))
            return original(owner, *args, **kwargs)
        return zero_grad

    def _reset(self, leaves: list[Any]) -> None:
        pending, thrown, held, popped = self._pending, {}, False, False
        for t in leaves:
            mark = pending.pop(id(t), None)
            if mark is not None:
                popped = True
                held = held or self.held.holds(t)
                if not mark.used:
                    thrown[mark.number] = mark.where
        if popped:  # a reset of the latest pass's gradients (another step may have used
            # them already: an actor's, not the critic's own)
            resets = self._resets.setdefault(self.recorder.caller_line(), Resets())
            resets.passes.update(thrown)
            resets.held = resets.held or held
            self._reset_since_pass = resets

    def _clipping(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        @never_compiled
        @forwards
        def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
            if compiling() or self.recorder.gate.elsewhere():
                return original(parameters, *args, **kwargs)
            if not isinstance(parameters, torch.Tensor):
                parameters = list(parameters)  # a generator, read once here
            leaves = [parameters] if isinstance(parameters, torch.Tensor) else parameters
            counts = self._clips.setdefault(self.recorder.caller_line(), Counts())
            counts.calls += 1
            counts.empty += bool(leaves) and all(
                isinstance(t, torch.Tensor) and t.grad is None for t in leaves)
            return original(parameters, *args, **kwargs)
        return clip

    def captured(self, given: Any) -> OptimizersPart:
        held = self.held
        return OptimizersPart((*self.facts(), *coverage_facts(
            held, given.named, given.objects, self.recorder.script.lines)),
            held.stepping(),
            frozenset(held.scale_free))

    def facts(self) -> list[Any]:
        """What the optimizers did, counted: findings/training.py judges it."""
        facts: list[Any] = []
        steps = self.held.steps
        trained = self._trained - self._replaced
        for where, r in self._resets.items():
            first = r.passes[min(r.passes)] if r.passes else NOWHERE
            facts.append(GradDiscarded(
                *where, len(r.passes), sum(w in trained for w in r.passes.values()),
                self.backwards, steps, r.before_step, r.held, *first, *r.step))
        for where, c in self._steps.items():  # out of every optimizer's steps
            facts.append(StepWithoutGradient(*where, c.empty, steps, c.after_backward))
        for where, c in self._clips.items():
            if c.empty:
                facts.append(ClipWithoutGradient(*where, c.empty, c.calls))
        return facts
