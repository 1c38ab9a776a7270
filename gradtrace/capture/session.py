"""One capture session: the host (names, line log, modules) and the recorder of one
recording, and the one place its Trace and all its findings are built, once.

Every entry point goes through it: scenario runs (show, dot, diff, check), gradtrace.trace(),
gradtrace.record() and the pytest plugin.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import FrameType
from typing import Any

from ..errors import ScenarioError, ScenarioStopped
from ..extract.captured import RawPass, SourceCuts
from ..extract.tensors import Named
from ..model.facts import Fact, Stopped
from ..model.records import Trace
from .host import ScriptHost
from .naming.roots import choose_outputs, named_tensors, nothing_to_trace
from .options import CaptureOptions
from .own_lines import OwnLines
from .passes.patches import patched
from .passes.recorder import Recorder, Script
from .script.scenario_thread import StopWindow

# (name or None, tensor) roots, and why they are the roots
Roots = tuple[list[tuple[str | None, Any]], str]

# (thread, session) of each recording under way, innermost last: a record() block may nest
# in the thread of the one around it (its wrappers on torch wrap that one's, restored first)
RECORDING: list[tuple[int, CaptureSession]] = []


class CaptureSession:
    """What one recording holds: torch is patched only inside recording(); finish() builds
    the Trace; close() lets go of every torch object."""

    def __init__(self, path: str | None, lines: list[str], namespace: dict[str, Any],
                 options: CaptureOptions, window: StopWindow | None = None,
                 caller: SourceCuts | None = None) -> None:
        self.path = path  # the file whose lines are traced and cited (None: none)
        self.caller = caller  # trace(tensors)'s: the lines of its caller's file that ran
        self.lines = lines
        self.options = options
        self.window = window or StopWindow()  # a time limit's: none for a live recording
        self._threads = set(threading.enumerate())  # those the scenario did not start
        self.refused: ScenarioError | None = None  # a record() of another thread, refused
        self.host = ScriptHost(path, namespace)
        self.names = self.host.names
        self.recorder = Recorder(Script(path or "<python>", lines), self.names, options,
                                 self.host)
        self.host.attach(self.recorder)

    @contextlib.contextmanager
    def recording(self, frame: FrameType | None = None) -> Iterator[None]:
        """Record while the block runs (frame: a with-block's own frame, already running)."""
        recorder = self.recorder
        host = self.host
        with patched(recorder, self.window), host.module_calls.tracking(), \
                host.line_log.tracing(frame), recorder.recording():
            RECORDING.append((threading.get_ident(), self))
            try:
                yield
            finally:
                RECORDING.remove((threading.get_ident(), self))

    def finish(self, label: str | None, default_roots: Roots, outputs: Named | None = None,
               stopped: ScenarioError | None = None, printed: Callable[[], str] = str,
               empty_ok: bool = False, exited: bool = False) -> Trace:
        """The Trace of what was recorded, with every finding (raised in ScenarioStopped when
        stopped says the code stopped part-way), and gradtrace's own backward when the code
        ran none. outputs: roots given by the caller, used as they are. empty_ok: code that
        made no graph at all gives a trace saying so (a with-block), not an error. exited:
        the code ended with sys.exit(0) (a script's --help, before any tensor). printed:
        what the code printed, read as the record is made."""
        recorder = self.recorder
        recorder.let_go.stop()  # the code ended: what is held now is the trace's
        every = self.names.merged()
        named = named_tensors(every)
        if stopped is not None and not (recorder.passes or recorder.calls or recorder.facts
                                        or any(t.grad_fn for _, t in named)):
            raise stopped  # nothing recorded: the error alone says it all
        own_lines = OwnLines(self.path, self.lines, self.host, recorder, self.caller)
        outputs, reason, root_pass = self._roots(label, named, default_roots, outputs,
                                                 empty_ok, exited)
        facts = self._session_facts(label, named, bool(outputs or root_pass), stopped,
                                    empty_ok, own_lines)
        recorder.end(outputs, named, stopped is not None)  # gradtrace's own backward, if any
        given = self.host.captured(named, every)
        trace = recorder.trace(replace(
            given, scenario=label, outputs=outputs, root_reason=reason,
            facts=[*facts, *recorder.facts, *own_lines.facts(named)], stdout=printed(),
            root_pass=root_pass, source=own_lines.cuts(given.objects)))
        if self.options.listener is not None:
            self.options.listener.ended(trace.findings)
        if stopped is not None:
            raise ScenarioStopped(stopped, trace)
        return trace

    def _roots(self, label: str | None, named: Named, default_roots: Roots,
               outputs: Named | None, empty_ok: bool, exited: bool
               ) -> tuple[Named, str, RawPass | None]:
        """The roots of the trace's graph and why; or, when the code let go of the default
        roots, their pass (its graph frozen, or held still). An error when there is nothing
        to trace."""
        root_pass = self.recorder.default_roots().released \
            if outputs is None and not default_roots[0] and not self.options.roots \
            and "OUTPUT" not in self.names.namespace else None
        if outputs is not None or root_pass is not None:
            return outputs or [], default_roots[1], root_pass
        nothing_to_trace(label, self.recorder.spawned, bool(self.recorder.passes), named,
                         empty_ok, exited)
        return (*choose_outputs(label or "", self.names.namespace, named, self.options.roots,
                                default_roots), None)

    def _session_facts(self, label: str | None, named: Named, rooted: bool,
                stopped: ScenarioError | None, empty_ok: bool, own_lines: OwnLines
                ) -> list[Fact]:
        """The session's own facts, first: why there is no root, where the code stopped,
        where --passes stopped it."""
        facts = [] if rooted else own_lines.no_root(label, named, empty_ok)
        if stopped is not None:  # after an error, only what the code itself did is shown
            facts.append(Stopped(stopped.message, stopped.hint, stopped.line))
        if self.recorder.gate.capped is not None:
            facts.append(self.recorder.gate.capped)
        return facts

    def close(self) -> None:
        """Drop every torch object held (the captured graph dies with its session)."""
        self.recorder.let_go.stop()  # (a block cut short by Ctrl-C never finished)
        self.recorder.release()
        # a daemon thread the scenario left running reads its globals until the process
        # ends, as under python: they stay
        self.host.clear(namespace=not any(t.is_alive() and t not in self._threads
                                          for t in threading.enumerate()))

