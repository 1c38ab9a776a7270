"""The Python API: gradtrace.trace() and what it returns, with the notebook displays.

Importing it does not import torch; tracing does.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

from .compat.cpython import caller_frame
from .errors import ExportError
from .model.records import Finding, Trace

if TYPE_CHECKING:
    from .capture.options import RunListener
    from .findings.live import LiveLog


class TraceView:
    """A Trace (`.trace`; its fields read through this object too) and ways to show it."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def __getattr__(self, name: str) -> Any:
        if name == "trace":  # not set yet (copying, unpickling): no endless lookup
            raise AttributeError(name)
        return getattr(self.trace, name)

    def __repr__(self) -> str:
        t = self.trace
        return (f"<gradtrace trace of {t.scenario or 'python tensors'}: {len(t.nodes)} nodes, "
                f"{len(t.passes)} pass(es)>")

    def to_json(self) -> str:
        """The canonical JSON text (schema gradtrace.trace/3)."""
        from .render.json import to_json

        return to_json(self.trace)

    def to_dot(self, **options: Any) -> str:
        """Graphviz DOT text; options as DrawOptions (saved, grads, max_nodes, fold, focus…)."""
        from .render.dot import to_dot
        from .render.drawing import DrawOptions, drawing

        return to_dot(drawing(self.trace, DrawOptions(**options)))

    def to_mermaid(self, **options: Any) -> str:
        """Mermaid flowchart text, for Markdown (at most MERMAID_BOXES boxes unless
        max_boxes= says otherwise: Mermaid refuses bigger ones)."""
        from .render.bounded import MERMAID_BOXES
        from .render.drawing import DrawOptions, drawing
        from .render.mermaid import to_mermaid

        return to_mermaid(drawing(self.trace, DrawOptions(**{"max_boxes": MERMAID_BOXES,
                                                              **options})))

    def _repr_svg_(self) -> str | None:
        """Jupyter shows the graph as SVG (None, so it falls back to text, without Graphviz)."""
        from .render.dot import render

        try:
            return render(self.to_dot(), "svg").decode("utf-8")
        except ExportError:
            return None

    def show(self) -> None:
        """Print the whole `gradtrace show` report (tree, table, passes, findings), and the
        backward costs when it was profiled."""
        from rich.console import Console

        from .render.profile import cost_view
        from .render.report import Budget, report

        console = Console()
        console.print(report(self.trace, self.trace.shown_pass(),
                             budget=Budget.everything(), cut=False), crop=False)
        if self.trace.costs is not None:
            console.print(cost_view(self.trace, every=True), crop=False)

    def __rich__(self) -> Any:
        """The tree and the tensor table, for rich.print and the rich console."""
        from rich.console import Group

        from .render.table import tensor_table
        from .render.tree import graph_tree

        return Group(graph_tree(self.trace), tensor_table(self.trace))


def load_scenario(path: str, roots: list[str] | None = None, backward: bool = True,
                  saved: bool = True, profile: bool = False) -> TraceView:
    """Run the scenario file at path and return its trace."""
    from .capture.options import CaptureOptions
    from .capture.runner import run_scenario

    return TraceView(run_scenario(path, CaptureOptions(tuple(roots or ()), backward,
                                                       saved=saved or profile,
                                                       profile=profile)))


def trace(*outputs: Any, names: dict[str, Any] | None = None, backward: bool | None = None,
          saved: bool = True, profile: bool = False) -> TraceView:
    """The trace of the graph behind output tensors, or of a scenario file given by its path.

    names maps names to tensors or modules for labels; by default the caller's variables are
    used, as a scenario's module-level names are. backward=True also runs backward (ones for
    non-scalar outputs) and records its gradient flow. The default is the one rule of every
    entry point: gradtrace runs a backward of its own only in a script it runs itself (a path
    here, `show`, load_scenario) and only when the script ran none; tensors handed to it
    keep their .grad untouched. saved=False skips reading saved tensors, which is faster on
    big graphs, and is needed for a graph made under saved_tensors_hooks or a checkpoint
    before this call: reading runs their unpack hook (a recording tells such nodes, a graph
    at hand cannot). profile=True times each backward node (as `show --profile`; a graph of
    tensors needs backward=True).
    """
    if len(outputs) == 1 and isinstance(outputs[0], (str, os.PathLike)):
        return load_scenario(os.fspath(outputs[0]), backward=backward is not False,
                             saved=saved, profile=profile)
    from .capture.live import trace_tensors

    caller = None
    if names is None:  # the caller's variables: its file's lines tell where they were cut
        caller = caller_frame()
        names = {} if caller is None else {**caller.f_globals, **caller.f_locals}
    return TraceView(trace_tensors(list(outputs), names, bool(backward), saved, profile,
                                   caller))


