"""One capture session: the recorder, module tracker, line log and names of one recording,
and the one place a Trace and all its findings are built from what was recorded.

Every entry point goes through it: scenario runs (show, dot, diff, check), gradtrace.trace(),
gradtrace.record() and the pytest plugin.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import FrameType
from typing import Any

from ..errors import ScenarioError, ScenarioStopped
from ..extract.tensors import Named
from ..model.facts import Fact, Stopped
from ..model.records import Trace
from .host import ScriptHost
from .modules.tracker import (
    paths_of_class,
)
from .naming.bindings import binding_facts
from .naming.cuts import LineCuts, RanFirst, Statements, pass_cuts
from .naming.roots import choose_outputs, named_tensors, no_root_facts, nothing_to_trace
from .naming.statements import statements_run
from .options import CaptureOptions
from .passes.patches import patched
from .passes.recorder import Recorder, Script
from .script.ranks import launched
from .script.scenario_thread import StopWindow

# (name or None, tensor) roots, and why they are the roots
Roots = tuple[list[tuple[str | None, Any]], str]

# (thread, session) of each recording under way, innermost last: a record() block may nest
# in the thread of the one around it (its wrappers on torch wrap that one's, restored first)
RECORDING: list[tuple[int, CaptureSession]] = []


class CaptureSession:
    """What one recording holds: torch is patched only inside recording(); finish() builds
    the Trace; close() lets go of every torch object."""

    caller_cuts: LineCuts | None = None  # trace(tensors)'s: the caller's lines that ran

    def __init__(self, path: str | None, lines: list[str], namespace: dict[str, Any],
                 options: CaptureOptions, window: StopWindow | None = None) -> None:
        self.path = path  # the file whose lines are traced and cited (None: none)
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
        the code ended with sys.exit(0) (a script's --help, before any tensor)."""
        recorder = self.recorder
        recorder.let_go.stop()  # the code ended: what is held now is the trace's
        every = self.names.merged()
        named = named_tensors(every)
        if stopped is not None and not (recorder.passes or recorder.calls or recorder.facts
                                        or any(t.grad_fn for _, t in named)):
            raise stopped  # nothing recorded: the error alone says it all
        # the default roots, when the code let go of them: their pass's graph
        root_pass = recorder.default_roots().let_go \
            if outputs is None and not default_roots[0] and not self.options.roots \
            and "OUTPUT" not in self.names.namespace else None
        if outputs is None and root_pass is None:
            outputs, reason = self._outputs(label, named, default_roots, empty_ok, exited)
        else:
            outputs, reason = outputs or [], default_roots[1]
        statements = functools.cache(self._statements)
        facts: list[Fact] = self._no_root(label, named, empty_ok) \
            if not outputs and root_pass is None else []
        if stopped is not None:  # after an error, only what the code itself did is shown
            facts.append(Stopped(stopped.message, stopped.hint, stopped.line))
        if recorder.gate.capped is not None:
            facts.append(recorder.gate.capped)
        recorder.end(outputs, named, stopped is not None)
        facts.extend(recorder.facts)
        facts.extend(pass_cuts(recorder.passes, self.lines, statements, self._ran_first()))
        facts.extend(self._binding_facts(named, statements))
        given = self.host.captured(named, every)
        modules = list(given.objects)
        trace = recorder.trace(replace(
            given, scenario=label, outputs=outputs, root_reason=reason, facts=facts,
            stdout=printed(), root_pass=root_pass, ranks=launched(),
            source=self._source(statements, modules)))
        if stopped is not None:
            raise ScenarioStopped(stopped, trace)
        return trace

    def _ran_first(self) -> RanFirst | None:
        return None if self.path is None else RanFirst(self.host.line_log.first_ran, self.path)

    def _source(self, statements: Callable[[], Statements], modules: list[tuple[str, Any]]
                ) -> LineCuts | None:
        """The code's lines, for the trace's leaf findings and the cuts of leaves no root
        reaches: lines that ran before the default graph's backward (trace(tensors): the
        lines of the caller's file that ran to its call)."""
        if self.path is None:
            return self.caller_cuts
        return LineCuts(self.path, self.lines, statements, self.host.line_log.own_places,
                        functools.partial(paths_of_class, modules), self._ran_first(),
                        self.recorder.default_roots().line)

    def _outputs(self, label: str | None, named: Named, default_roots: Roots, empty_ok: bool,
                 exited: bool) -> tuple[Named, str]:
        """The roots of the trace's graph, and why: an error when there is nothing to trace."""
        nothing_to_trace(label, self.recorder.spawned, bool(self.recorder.passes), named,
                         empty_ok, exited)
        return choose_outputs(label or "", self.names.namespace, named, self.options.roots,
                              default_roots)

    def _binding_facts(self, named: Named, statements: Callable[[], Statements]) -> list[Fact]:
        """What the script's own lines say of its names (see naming/bindings.py)."""
        if self.path is None:
            return []
        return binding_facts(named, self.names.briefs_of_dead(), self.recorder.passes,
                             self.lines, statements(), self.host.line_log.lines_run(self.path))

    def _statements(self) -> Statements:
        ran = self.host.line_log.lines_run(self.path) if self.path is not None else None
        return statements_run(self.lines, ran or set())

    def _no_root(self, label: str | None, named: Named, empty_ok: bool) -> list[Fact]:
        """Why there is no root: a fact when something else was recorded (or empty_ok),
        else an error."""
        return no_root_facts(label, named, self.lines,
                             self.host.line_log.lines_run(self.path or ""),
                             bool(self.recorder.passes),
                             bool(self.recorder.calls or self.recorder.facts), empty_ok)

    def close(self) -> None:
        """Drop every torch object held (the captured graph dies with its session)."""
        self.recorder.let_go.stop()  # (a block cut short by Ctrl-C never finished)
        self.recorder.release()
        # a daemon thread the scenario left running reads its globals until the process
        # ends, as under python: they stay
        self.host.clear(namespace=not any(t.is_alive() and t not in self._threads
                                          for t in threading.enumerate()))

