"""Which line of the scenario's own files made each autograd node, and which line of an
installed library's model code (transformers, timm…) when the scenario's line called into
one: a line tracer on those files only (torch's frames are not traced), keyed by autograd's
sequence numbers, which count nodes as they are made. Measured in bench/provenance.py
against a forward without it."""

from __future__ import annotations

import builtins
import contextlib
import functools
import linecache
import sys
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from ...compat.cpython import caller_frame
from ...compat.torch import (
    NO_SEQUENCE,
    CompileCallbacks,
    never_compiled,
    next_sequence_number,
    sequence_number,
)
from ...model.records import Source
from .tracer_off import CompilesUntraced, untraced_imports
from .tracer_off import settrace as _settrace
from .where import gradtrace_file


def own_tracer() -> Callable[..., Any] | None:
    """This thread's tracer when it is a line log's (None: none, or a debugger's or
    coverage's, which gradtrace leaves on)."""
    tracer = sys.gettrace()
    return tracer if isinstance(getattr(tracer, "__self__", None), LineLog) else None


# Note [the stack runs out in the tracer]
# A script recursing until RecursionError runs the stack out inside the log's tracer first
# (its calls sit above the script's deepest frame), and CPython takes off for good a tracer
# that raises. _line catches it and gives its spare _StackBack to the frame 50 calls up, as
# that frame's f_trace: once the frame is gone (returned, or its traceback let go where the
# script caught the error) there is room again, and _StackBack.__del__ sets the tracer again.
class _StackBack:
    """The f_trace of a frame well above where the stack ran out: see the Note above."""

    __slots__ = ("log",)

    def __init__(self, log: LineLog) -> None:
        self.log = log

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        tracer = self.log._call(frame, "call", None)  # as the frame's own tracer would
        return None if tracer is None else tracer(frame, event, arg)

    def __del__(self) -> None:
        self.log._stack_back()


UNTRACED = -1  # where a stretch the log did not trace begins: its nodes have no line
_UNTRACED_ENTRY = array("i", [UNTRACED])
# What a file is to the log: not traced (torch's), the scenario's own, a library's model code
_NOT_TRACED, _OWN, _LIBRARY = 0, 1, 2