class Recording(TraceView):
    """`with gradtrace.record() as rec:` — after the block, rec is the trace of what ran in
    it: its backward passes, Function calls and modules, named from the block's variables."""

    _listener: RunListener | None = None  # told while the block runs (watch())

    def __init__(self, saved: bool = True, flow: bool = True, profile: bool = False,
                 all_threads: bool = False) -> None:
        self._options = (saved, flow, profile, all_threads)

    def __enter__(self) -> Recording:
        self.start(caller_frame())
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        self.stop(error)  # an error in the block goes on up, with the trace

    def start(self, frame: FrameType | None) -> None:
        """Record from now on, as a block of frame's: named from its variables, its file's
        lines cited (a callback's start: the frame of the code that called the trainer)."""
        from .capture.live import BlockRecorder

        if frame is None:
            raise ExportError("record() needs the caller's frame, which this Python does "
                              "not give")
        self._block = BlockRecorder(frame, *self._options, listener=self._listener)
        self._block.start()

    def stop(self, error: BaseException | None = None) -> None:
        """Stop recording; the trace is what ran since start() (up to error, when it raised)."""
        trace = self._block.stop(error)
        if trace is not None:
            self.trace = trace
            if error is not None:
                with contextlib.suppress(AttributeError, TypeError):  # an exception's slots
                    error.gradtrace_trace = self  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return super().__repr__() if "trace" in self.__dict__ else "<gradtrace recording>"


def record(saved: bool = True, flow: bool = True, profile: bool = False,
           all_threads: bool = False) -> Recording:
    """Record the with-block it opens: `with gradtrace.record() as rec: loss.backward()`.

    Nothing runs that the block does not run (no backward of gradtrace's own). saved=False
    skips reading saved tensors, flow=False the gradient flow (faster on big models).
    profile=True times each backward node of the block's last pass (as `show --profile`).
    Only the calls of the block's own thread are recorded (a backward is the thread's that
    called it, wherever autograd runs its hooks): all_threads=True records every thread's.
    """
    return Recording(saved, flow, profile, all_threads)


class Watching(Recording):
    """`with gradtrace.watch(log="run.jsonl") as w:` — the block recorded as record() does,
    its steps and findings appended to the log and each finding said as they fire."""

    _listener: LiveLog | None = None

    def __init__(self, log: str | os.PathLike[str] | None, stop_on: frozenset[str],
                 say: Callable[[str], None], saved: bool, flow: bool,
                 all_threads: bool) -> None:
        super().__init__(saved, flow, False, all_threads)
        self._log, self._stop_on, self._say = log, stop_on, say

    @property
    def stopped(self) -> Finding | None:
        """The first finding of a stop_on code that fired (None: none yet): the loop's cue
        to stop, as a callback stops its trainer."""
        return None if self._listener is None else self._listener.live.stopped

    def start(self, frame: FrameType | None, rank: int | None = None) -> None:
        """Record from now on; the log's header written. Rank 0 alone writes and says (rank:
        this process's, as its trainer knows it; None: torchrun's, else 0)."""
        from .capture.script.ranks import launched
        from .findings.live import LiveFindings, LiveLog

        if rank is None:
            ranks = launched()
            rank = 0 if ranks is None else ranks.rank
        first = rank == 0
        live = LiveFindings("<python>" if frame is None else frame.f_code.co_filename,
                            sys.argv[1:], importlib.metadata.version("torch"), self._stop_on)
        self._listener = LiveLog(live, os.fspath(self._log) if first and self._log else None,
                                 self._say if first else _silent)
        super().start(frame)

    def stop(self, error: BaseException | None = None) -> None:
        """Stop recording; the log's end line says how the block ended."""
        assert self._listener is not None, "stop() before start()"
        try:
            super().stop(error)
        finally:
            self._listener.end("finished" if error is None else "failed")


def watch(log: str | os.PathLike[str] | None = None,
          stop_on: str | Iterable[str] | None = None,
          say: Callable[[str], None] | None = None, saved: bool = False, flow: bool = True,
          all_threads: bool = False) -> Watching:
    """Record the with-block as record() does and tell its run as it goes, as `gradtrace
    watch` does: `with gradtrace.watch(log="run.jsonl", stop_on="nan-value") as w:`.

    log: the run log (schema gradtrace.log/1), a line at a time while the block runs, its
    end line as the block ends. say: told each finding as it fires, with its step (default:
    the "gradtrace" logger's warning). Under torchrun only rank 0 writes and says. stop_on:
    finding codes ("a,b" or a list); w.stopped is the first that fired, for the loop to stop.
    saved and flow as record() (saved is off: a long run's passes need none).
    """
    from .findings.live import stop_codes

    return Watching(log, stop_codes(stop_on, "watch(stop_on=...)"),
                    say or logging.getLogger("gradtrace").warning, saved, flow, all_threads)


def _silent(line: str) -> None:
    """A rank other than 0 says nothing."""
