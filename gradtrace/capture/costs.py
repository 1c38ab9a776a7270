"""--profile: the time and memory of each backward node, from torch.profiler's events.

Each `autograd::engine::evaluate_function: XBackward0` event holds the node's own event,
which carries the node's sequence number: the number gradtrace already reads to find a
node's module and line. A pass is timed again where that is safe (a replay: the same
backward run by torch.autograd.grad with retain_graph=True before the code's own call, which
touches no .grad and runs no code of the script's), else over a loop's steps, else once.
Timings without the profiler are taken alongside, so its overhead is measured, not guessed.
Checked on torch 2.13 (event names, FunctionEvent fields).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..compat.torch import (
    NO_SEQUENCE,
    NodeKey,
    compiling,
    has_tensor_hooks,
    is_function_node,
    light_timings,
    never_compiled,
    node_events,
    node_key,
    sequence_number,
)
from ..extract.costs import RawCosts, Sample, Timing
from ..model.costs import CostMethod, median
from ..model.records import BACKWARD_HOOK_NODE, PassKind

SAMPLES = 7  # timings kept per graph: light-profiled, and as many without the profiler
FULL = 5  # full profiles (every op, memory) per graph: memory, per-op times, the peak
EVALUATE = "autograd::engine::evaluate_function: "


@dataclass
class Bucket:
    """The timings of one graph taken one way (replays, a loop's steps, or once)."""

    pass_number: int = 0  # the latest pass timed
    first: int = 0  # the first
    profiled: deque[Sample] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    timings: deque[Timing] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    plain: deque[float] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    forward: deque[dict[int, float]] = field(default_factory=lambda: deque(maxlen=SAMPLES))


@dataclass
class GraphSamples:
    """The timings of one graph structure (a loop's steps share one)."""

    buckets: dict[CostMethod, Bucket] = field(default_factory=dict)
    repeats: int = 0  # steps over this graph timed after its first pass
    note: str | None = None  # why it was not replayed

    def bucket(self, method: CostMethod, number: int, forward: dict[int, float]) -> Bucket:
        got = self.buckets.setdefault(method, Bucket())
        got.pass_number = number
        got.first = got.first or number
        got.forward.append(forward)
        return got

    def best(self) -> tuple[CostMethod, Bucket] | None:
        """A loop's steps when at least 3 were profiled, else the replays, else what
        there is."""
        steps = self.buckets.get("steps")
        if steps is not None and steps.profiled and len(steps.timings or steps.profiled) >= 3:
            return "steps", steps
        for method in ("replay", "steps", "once"):
            got = self.buckets.get(method)
            if got is not None and got.profiled:
                return method, got
        return None


class ForwardClock:
    """Global forward hooks timing each module's own forward (its submodules' time taken
    out), summed per module since the last take()."""

    def __init__(self) -> None:
        self._stack: list[list[float]] = []  # [start, time of submodules]
        self._own: dict[int, float] = {}  # id(module) -> µs

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        hooks = torch.nn.modules.module
        before = hooks.register_module_forward_pre_hook(self._pre)
        after = hooks.register_module_forward_hook(self._post)
        try:
            yield
        finally:
            after.remove()
            before.remove()

    @never_compiled
    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        if not compiling():
            self._stack.append([time.perf_counter(), 0.0])

    @never_compiled
    def _post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
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
                   given: dict[str, Any] | None) -> str | None:
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


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Kineto's start/stop lines and the allocator's notes go to file descriptor 2: not the
    script's output, so not into it (what C code writes there meanwhile is lost too)."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


