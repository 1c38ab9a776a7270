"""Recording a with-block of ordinary code (`with gradtrace.record() as rec:`), as a scenario
run is recorded: its passes, Function calls and modules, named from the block's frame."""

from __future__ import annotations

import contextlib
import linecache
from types import FrameType

from ..errors import ScenarioError
from ..findings.passes import pass_findings
from ..model.records import Trace
from .modules import ModuleTracker, module_paths
from .names import ScenarioNames
from .provenance import LineLog
from .recorder import Recorder
from .roots import choose_outputs, named_tensors
from .runner import RUN_LOCK


class BlockRecorder:
    """Patches torch from start() to stop(); stop() builds the Trace of what ran between."""

    def __init__(self, frame: FrameType, saved: bool = True, flow: bool = True) -> None:
        self.frame: FrameType | None = frame
        self.path = frame.f_code.co_filename
        self.label = f"{self.path}:{frame.f_lineno}"
        self.names = ScenarioNames(self.path, {})
        self.recorder = Recorder(self.path, linecache.getlines(self.path), self.names)
        self.recorder.read_saved = saved
        self.recorder.capture_flow = flow
        self.tracker = ModuleTracker()
        self.line_log = LineLog(self.names.owns)
        self.recorder.source_of = self.line_log.source_of
        self._patches = contextlib.ExitStack()

    def start(self) -> None:
        if not RUN_LOCK.acquire(blocking=False):
            raise ScenarioError("gradtrace.record() cannot run inside another recording or "
                                "scenario run", "end the other recording first")
        self._patches.callback(RUN_LOCK.release)
        self._patches.enter_context(self.recorder.patched())
        self._patches.enter_context(self.tracker.tracking())
        self._patches.enter_context(self.line_log.tracing(self.frame))

    def stop(self, build: bool = True) -> Trace | None:
        """Undo the patches; the Trace of the block (None when build is False)."""
        try:
            self._patches.close()
            if not build or self.frame is None:
                return None
            return self._trace(self.frame)
        finally:
            self.frame = None
            self.recorder.release()
            self.tracker.owner.clear()
            self.names.clear()

    def _trace(self, frame: FrameType) -> Trace:
        recorder = self.recorder
        self.names.namespace.update({**frame.f_globals, **frame.f_locals})
        every = self.names.merged()
        named = named_tensors(every)
        outputs, reason = choose_outputs(
            self.label, {}, named, [],
            (recorder.last_roots, "the roots of the block's last backward pass"))
        return recorder.trace(self.label, named, outputs, reason,
                              [*recorder.findings, *pass_findings(recorder.passes)],
                              module_paths(every, self.tracker))
