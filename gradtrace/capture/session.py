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

import torch

from ..compat.torch import compiled_region_frames, is_compiled_region
from ..errors import NoGraph, ScenarioError, ScenarioStopped
from ..extract.captured import Captured
from ..extract.tensors import Named
from ..model.facts import Fact, NoRoot, Stopped
from ..model.records import Source, Trace
from .modules.global_hooks import ModuleCalls
from .modules.module_hooks import ModuleHooks
from .modules.reducers import Reducers
from .modules.tracker import (
    ModuleTracker,
    module_objects,
    module_paths,
    paths_of_class,
    unsharded_aliases,
)
from .naming.bindings import binding_facts
from .naming.cuts import RanFirst, Statements, pass_cuts, place_leaf_findings
from .naming.names import ScenarioNames, library_file
from .naming.provenance import LineLog
from .naming.roots import choose_outputs, named_tensors, nothing_to_trace
from .naming.statements import statements_run, why_no_root
from .observers.base import InplaceModule
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

    def __init__(self, path: str | None, lines: list[str], namespace: dict[str, Any],
                 options: CaptureOptions, window: StopWindow | None = None) -> None:
        self.path = path  # the file whose lines are traced and cited (None: none)
        self.lines = lines
        self.options = options
        self.window = window or StopWindow()  # a time limit's: none for a live recording
        self.names = ScenarioNames(path, namespace)
        self._threads = set(threading.enumerate())  # those the scenario did not start
        self.line_log = LineLog(self.names.owns, library_file)
        self.traces = True  # it turns line_log on and off (not a block nested in another's)
        self.refused: ScenarioError | None = None  # a record() of another thread, refused
        self.module_calls = ModuleCalls()  # the one global forward hook pair
        self.tracker = ModuleTracker(self.module_calls)
        self.recorder = Recorder(Script(path or "<python>", lines), self.names, options, self)
        self.reducers = Reducers(self.module_calls)
        self.module_hooks = ModuleHooks(self.recorder, self.module_calls)
        clock = self.recorder.forward_clock()
        if clock is not None:  # --profile: module forward times (the innermost, so the
            # others' work is not in them), light steps' too
            self.module_calls.subscribe(clock.pre, clock.post, pausable=False)

    def detail(self, on: bool) -> None:
        """Note the lines, modules, module hooks and DDP modules of the forwards from now on,
        or not (a loop's light steps)."""
        if self.traces:
            self.line_log.follow(on)
        self.module_calls.follow(on)

    def source_of(self, node: Any) -> Source | None:
        """The line that made node. Inside a compiled function no line runs as such: its
        region's line is the first of the script's that its graph differentiates, as torch
        noted it (a compiled module's region is the line that called the module)."""
        if is_compiled_region(node) and id(node) not in self.tracker.owner:
            innermost = [next((where for where in reversed(frames) if self.names.owns(where[0])),
                              None) for frames in compiled_region_frames(node)]
            first = next((where for where in reversed(innermost) if where is not None), None)
            return None if first is None else self.line_log.source_at(first)
        return self.line_log.source_of(node)

    def library_source_of(self, node: Any) -> Source | None:
        """The line of a library's model code (transformers…) that made node, if one did (a
        compiled region's node has no line of its own: none)."""
        if is_compiled_region(node) and id(node) not in self.tracker.owner:
            return None
        return self.line_log.library_source_of(node)

    def module_of(self, node: Any) -> str | None:
        """The dotted path of the named nn.Module whose forward made node (None: a forward
        not followed, or a module no name reaches)."""
        owner = self.tracker.owner.get(id(node))
        if owner is None or owner[0] is not node:
            return None
        return module_objects(self.names.merged().items()).get(id(owner[1]))

    def inplace_module_of(self, node: Any) -> InplaceModule | None:
        """The nn.Module built with inplace=True (nn.ReLU(inplace=True)…) whose forward made
        node, and its dotted path when a name reaches it."""
        node_, module = self.tracker.owner.get(id(node), (None, None))
        if node_ is not node or getattr(module, "inplace", None) is not True:
            return None
        kind = type(module)
        return InplaceModule(f"nn.{kind.__name__}" if getattr(torch.nn, kind.__name__, None)
                             is kind else kind.__name__,
                             module_objects(self.names.merged().items()).get(id(module)))

    def owns(self, filename: str) -> bool:
        return self.names.owns(filename)

    @contextlib.contextmanager
    def recording(self, frame: FrameType | None = None) -> Iterator[None]:
        """Record while the block runs (frame: a with-block's own frame, already running)."""
        recorder = self.recorder
        with patched(recorder, self.window), self.module_calls.tracking(), \
                self.line_log.tracing(frame), recorder.recording():
            RECORDING.append((threading.get_ident(), self))
            try:
                yield
            finally:
                RECORDING.remove((threading.get_ident(), self))

    def forget(self, nodes: list[Any]) -> None:
        self.tracker.forget(nodes)
        self.module_hooks.forget(nodes)

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
        given, modules = self._captured(named, every)
        trace = recorder.trace(replace(
            given, scenario=label, outputs=outputs, root_reason=reason, facts=facts,
            stdout=printed(), root_pass=root_pass, ranks=launched()))
        if self.path is not None:
            trace = self._placed(trace, statements, modules, named)
        if stopped is not None:
            raise ScenarioStopped(stopped, trace)
        return trace

    def captured_now(self) -> Captured:
        """What the session knows now of names and modules, for a graph the code let go of."""
        every = self.names.merged()
        return self._captured(named_tensors(every), every)[0]

    def _captured(self, named: Named, every: dict[str, Any]
                  ) -> tuple[Captured, list[tuple[str, Any]]]:
        """The capture record's names, modules and their hooks; the (name, object) pairs of
        the modules and objects named."""
        earlier, earlier_modules = self.names.earlier(named, every)
        modules = [*every.items(), *earlier_modules]
        return Captured(
            scenario=None, named=named, outputs=[], root_reason="", earlier=earlier,
            modules=module_paths(modules, self.tracker), hooks=self.module_hooks.labels(every),
            reduced=self.reducers.named(named), leaf_aliases=unsharded_aliases(modules),
            objects=modules), modules

    def _ran_first(self) -> RanFirst | None:
        return None if self.path is None else RanFirst(self.line_log.first_ran, self.path)

    def _placed(self, trace: Trace, statements: Callable[[], Statements],
                modules: list[tuple[str, Any]], named: Named) -> Trace:
        """Leaf findings placed, and the cuts of leaves no root reaches: lines that ran
        before the default graph's backward; a target or EMA copy is no cut."""
        return place_leaf_findings(
            trace, self.path or "", self.lines, statements, self.line_log.own_places(),
            functools.partial(paths_of_class, modules), self._ran_first(),
            self.recorder.default_roots().line,
            lambda: self.recorder.updated(named))

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
                             self.lines, statements(), self.line_log.lines_run(self.path))

    def _statements(self) -> Statements:
        ran = self.line_log.lines_run(self.path) if self.path is not None else None
        return statements_run(self.lines, ran or set())

    def _no_root(self, label: str | None, named: Named, empty_ok: bool) -> list[Fact]:
        """Why there is no root: a fact when something else was recorded (or empty_ok),
        else an error."""
        why, cut_at = why_no_root(named, self.lines, self.line_log.lines_run(self.path or ""),
                                  bool(self.recorder.passes))
        if self.recorder.passes:
            return [NoRoot(why, cut_at, next((n for n, t in named if t.requires_grad), None),
                           "passes")]
        if self.recorder.calls or self.recorder.facts:
            return [NoRoot(why, None, None, "calls")]
        if empty_ok:
            return [NoRoot(why, cut_at, None, "nothing")]
        raise NoGraph(label, why, cut_at)

    def close(self) -> None:
        """Drop every torch object held (the captured graph dies with its session)."""
        self.recorder.let_go.stop()  # (a block cut short by Ctrl-C never finished)
        self.recorder.release()
        self.tracker.owner.clear()
        self.module_hooks.clear()
        # a daemon thread the scenario left running reads its globals until the process
        # ends, as under python: they stay
        self.names.clear(namespace=not any(t.is_alive() and t not in self._threads
                                           for t in threading.enumerate()))

