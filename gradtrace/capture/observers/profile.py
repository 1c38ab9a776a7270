"""--profile: the time and memory of each backward node, from torch.profiler's events.

A pass is timed again where that is safe (a replay: the same backward run by
torch.autograd.grad with retain_graph=True before the code's own call, which touches no
.grad and runs no code of the script's), else over a loop's steps, else once. Timings
without the profiler are taken alongside, so its overhead is measured, not guessed.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ...compat.torch import (
    NodeKey,
    compiling,
    has_tensor_hooks,
    is_function_node,
    never_compiled,
    node_key,
)
from ...extract.profile import RawCosts
from ...model.records import BACKWARD_HOOK_NODE, PassKind
from ..naming.sharded import module_objects
from .base import Observer, Part, PassState, Patch, Recording
from .marks import node_noting
from .profile_samples import ProfileSamples


class ForwardClock:
    """Times each module's own forward (its submodules' time taken out), summed per module
    since the last take(): pre and post are called around each forward."""

    def __init__(self) -> None:
        self._stack: list[list[float]] = []  # [start, time of submodules]
        self._own: dict[int, float] = {}  # id(module) -> µs

    @never_compiled
    def pre(self, module: torch.nn.Module, args: Any) -> None:
        if not compiling():
            self._stack.append([time.perf_counter(), 0.0])

    @never_compiled
    def post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if compiling() or not self._stack:
            return
        start, inner = self._stack.pop()
        total = time.perf_counter() - start
        if self._stack:
            self._stack[-1][1] += total
        self._own[id(module)] = self._own.get(id(module), 0.0) + (total - inner) * 1e6

    def take(self) -> dict[int, float]:
        """Each module's own forward time (µs) since the previous take, by id(module)."""
        own, self._own = self._own, {}
        return own


def replay_refusal(nodes: list[Any], kind: PassKind, create: bool, batched: bool,
                   hooked: set[NodeKey], retaining: set[NodeKey], recomputed: dict[int, Any],
                   given: dict[str, Any] | None, packed: Callable[[Any], bool]) -> str | None:
    """Why replaying this pass could change what the script sees (None: it cannot)."""
    if given is None:
        return "gradtrace's own backward is not replayed"
    if create:
        return "create_graph=True makes a graph of the gradients"
    if batched:
        return "its gradients are batched"
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return "a distributed backward talks to the other ranks"
    for node in nodes:
        if is_function_node(node):
            return f"{type(node).__name__} runs the script's own backward code"
        if type(node).__name__ == BACKWARD_HOOK_NODE:
            return "a module backward hook would run again"
        key = node_key(node)
        if key in hooked:
            return "a hook on one of its nodes (a tensor's or a module's) would run again"
        if key in retaining:
            return "retain_grad() would set a .grad"
        if id(node) in recomputed:
            return "checkpointing would run forward code again"
        if packed(node):
            return "a saved_tensors_hooks unpack hook would run again"
        if hasattr(node, "variable") and has_tensor_hooks(node.variable):
            return "a hook on a leaf would run again"
    return None


def replay_call(kind: PassKind, given: dict[str, Any], roots: list[Any],
                nodes: list[Any], original_grad: Callable[..., Any]) -> Callable[[], Any] | None:
    """The pass again as torch.autograd.grad(retain_graph=True): to the same inputs, or for
    a backward without inputs= to every leaf it reaches (AccumulateGrad itself does not run,
    so no .grad changes). None when there is nothing to replay to."""
    if kind == "grad":
        inputs = given.get("inputs")
        grads = given.get("grad_outputs")
    else:
        inputs = given.get("inputs")
        grads = given.get("gradient", given.get("grad_tensors"))
        if inputs is None:
            inputs = [n.variable for n in nodes if hasattr(n, "variable")]
    inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or [])
    if not inputs or not roots:
        return None
    if grads is None or isinstance(grads, torch.Tensor):
        grads = [grads] * len(roots) if len(roots) == 1 else [None] * len(roots)
    grads = list(grads)

    def replay() -> Any:
        return original_grad(roots, inputs, grads, retain_graph=True, allow_unused=True)

    return replay


@dataclass(frozen=True)
class ProfilePart(Part):
    """--profile's samples of the pass shown (None: not asked for, or none taken)."""

    costs: RawCosts | None


class Profile(Observer):
    """--profile's observer: times the passes asked for, by replays before the code's own
    call where that is safe, else by the call itself."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        options = recorder.options
        self.samples = ProfileSamples(options.graph_pass if isinstance(options.graph_pass, int)
                                      else None) if options.profile else None
        self.clock = ForwardClock() if options.profile else None
        self._forward: dict[int, float] = {}  # module forward times of the pass
        self.original_grad: Callable[..., Any] = torch.autograd.grad  # as torch has it

    def start(self, p: PassState) -> None:
        if self.samples is None or p.plain:
            return
        timing = self._timing(p)
        if timing is not None:
            call, record, samples = p.call, p.record, self.samples
            p.call = lambda: samples.timed(record.signature, p.number, p.nodes, call,
                                           samples.cuda, self._forward, timing == "step")
            p.plain = timing == "step"  # a loop's repeat runs without the flow's hooks

    def _timing(self, p: PassState) -> str | None:
        """Time this pass by replays now (None after them: the call runs as it is), or time
        the call itself: "step" (a loop's repeat, without gradtrace's flow hooks) or "once"
        (it could not be replayed)."""
        samples, clock, record, number, nodes = self.samples, self.clock, p.record, p.number, \
            p.nodes
        assert samples is not None and clock is not None
        self._forward = clock.take()  # the forward that built this pass's graph
        if any(isinstance(t, torch.Tensor) and t.is_cuda for t in p.roots):
            samples.cuda = True
        if samples.step_sample(record.signature, number):
            return "step"
        if not samples.wanted(record.signature, number):
            return None
        marks = self.recorder.marks
        refusal = replay_refusal(nodes, p.record.kind, record.create_graph, record.batched,
                                 marks.hooked, samples.retaining, marks.recomputed, p.given,
                                 marks.packed)
        replay = None if refusal is not None or p.given is None else \
            replay_call(record.kind, p.given, p.roots, nodes, self.original_grad)
        with self.recorder.gate.own_calls():  # the replays are gradtrace's, not passes
            replayed = samples.replay(record.signature, number, nodes, replay, refusal,
                                      samples.cuda, self._forward)
        return None if replayed else "once"

    def patches(self) -> list[Patch]:
        if self.samples is None:
            return []
        # a replay must not set a retained .grad
        return [(torch.Tensor, "retain_grad",
                 node_noting(self.samples.retaining, torch.Tensor.retain_grad))]

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        # torch's own, not the wrapper of a recording this one nests in (it would record
        # replays)
        self.original_grad = inspect.unwrap(torch.autograd.grad)
        yield

    def captured(self, given: Any) -> ProfilePart:
        """The samples of the pass asked for (--pass N), else of the last pass."""
        passes = self.recorder.passes
        if self.samples is None or not passes:
            return ProfilePart(None)
        asked = self.recorder.options.graph_pass
        number = asked if isinstance(asked, int) and asked <= len(passes) else len(passes)
        chosen = passes[number - 1]
        if not chosen.nodes:
            return ProfilePart(None)
        raw = self.samples.raw(chosen.signature, chosen.nodes, chosen.retain_graph,
                               module_objects(given.objects))
        if raw is not None:
            raw.pass_number = number
        return ProfilePart(raw)
