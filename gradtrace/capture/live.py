"""Capture sessions over live code: the graph behind tensors at hand (gradtrace.trace()) and
a with-block of ordinary code (gradtrace.record()), recorded as a scenario run is."""

from __future__ import annotations

import contextlib
import linecache
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from ..errors import ScenarioError, ScenarioStopped
from ..extract.frozen import placed_keys
from ..extract.walk import release, walk
from ..model.records import Trace
from .naming.cuts import caller_cuts
from .naming.reach import is_module, is_tensor
from .naming.roots import named_tensors
from .naming.where import scenario_line
from .options import CaptureOptions, RunListener
from .script.scenario_thread import RUN_LOCK
from .session import RECORDING, CaptureSession


def trace_tensors(outputs: list[Any], names: dict[str, Any], backward: bool,
                  saved: bool = True, profile: bool = False,
                  caller: FrameType | None = None) -> Trace:
    """The Trace of the graph behind live output tensors, labelled from names (profile: the
    costs of gradtrace's own backward, which backward runs; caller: the frame whose
    variables names are, whose file's lines tell where leaves were bound and cut)."""
    if profile and not backward:
        raise ScenarioError("gradtrace.trace(..., profile=True) times a backward pass: none "
                            "runs without backward=True", "pass backward=True too")
    for t in outputs:
        if not isinstance(t, torch.Tensor) or t.grad_fn is None:
            raise ScenarioError("gradtrace.trace() takes tensors that have a grad_fn "
                                f"(got {type(t).__name__}"
                                f"{'' if not isinstance(t, torch.Tensor) else ' without one'})",
                                "pass the output of a computation on tensors that require grad")
    # No big-stack thread here: the caller holds the graph, so nothing gradtrace drops can
    # free a deep chain (and release() drops node references root first).
    session = CaptureSession(None, [], dict(names), CaptureOptions(
        backward=backward, saved=saved or profile, profile=profile),
        caller=None if caller is None else caller_cuts(caller))
    try:
        name_of = {id(t): n for n, t in reversed(named_tensors(names))}
        picked = [(name_of.get(id(t), f"output{i}"), t) for i, t in enumerate(outputs)]
        return session.finish(None, ([], "passed to gradtrace.trace()"), outputs=picked)
    finally:
        session.close()


class BlockRecorder:
    """Records from start() to stop(); stop() builds the Trace of what ran between."""

    def __init__(self, frame: FrameType, saved: bool = True, flow: bool = True,
                 profile: bool = False, all_threads: bool = False,
                 listener: RunListener | None = None) -> None:
        self.frame: FrameType | None = frame
        path = frame.f_code.co_filename
        self.label = f"{path}:{frame.f_lineno}"
        lines = "".join(linecache.getlines(path)).splitlines()  # as a scenario's are read
        self.session = CaptureSession(path, lines, {},
                                      CaptureOptions(backward=False, saved=saved or profile,
                                                     flow=flow, profile=profile,
                                                     listener=listener))
        if not all_threads:  # the block's own calls, not those other threads make meanwhile
            self.session.recorder.gate.only = self.session.host.module_calls.thread = \
                threading.get_ident()
        self._before = _bound(frame)
        self._recording = contextlib.ExitStack()

    def start(self) -> None:
        """Record from now on: alone, or nested in the recording this thread runs under (a
        scenario run's, another block's), which goes on recording the same calls."""
        if RECORDING and RECORDING[-1][0] == threading.get_ident():
            # the thread's one tracer is the outer's line log: shared, and the outer says
            # when it traces
            self.session.host.line_log = RECORDING[-1][1].host.line_log
            self.session.host.traces = False
        elif RUN_LOCK.acquire(blocking=False):
            self._recording.callback(RUN_LOCK.release)
        else:
            refused = ScenarioError(
                f"gradtrace.record() at {self.label} cannot run while another thread "
                "records (a gradtrace run or a record() block of that thread's)",
                "open the block in the thread that runs the other recording, or after "
                "that recording ends", self.frame.f_lineno if self.frame else None)
            if RECORDING and RECORDING[0][1].refused is None:  # a run stops with it
                RECORDING[0][1].refused = refused
            raise refused
        self._recording.enter_context(self.session.recording(self.frame))

    def stop(self, raised: BaseException | None = None) -> Trace | None:
        """Stop recording; the Trace of the block: up to where it raised, when it raised an
        Exception (None for an interrupt, or when it recorded nothing before it raised)."""
        try:
            self._recording.close()
            if self.frame is None or raised is not None and not isinstance(raised, Exception):
                return None
            names = self.session.names
            names.namespace.update({**self.frame.f_globals, **self.frame.f_locals})
            names.narrow(self._of_the_block(names.merged()))
            roots = (self.session.recorder.default_roots().roots,
                     "the roots of the block's last backward pass")
            if raised is None:
                return self.session.finish(self.label, roots, empty_ok=True)
            line = scenario_line(self.session.path or "", raised)
            stopped = ScenarioError(f"the block raised {type(raised).__name__}: {raised}",
                                    "the trace shows what the block did before it raised",
                                    line)
            try:
                self.session.finish(self.label, roots, stopped=stopped, empty_ok=True)
            except ScenarioStopped as partial:
                return partial.trace
            except ScenarioError:  # nothing was recorded before the error
                return None
            return None
        finally:
            self.frame = None
            self.session.close()

    def _of_the_block(self, scope: dict[str, Any]) -> Callable[[str, Any], bool]:
        """Whether a name is the block's: bound or rebound in it, or on its graph (tensors it
        used, modules whose forward or parameters it used); not a name that merely existed
        before it (a leaf nobody used is no unreached leaf of the block's)."""
        fresh = {n: v for n, v in scope.items() if self._before.get(n) != id(v)}
        roots = [v.grad_fn for v in fresh.values()
                 if isinstance(v, torch.Tensor) and v.grad_fn is not None]
        roots += [r for p in self.session.recorder.passes for r in p.roots if r is not None]
        nodes, _ = walk(roots)
        on_graph = {id(n) for n in nodes} | {id(n.variable) for n in nodes
                                             if hasattr(n, "variable")}
        release(nodes)
        # the leaves of the graphs the block let go of (frozen), by their tensors
        on_graph.update(key[1] for p in self.session.recorder.passes if p.frozen is not None
                        for key in placed_keys(p.frozen) if key[0] == "leaf")
        made_nodes = {id(m) for _, m in self.session.host.tracker.owner.values()}

        def used(value: Any) -> bool:
            if is_tensor(value):
                return id(value) in on_graph or id(value.grad_fn) in on_graph
            return any(id(m) in made_nodes for m in value.modules()) or \
                any(id(p) in on_graph for p in value.parameters())

        return lambda name, value: name in fresh or (
            (is_tensor(value) or is_module(value)) and used(value))


def _bound(frame: FrameType) -> dict[str, int]:
    """name -> id of each tensor and module the frame sees as the block starts."""
    return {n: id(v) for n, v in {**frame.f_globals, **frame.f_locals}.items()
            if is_tensor(v) or is_module(v)}