class CostRecorder:
    """Times the passes --profile asks for and keeps the samples of each graph."""

    def __init__(self, asked: int | None) -> None:
        self.asked = asked  # --pass N: only that pass is timed
        self.graphs: dict[int, GraphSamples] = {}
        self.clock = ForwardClock()
        self.retaining: set[NodeKey] = set()  # nodes whose tensor called retain_grad()
        self.cuda = False  # a timed pass ran on a GPU: device times, not host times

    def step_sample(self, signature: int, number: int) -> bool:
        """Whether pass number (a repeat of a graph already run) is timed as a loop's step:
        its gradient flow is then not recorded (gradtrace's hooks would be in its time).
        Once SAMPLES of each kind are taken, later steps run as without --profile."""
        graph = self.graphs.get(signature)
        if self.asked is not None or graph is None:
            return False
        steps = graph.buckets.get("steps")
        return steps is None or len(steps.plain) < SAMPLES \
            or len(steps.timings or steps.profiled) < SAMPLES

    def wanted(self, signature: int, number: int) -> bool:
        """Whether pass number is to be timed before its own call (replay) or by it."""
        if self.asked is not None:
            return number == self.asked
        return signature not in self.graphs

    def replay(self, signature: int, number: int, nodes: list[Any],
               replay: Callable[[], Any] | None, refusal: str | None, cuda: bool,
               forward: dict[int, float]) -> bool:
        """Time the pass by replays (a warm-up, then SAMPLES plain and light timings and FULL
        full profiles, interleaved); False when it cannot be replayed (the note says why)."""
        graph = self.graphs.setdefault(signature, GraphSamples())
        if replay is None or refusal is not None:
            graph.note = f"pass {number} was not replayed: " \
                f"{refusal or 'it reaches no leaf to replay to'}"
            return False
        bucket = graph.bucket("replay", number, forward)
        index = _positions(nodes)
        try:
            replay()  # warm-up: caches, lazy initialisation
            for k in range(SAMPLES):
                if k < FULL or not light_timings() or cuda:
                    bucket.profiled.append(_profiled(replay, index, cuda, hooks_on=False))
                    replay()  # untimed: the full profile's teardown leaves caches cold
                bucket.plain.append(_wall(replay, cuda))
                _, timing = _light(replay, index, cuda)
                if timing is not None:
                    bucket.timings.append(timing)
        # a graph already freed, arguments torch refuses: the code's own call says so
        except (RuntimeError, TypeError, ValueError) as exc:
            graph.note = f"pass {number} could not be replayed: {exc}"
            del graph.buckets["replay"]
            return False
        return True

    def timed(self, signature: int, number: int, nodes: list[Any], call: Callable[[], Any],
              cuda: bool, forward: dict[int, float], step: bool) -> Any:
        """Run the code's own call, timed: for a loop's steps (step) a full profile, a light
        timing and a plain one in turn; else profiled once, gradtrace's flow hooks on."""
        graph = self.graphs.setdefault(signature, GraphSamples())
        if not step:
            bucket = graph.bucket("once", number, forward)
            return self._profile_call(bucket, nodes, call, cuda, hooks_on=True)
        graph.repeats += 1
        bucket = graph.bucket("steps", number, forward)
        phase = graph.repeats % 3  # a full profile, a light timing, a plain one, in turn
        if phase == 2 and not cuda and light_timings():
            result, timing = _light(call, _positions(nodes), cuda)
            if timing is not None:
                bucket.timings.append(timing)
            return result
        if phase == 1 and len(bucket.profiled) < FULL or phase == 2:
            return self._profile_call(bucket, nodes, call, cuda, hooks_on=False)
        start = time.perf_counter()
        try:
            return call()
        finally:
            if cuda:
                torch.cuda.synchronize()
            bucket.plain.append((time.perf_counter() - start) * 1e6)

    @staticmethod
    def _profile_call(bucket: Bucket, nodes: list[Any], call: Callable[[], Any],
                      cuda: bool, hooks_on: bool) -> Any:
        result: list[Any] = []
        bucket.profiled.append(_profiled(lambda: result.append(call()), _positions(nodes),
                                         cuda, hooks_on=hooks_on))
        return result[0]

    def raw(self, signature: int, nodes: list[Any], retained: bool,
            paths: dict[int, str]) -> RawCosts | None:
        """The samples of the graph with this signature, for the trace."""
        graph = self.graphs.get(signature)
        chosen = None if graph is None else graph.best()
        if graph is None or chosen is None:
            return None
        method, bucket = chosen
        modules: dict[str, list[float]] = {}
        for step in bucket.forward:
            for key, us in step.items():
                path = paths.get(key)
                if path is not None:
                    modules.setdefault(path, []).append(us)
        note = graph.note if method != "replay" else None
        if method == "steps":
            note = (note + "; " if note else "") + \
                f"timed over passes {bucket.first}–{bucket.pass_number}"
        if method == "once":
            note = (note + "; " if note else "") + "one timing only, with gradtrace's " \
                "gradient-flow hooks on (node times leave them out)"
        return RawCosts(bucket.pass_number, method, "cuda" if self.cuda else "cpu", nodes,
                        list(bucket.profiled), list(bucket.plain), retained,
                        {p: median(v) for p, v in modules.items()}, note,
                        list(bucket.timings))


