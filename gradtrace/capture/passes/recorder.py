"""The Recorder: what captured code did with autograd, pass by pass. Its wrappers on torch
are in patches.py; each per-pass concern is an observer (observers/table.py)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

import torch

from ...compat.cpython import caller_frame
from ...compat.torch import (
    compiled_autograd_on,
    error_kind,
    inside_torch_func_transform,
    unseen_by_modes,
)
from ...extract.build import build_trace, frozen_graph
from ...extract.captured import Captured, RawCall, RawPass
from ...extract.frozen import FrozenGraph
from ...extract.tensors import Named
from ...extract.walk import Walk, indexed_walk, lone_leaf, release, structure
from ...gcpause import gc_paused
from ...model.facts import Fact
from ...model.records import PassBy, PassKind, Trace
from ..naming.names import ScenarioNames
from ..naming.roots import named_tensors, names_of
from ..naming.where import running_line
from ..observers.base import Ending, Host, Observer, PassState, Patch, with_parts
from ..observers.gate import Gate
from ..observers.grad_graph import GradGraph
from ..observers.marks import Marks
from ..observers.nan_gradients import NanGradients
from ..observers.optimizers import OptimizerUse
from ..observers.profile import ForwardClock, Profile
from ..observers.roots_seen import DefaultRoots, RootsSeen
from ..observers.saved import SavedTensors
from ..observers.second_order import SecondDerivatives
from ..observers.steps import StepLog
from ..observers.table import OBSERVERS
from ..options import CaptureOptions
from .detail import DetailPlan
from .let_go import LetGo
from .own_backward import own_backward
from .twins import node_twins, with_twins

AnObserver = TypeVar("AnObserver", bound=Observer)


class Script(NamedTuple):
    """The file whose lines the recording cites, and its lines."""

    path: str
    lines: list[str]


class Recorder:
    """Patches torch while a scenario runs, recording passes and custom Function calls."""

    def __init__(self, script: Script, names: ScenarioNames, options: CaptureOptions,
                 host: Host) -> None:
        self.script = script
        self.names = names
        self.options = options
        self.host = host
        self.passes: list[RawPass] = []
        self.calls: list[RawCall] = []
        # what the code's gradcheck calls, saved tensors changed in place and freed graphs
        # told, in the order they were met
        self.facts: list[Fact] = []
        self.failed: BaseException | None = None  # the error of the pass that stopped the run
        self.spawned: list[str] = []  # "line 12 `mp.spawn(…)` started 2 processes"
        self.gate = Gate(options.pass_limit)
        self.marks = Marks()
        self.last_walk: Walk | None = None  # the latest pass's walk (released by release())
        self._observers = {kind: kind(self) for kind in OBSERVERS}
        self.plan = DetailPlan(options, self._observer(StepLog), self._let_go)
        self.let_go = LetGo(self._freeze)  # graphs the code let go of

    def _observer(self, kind: type[AnObserver]) -> AnObserver:
        """The observer of that class (every one in OBSERVERS is made): the recorder's own
        business, never asked for outside it."""
        return self._observers[kind]  # type: ignore[return-value]  # keyed by its class

    def tell(self, fact: Fact) -> None:
        """One more fact of the recording's (an observer's, a wrapper's), in the order met."""
        self.facts.append(fact)
        if self.options.listener is not None:
            self._stop_if(self.options.listener.told(fact, len(self.passes)))

    def _tell_rows(self) -> None:
        """The listener gets the steps' rows read since it last did (with Steps.scale_free),
        then the nan-gradient of each pass in detail among them whose .grads were not finite."""
        steps, listener = self._observer(StepLog), self.options.listener
        read = steps.read_since()
        if read is not None and listener is not None:
            self._stop_if(listener.read(read[0] + 1, self._observer(OptimizerUse).held.marked(
                read[1], steps.leaf_ids)))
            if found := self._observer(NanGradients).read(read[0] + len(read[1].loss),
                                                          steps.finite):
                self._stop_if(listener.judged(found, len(self.passes)))

    def _stop_if(self, code: str | None) -> None:
        if code is not None:  # the listener's --stop-on fired: stop at the next pass
            self.gate.stop_at_next(code)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """The observers' own hooks on torch, while the code runs (in the table's order)."""
        with contextlib.ExitStack() as stack:
            for observer in self._observers.values():
                stack.enter_context(observer.recording())
            yield

    def patches(self) -> list[Patch]:
        """The observers' wrappers on torch, set with the recorder's own."""
        return [patch for observer in self._observers.values() for patch in observer.patches()]

    def note_scaled(self, output: Any, loss: Any, scale: Any) -> None:
        """GradScaler.scale(loss) returned output: the steps' loss is the script's."""
        self._observer(StepLog).note_scaled(output, loss, scale)

    def forward_clock(self) -> ForwardClock | None:
        """--profile's timer of module forwards (None: not profiling)."""
        return self._observer(Profile).clock

    def default_roots(self) -> DefaultRoots:
        """The roots of the graph shown by default, as they stand now."""
        return self._observer(RootsSeen).default()

    def end(self, outputs: Named, named: Named, stopped: bool) -> None:
        """The code ended: gradtrace's own backward when it ran none, then what each
        observer tells last (in the reverse order of the table, as a pass finishes)."""
        if not stopped and outputs and self.options.backward and not self.passes:
            own_backward(self.run_pass, self.passes, self.script.path, [t for _, t in outputs])
        end = Ending(outputs, named, stopped)
        for observer in reversed(self._observers.values()):
            observer.ended(end)

    def caller_line(self) -> tuple[int | None, str | None]:
        """The scenario's line that is running now, and its text."""
        return running_line(*self.script)

    def run_pass(
        self, kind: PassKind, by: PassBy, roots: list[Any], retain: bool, create: bool,
        call: Callable[[], Any], every_leaf: bool = True, batched: bool = False,
        given: dict[str, Any] | None = None,
    ) -> Any:
        """Run one backward/grad call, its observers around it.

        every_leaf: the call runs every leaf it reaches (a backward without inputs=).
        batched: its gradients are batched (autograd.grad's is_grads_batched=True).
        given: the call's arguments by name (--profile replays the pass from them).
        """
        with self.let_go:
            return self._run_pass(kind, by, roots, retain, create, call, every_leaf, batched,
                                  given)

    @gc_paused  # the walk and the saved tensors of a big graph: 100,000s of small objects
    def _run_pass(self, kind: PassKind, by: PassBy, roots: list[Any], retain: bool,
                  create: bool, call: Callable[[], Any], every_leaf: bool, batched: bool,
                  given: dict[str, Any] | None) -> Any:
        line, code = self.caller_line()
        if by == "scenario":
            self.gate.count(line, code)
        root_nodes = [t.grad_fn if isinstance(t, torch.Tensor) else None for t in roots]
        # inside vmap/grad/jacrev: gradients without storage, no step of a loop's eager graph
        batched = batched or inside_torch_func_transform()
        walked = Walk(root_nodes, *indexed_walk(root_nodes))
        signature = structure(walked.order, walked.edges)
        signature = hash((signature, batched)) if batched else signature
        self.let_go.next_pass(signature)
        number = len(self.passes) + 1
        new_graph = self.plan.new_graph(signature)
        detailed = self.plan.next or self.plan.asked_for(number) or bool(self.marks.hooked) \
            or new_graph
        self.names.look(caller_frame())
        named, leaves_only = self.names.for_pass(
            walked.order, not detailed and not self._observer(SecondDerivatives).pending, line)
        # a loop's light step names its roots by a quick look
        root_names = [self.names.name_of(t) for t in roots] if leaves_only \
            else names_of(roots, named)
        record = RawPass(kind, by, root_nodes, root_names, retain, create, line, code,
                         signature=signature, nodes=list(walked.order), batched=batched,
                         compiled=compiled_autograd_on(), from_leaves=not any(root_nodes))
        record.lone_leaf = not any(root_names) and lone_leaf(walked.order)  # a library's pass
        # batched gradients have no storage; compiled autograd would compile gradtrace's hooks
        p = PassState(record, number, roots, walked.order, walked.edges, named, detailed,
                      self.plan.may_wait(detailed), leaves_only, every_leaf, given, call,
                      plain=batched or record.compiled)
        if detailed:
            self.plan.began(record)
        self.passes.append(record)
        observers = list(self._observers.values())
        for observer in observers:
            observer.start(p)
        self.gate.thread = threading.get_ident()
        try:
            return p.call()
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            record.error_kind = error_kind(exc)
            self.failed = p.error = exc
            if not detailed:  # the facts name what they can
                p.named = named_tensors(self.names.merged())
            raise
        finally:
            self.gate.thread = None
            if p.error is None:
                p.swapped = self.names.swapped(p.named, light=not detailed)
            for observer in reversed(observers):
                observer.finish(p)
            self._ended(p, walked, new_graph)

    def _ended(self, p: PassState, walked: Walk, new_graph: bool) -> None:
        """What a pass keeps once it ran: its detail, if it was in detail; its walk, as the
        trace's, when the trace starts from the same roots."""
        record = p.record
        record.keep = p.number == 1 or record.error is not None \
            or self.plan.asked_for(p.number) or bool(self.marks.hooked)
        if not p.detailed:  # a loop's light step: its statistics (and its roots, while it
            # is the latest pass over its graph: the trace's graph, if it is the last) are
            # all it keeps
            record.nodes, record.thinned = [], True
        if self.last_walk is not None:
            release(self.last_walk.order)
        self.last_walk = walked
        self.plan.ended(record, p.number, new_graph, bool(self.marks.hooked))
        self.plan.fold(self.passes)
        if self.options.listener is not None:
            self._tell_rows()
        if self._observer(Profile).samples is None:  # --profile times a graph it holds
            self.let_go.watch(record, p.roots)

    def frozen_of(self, p: RawPass) -> FrozenGraph:
        """p's graph as plain data (its raw flow let go of), as the session knows it now."""
        with unseen_by_modes():  # the code's torch function modes see none of it
            c = self._given(self.host.captured_now(), [p])
            return frozen_graph(with_parts(replace(c, passes=[p], graph_passes=[p], walked=None),
                                           self._observer(SavedTensors).captured(c),
                                           self._observer(GradGraph).captured(c)))

    def _freeze(self, p: RawPass) -> None:
        """Make p's graph plain data, then let go of its torch objects: the code let go of
        its roots, and python frees what only the graph holds."""
        p.frozen = self.frozen_of(p)
        for observer in self._observers.values():
            observer.forget(p.nodes)
        self.host.forget(p.nodes)
        if self.last_walk is not None and self.passes and self.passes[-1] is p:
            release(self.last_walk.order)
            self.last_walk = None
        release(p.nodes)
        p.roots = []

    def _let_go(self, p: RawPass) -> None:
        for observer in self._observers.values():
            observer.forget(p.nodes)
        self.host.forget(p.nodes)
        release(p.nodes)
        p.roots, p.flow, p.grad_changes, p.pending_changes = [], {}, [], []
        p.thinned, p.frozen = True, None

    def trace(self, given: Captured) -> Trace:
        """The Trace of what was recorded, given what the session knows (the names, modules,
        outputs and its facts): the observers add theirs."""
        walked, self.last_walk = self.last_walk, None  # build_trace releases its nodes
        self._observer(StepLog).readback.read()  # the passes' numbers, in one batch
        if self.options.listener is not None:
            self._tell_rows()
        self.plan.settle()
        given = replace(self._given(given, self.plan.shown(self.passes)), walked=walked)
        return build_trace(with_parts(given, *(observer.captured(given)
                                                for observer in self._observers.values())))

    def _given(self, given: Captured, shown: list[RawPass]) -> Captured:
        """given, with what the recorder knows: its passes and calls, the passes shown, and
        each node's line and module (a light step's, its twin's)."""
        return replace(with_twins(given, node_twins(shown, self.plan.latest_of), self.host),
                       passes=self.passes, calls=self.calls, graph_passes=shown,
                       recomputed=self.marks.recomputed,
                       handed=frozenset(n for n, t in given.named
                                        if self.marks.handed.get(id(t)) is t))

    def release(self) -> None:
        """Drop every torch object held (the scenario's graph dies with its run)."""
        self._observer(SavedTensors).release()  # the saved tensors first, then the walks
        if self.last_walk is not None:
            release(self.last_walk.order)
            self.last_walk = None
        for p in self.passes:  # root first, as release() frees: a deep graph dies node by node
            release(p.nodes)
        self.plan.clear()
        for observer in self._observers.values():
            observer.release()
        self.marks.clear()