class LineLog:
    """The lines of own files in the order they ran, each with the sequence number the next
    node would get then: a node was made by the last line that ran before its number (none
    when that is where an untraced stretch began: a loop's light steps)."""

    def __init__(self, owns: Callable[[str], bool],
                 library: Callable[[str], bool] = lambda file: False) -> None:
        # Arrays of machine integers, not lists of Python objects: a loop's lines run
        # 100,000s of times (16 bytes a line run instead of ~110).
        self.starts = array("q")  # the next sequence number as each line ran
        self.at = array("i")  # where each line is, as an index into places
        self.own_at = array("i")  # where the scenario's last own line then is (a library's
        # line runs below it)
        self.places: list[tuple[str, int]] = []  # (file, line), each once
        self._place_of: dict[tuple[str, int], int] = {}
        self._owns, self._library = owns, library
        self._owned: dict[str, int] = {}  # by file name, asked once per file: _OWN, …
        self._own = UNTRACED  # the own line that ran last
        self._sources: dict[tuple[str, int], Source] = {}
        self._thread: int | None = None  # the thread traced, while tracing() runs
        self._following = False  # its lines are traced now (not a loop's light step)
        self._spare: _StackBack | None = None  # for the next time the stack runs out
        self._compiles = CompileCallbacks(lambda: None, lambda: None)  # while tracing()

    @contextlib.contextmanager
    def tracing(self, frame: FrameType | None = None) -> Iterator[None]:
        """Trace this thread's own-file lines (and those of frame, already running: a
        with-block's); not when a debugger or coverage traces it."""
        if sys.gettrace() is not None:
            yield
            return
        if frame is not None and self._call(frame, "call", None) is not None:
            frame.f_trace = self._line
        _settrace(self._call)
        self._thread, self._following = threading.get_ident(), True
        self._spare = _StackBack(self)
        importing, settrace = builtins.__import__, sys.settrace
        compiles = CompilesUntraced(self._traces_this_thread, own_tracer)
        self._compiles = CompileCallbacks(compiles.began, compiles.ended)
        self._compiles.look()
        builtins.__import__ = untraced_imports(importing, own_tracer, self._compiles.look)
        sys.settrace = self._settrace_kept(settrace)
        try:
            yield
        finally:
            self._compiles.close()
            if getattr(builtins.__import__, "__wrapped__", None) is importing:
                builtins.__import__ = importing
            if getattr(sys.settrace, "__wrapped__", None) is settrace:
                sys.settrace = settrace
            self._thread = self._spare = None
            _settrace(None)
            if frame is not None:
                frame.f_trace = None

    def follow(self, on: bool) -> None:
        """Trace from now on, or not until told (a loop's light steps: with a tracer set,
        CPython runs every call of the thread on its slow path). Only in the thread traced."""
        if self._thread != threading.get_ident():
            return
        self._compiles.look()  # Dynamo imported in a light step
        following, self._following = self._following, on
        tracing = own_tracer() is not None
        if on and not tracing and sys.gettrace() is None:
            if following and self.at:  # taken off unseen (from C: coverage's stop()): the
                # nodes since its last line have no line known (that line, a stop, made none)
                self._own = self.at[-1] = self.own_at[-1] = UNTRACED
            self._trace_from(caller_frame())
        elif not on and tracing:
            _settrace(None)
            self._untraced_from_here()

    def _traces_this_thread(self) -> bool:
        return self._thread == threading.get_ident()

    def _trace_from(self, frame: FrameType | None) -> None:
        """Trace from now on: frame and the frames below it, already running, get their
        tracer back (and lose another's: python would call none after settrace(None))."""
        while frame is not None:
            frame.f_trace = self._call(frame, "call", None)
            frame = frame.f_back
        _settrace(self._call)

    def _untraced_from_here(self) -> None:
        """The nodes made from now on have no line, until a line is traced again."""
        self._own = UNTRACED
        self.starts.append(next_sequence_number())
        self.at.append(UNTRACED)
        self.own_at.append(UNTRACED)

    def _settrace_kept(self, settrace: Callable[..., Any]) -> Callable[..., Any]:
        """sys.settrace as the traced thread's script calls it: settrace(None) (pdb's
        `continue`) leaves the log on; a tracer of its own runs as under python, the nodes
        made meanwhile without a line, until the script takes it off."""
        ours = functools.cache(gradtrace_file)  # asked at each pass: by its file, once

        @functools.wraps(settrace)
        def kept(tracer: Callable[..., Any] | None) -> None:
            frame = caller_frame()
            if self._thread != threading.get_ident() or frame is None or ours(
                    frame.f_code.co_filename):
                return settrace(tracer)  # gradtrace's own, or another thread's
            if tracer is not None and getattr(tracer, "__self__", None) is not self:
                if own_tracer() is not None:
                    self._untraced_from_here()
                return settrace(tracer)
            if not self._following:  # a loop's light step: no tracer of the log's
                return settrace(None)
            if sys.gettrace() is not None:  # back from the script's
                self._trace_from(frame)
            return None
        return kept

    def _stack_back(self) -> None:
        """The frame that held the spare _StackBack is gone: the stack has room again."""
        if self._thread is None:
            return  # the log no longer traces
        self._spare = _StackBack(self)
        if self._thread == threading.get_ident() and self._following and sys.gettrace() is None:
            self._trace_from(caller_frame())

    @never_compiled  # trace functions are frames too: never rewritten by torch.compile
    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        owned = self._owned.get(name)
        if owned is None:
            owned = self._owned[name] = _OWN if self._owns(name) else \
                _LIBRARY if self._library(name) else _NOT_TRACED
        return self._line if owned else None  # torch's frames run untraced

    @never_compiled
    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        try:
            if event == "line":
                self._note(frame)
            elif event == "return":  # the caller's line goes on: `x + self.attn(x)` adds after
                caller = frame.f_back
                while caller is not None and not self._owned.get(caller.f_code.co_filename):
                    caller = caller.f_back  # through torch's frames (Module.__call__)
                if caller is not None:
                    self._note(caller)
        except RecursionError:  # Note [the stack runs out in the tracer]: no call in here
            up, n, spare = frame, 50, self._spare
            while n and up.f_back is not None:
                up, n = up.f_back, n - 1
            if spare is not None:
                self._spare, up.f_trace = None, spare
            if self.starts:  # the nodes made from here on have no line, unless one runs
                self.starts += self.starts[-1:]  # (+=: no call, which would count a level)
                self.at += _UNTRACED_ENTRY
                self.own_at += _UNTRACED_ENTRY
        return self._line

    def _note(self, frame: FrameType) -> None:
        place = frame.f_code.co_filename, frame.f_lineno
        i = self._place_of.get(place)
        if i is None:
            i = self._place_of[place] = len(self.places)
            self.places.append(place)
        if self._owned[place[0]] == _OWN:
            self._own = i
        self.starts.append(next_sequence_number())
        self.at.append(i)
        self.own_at.append(self._own)

    def lines_run(self, file: str) -> set[int] | None:
        """The lines of file that ran (None when nothing was traced: a debugger's run)."""
        if not self.starts:
            return None
        return {line for name, line in self.places if name == file}

    def first_ran(self, place: tuple[str, int]) -> int | None:
        """Where a (file, line) stands among the lines in the order each first ran (None:
        it never ran, or nothing was traced)."""
        return self._place_of.get(place)

    def own_places(self) -> list[tuple[str, int]]:
        """The (file, line) of each line of the scenario's own files that ran."""
        return [place for place in self.places if self._owned.get(place[0]) == _OWN]

    def lines_of(self, node: Any) -> tuple[Source | None, Source | None]:
        """The scenario line that made node (None: a leaf, or no line known), and the line of a
        library's model code below it (None: the scenario's own line made it)."""
        i = self._entry(node)
        if i is None:
            return None, None
        own, place = self.own_at[i], self.places[self.at[i]]
        return (None if own == UNTRACED else self.source_at(self.places[own]),
                self.source_at(place) if self._owned.get(place[0]) == _LIBRARY else None)

    def _entry(self, node: Any) -> int | None:
        """The log's entry of the line that ran last before node was made (None: none)."""
        number = sequence_number(node)
        i = bisect_right(self.starts, number) - 1
        return None if i < 0 or number == NO_SEQUENCE or self.at[i] == UNTRACED else i

    def source_at(self, where: tuple[str, int]) -> Source:
        """The Source of a (file, line)."""
        found = self._sources.get(where)
        if found is None:  # one record per line, however many nodes it made
            found = self._sources[where] = Source(*where, linecache.getline(*where).strip())
        return found