def _light(run: Callable[[], Any], index: dict[int, int], cuda: bool
           ) -> tuple[Any, Timing | None]:
    """run() with the profiler limited to autograd nodes' own events: its result, and a
    Timing (None on a GPU, or when this torch cannot limit the profiler; run() still ran)."""
    if cuda or not light_timings():
        return run(), None
    walls: list[float] = []

    def timed() -> Any:
        start = time.perf_counter()
        try:
            return run()
        finally:
            walls.append((time.perf_counter() - start) * 1e6)

    with _quiet_fd2():
        got = node_events(timed)
    assert got is not None  # light_timings() said it can
    result, events = got
    times: dict[int, float] = {}
    gaps: dict[int, float] = {}
    before: int | None = None  # the position of the node before (-1: a leaf's)
    last_end = first = 0.0
    for name, number, start, end in sorted(events, key=lambda e: e[2]):
        if before is None:
            first = start
        if before is not None and start < last_end:
            continue  # a reentrant backward's node, inside another's: counted there
        here = -1 if name.endswith("AccumulateGrad") else index.get(number, -1)
        if before is not None:  # the rest of the node before's evaluation, and the step here
            gap = start - last_end
            times[before] = times.get(before, 0.0) + gap
            gaps[before] = gaps.get(before, 0.0) + gap
        times[here] = times.get(here, 0.0) + end - start
        before, last_end = here, end
    # the call's own start and end, around the first and last node (its clock is not the
    # profiler's: only the durations are compared)
    outside = max(walls[0] - (last_end - first), 0.0) if before is not None else 0.0
    return result, Timing(walls[0], {i: t for i, t in times.items() if i >= 0}, gaps,
                          times.get(-1, 0.0), outside)


def _positions(nodes: list[Any]) -> dict[int, int]:
    """Sequence number -> walk position, for the nodes that have one (not leaves)."""
    index: dict[int, int] = {}
    for i, node in enumerate(nodes):
        number = sequence_number(node)
        if number != NO_SEQUENCE:
            index.setdefault(number, i)
    return index


def _wall(run: Callable[[], Any], cuda: bool) -> float:
    """run()'s wall time in µs (on a GPU, until its kernels finished)."""
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6


