"""--profile's samples of each graph: which passes are timed (replays, a loop's steps, once),
and the samples kept for the trace."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...compat.torch import NodeKey, light_timings
from ...extract.profile import RawCosts, Sample, Timing
from ...model.profile import CostMethod, median
from .profile_events import light_timed, positions, profiled, wall

SAMPLES = 7  # timings kept per graph: light-profiled, and as many without the profiler
FULL = 5  # full profiles (every op, memory) per graph: memory, per-op times, the peak


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


class ProfileSamples:
    """Times the passes --profile asks for and keeps the samples of each graph."""

    def __init__(self, asked: int | None) -> None:
        self.asked = asked  # --pass N: only that pass is timed
        self.graphs: dict[int, GraphSamples] = {}
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
        index = positions(nodes)
        try:
            replay()  # warm-up: caches, lazy initialisation
            for k in range(SAMPLES):
                if k < FULL or not light_timings() or cuda:
                    bucket.profiled.append(profiled(replay, index, cuda, hooks_on=False))
                    replay()  # untimed: the full profile's teardown leaves caches cold
                bucket.plain.append(wall(replay, cuda))
                _, timing = light_timed(replay, index, cuda)
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
            result, timing = light_timed(call, positions(nodes), cuda)
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
        bucket.profiled.append(profiled(lambda: result.append(call()), positions(nodes),
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

