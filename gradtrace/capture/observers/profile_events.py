"""--profile's timings: a pass run under torch.profiler, its events matched to the nodes by
sequence number (each `autograd::engine::evaluate_function: XBackward0` event holds the
node's own event), or run plain. Checked on torch 2.13 (event names, FunctionEvent fields)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...compat.torch import NO_SEQUENCE, light_timings, node_events, sequence_number
from ...extract.profile import Sample, Timing
from ..script.own_imports import own_imports

EVALUATE = "autograd::engine::evaluate_function: "


@contextlib.contextmanager
def quiet_fd2() -> Iterator[None]:
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


def light_timed(run: Callable[[], Any], index: dict[int, int], cuda: bool
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

    with quiet_fd2():
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


def positions(nodes: list[Any]) -> dict[int, int]:
    """Sequence number -> walk position, for the nodes that have one (not leaves)."""
    index: dict[int, int] = {}
    for i, node in enumerate(nodes):
        number = sequence_number(node)
        if number != NO_SEQUENCE:
            index.setdefault(number, i)
    return index


def wall(run: Callable[[], Any], cuda: bool) -> float:
    """run()'s wall time in µs (on a GPU, until its kernels finished)."""
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6


def profiled(run: Callable[[], Any], index: dict[int, int], cuda: bool,
              hooks_on: bool) -> Sample:
    """run() under torch.profiler (memory too): a Sample of its node events."""
    # the profiler imports torch._inductor as it starts (cProfile, `profile` …): gradtrace's
    # imports, never the script's files; run() (the script's backward, hooks) is the script's
    with own_imports(), quiet_fd2():
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        # acc_events: one cycle each either way; without it torch 2.11 and 2.12 warn (once,
        # into the script's output) that events are cleared at the end of each cycle
        with profile(activities=activities, profile_memory=True, acc_events=True) as prof:
            with own_imports(own=False):
                took = wall(run, cuda)
        events = list(prof.events())
    return _sample(events, index, took, cuda, hooks_on)


def _duration(event: Any, cuda: bool) -> float:
    return float(event.device_time_total) if cuda else float(event.time_range.elapsed_us())


def _memory(event: Any, cuda: bool) -> int:
    return int(event.device_memory_usage if cuda else event.cpu_memory_usage)


def _sample(events: list[Any], index: dict[int, int], wall: float, cuda: bool,
            hooks_on: bool) -> Sample:
    """Node times and memory from the events of one profiled pass. A node's time is its
    evaluate_function event (its computation, the sums of what it received, and hooks) and
    the engine's time since the evaluation before it; with gradtrace's hooks on, its own
    event alone. Memory: what its own event left allocated, and what was freed in the rest
    of its evaluation. The peak is the running total of what each evaluation left."""
    times: dict[int, float] = {}
    allocated: dict[int, int] = {}
    freed: dict[int, int] = {}
    ran: list[int] = []
    accumulate = 0.0
    running = peak = 0
    peak_at: int | None = None
    recomputed = 0.0
    ops = _op_times(events, cuda)
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


def _op_times(events: list[Any], cuda: bool) -> dict[str, float]:
    """torch.profiler's own self time per op name."""
    ops: dict[str, float] = {}
    for e in events:
        if e.name != "[memory]":
            ops[e.name] = ops.get(e.name, 0.0) + float(
                e.self_device_time_total if cuda else e.self_cpu_time_total)
    return ops


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