def _profiled(run: Callable[[], Any], index: dict[int, int], cuda: bool,
              hooks_on: bool) -> Sample:
    """run() under torch.profiler (memory too): a Sample of its node events."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with _quiet_fd2():
        # acc_events: one cycle each either way; without it torch 2.11 and 2.12 warn (once,
        # into the script's output) that events are cleared at the end of each cycle
        with profile(activities=activities, profile_memory=True, acc_events=True) as prof:
            wall = _wall(run, cuda)
        events = list(prof.events())
    return _sample(events, index, wall, cuda, hooks_on)


def _duration(event: Any, cuda: bool) -> float:
    return float(event.device_time_total) if cuda else float(event.time_range.elapsed_us())


def _memory(event: Any, cuda: bool) -> int:
    return int(event.device_memory_usage if cuda else event.cpu_memory_usage)


def _sample(events: list[Any], index: dict[int, int], wall: float, cuda: bool,
            hooks_on: bool) -> Sample:
    """Node times and memory from the events of one profiled pass.

    A node's time is its evaluate_function event (its computation, the sums of what it
    received, and hooks) and the engine's time since the evaluation before it; with
    gradtrace's hooks on, its own event alone. Memory: what
    its own event left allocated, and what was freed in the rest of its evaluation. The
    peak is the running total of what each evaluation left allocated."""
    times: dict[int, float] = {}
    allocated: dict[int, int] = {}
    freed: dict[int, int] = {}
    ran: list[int] = []
    accumulate = 0.0
    running = peak = 0
    peak_at: int | None = None
    recomputed = 0.0
    ops: dict[str, float] = {}  # torch.profiler's own self time per op name
    for e in events:
        if e.name != "[memory]":
            ops[e.name] = ops.get(e.name, 0.0) + float(
                e.self_device_time_total if cuda else e.self_cpu_time_total)
    op_total = sum(ops.values())
    last_end: float | None = None
    gaps: dict[int, float] = {}  # per walk position (-1: leaf accumulation): the engine's
    for e in sorted(events, key=lambda e: e.time_range.start):
        if not e.name.startswith(EVALUATE):
            if e.sequence_nr >= 0 and e.name.startswith("aten::") and not _under_op(e):
                recomputed += _duration(e, cuda)  # forward code run again in backward
            continue
        if _under_evaluation(e):
            continue  # a reentrant backward's node: its time is its caller's
        # the engine's work between two evaluations (finding the next node, handing it its
        # gradients) is the next node's: node times then add up to the pass's host time
        gap = 0.0 if hooks_on or cuda or last_end is None \
            else max(e.time_range.start - last_end, 0.0)
        last_end = max(last_end or 0.0, e.time_range.end)
        name = e.name[len(EVALUATE):]
        own = next((c for c in e.cpu_children if c.name == name), None)
        if name.endswith("AccumulateGrad"):
            accumulate += _duration(e, cuda) + gap
            gaps[-1] = gaps.get(-1, 0.0) + gap
            running += _memory(e, cuda)
            continue
        number = own.sequence_nr if own is not None and own.sequence_nr >= 0 \
            else e.sequence_nr
        i = index.get(number)
        spent = _duration(own if hooks_on and own is not None else e, cuda) + gap
        left = _memory(own, cuda) if own is not None else _memory(e, cuda)
        net = _memory(e, cuda)
        if i is None:
            accumulate += spent  # a node outside the pass's walk (not expected)
            gaps[-1] = gaps.get(-1, 0.0) + gap
            running += net
            continue
        times[i] = times.get(i, 0.0) + spent
        gaps[i] = gaps.get(i, 0.0) + gap
        allocated[i] = allocated.get(i, 0) + left
        freed[i] = freed.get(i, 0) + max(left - net, 0)
        ran.append(i)
        here = running + max(left, net, 0)
        if here > peak or peak_at is None:
            peak, peak_at = here, i
        running += net
    return Sample(wall, times, allocated, freed, ran, accumulate, op_total, max(peak, 0),
                  peak_at, recomputed, gaps, ops)


def _under_evaluation(event: Any) -> bool:
    """Whether an evaluate_function event runs inside another's (a reentrant backward)."""
    return _inside(event, lambda parent: parent.name.startswith(EVALUATE))


def _under_op(event: Any) -> bool:
    """Whether an op event runs inside another op that made a node (its part, not a
    separate forward op)."""
    return _inside(event, lambda parent: parent.name.startswith("aten::")
                   and parent.sequence_nr >= 0)


def _inside(event: Any, test: Callable[[Any], bool]) -> bool:
    """Whether any event enclosing this one (its CPU parents, up to the top) passes test."""
    parent = event.cpu_parent
    while parent is not None:
        if test(parent):
            return True
        parent = parent.cpu_parent
    return False
