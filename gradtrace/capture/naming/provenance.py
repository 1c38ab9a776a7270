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
from ...compat.torch import NO_SEQUENCE, never_compiled, next_sequence_number, sequence_number
from ...model.records import Source


class tracer_set:  # noqa: N801 - used as a function is: `with tracer_set(t):`
    """sys.settrace(tracer) inside the block, this thread's tracer before it afterwards.

    gradtrace's own bookkeeping runs with the line log's tracer off: while any tracer is set,
    CPython 3.11 runs every frame of the thread on its slow path (a training loop's passes
    took twice as long). A class, not a generator: every pass enters two."""

    def __init__(self, tracer: Callable[..., Any] | None) -> None:
        self._tracer = tracer
        self._before: Callable[..., Any] | None = None

    def __enter__(self) -> None:
        self._before = sys.gettrace()
        sys.settrace(self._tracer)

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._before)


def own_tracer() -> Callable[..., Any] | None:
    """This thread's tracer when it is a line log's (None: none, or a debugger's or
    coverage's, which gradtrace leaves on)."""
    tracer = sys.gettrace()
    return tracer if isinstance(getattr(tracer, "__self__", None), LineLog) else None


def _untraced(importing: Callable[..., Any]) -> Callable[..., Any]:
    """importing (builtins.__import__) run with the line log's tracer off: a package's
    import runs millions of lines (Lightning's: 5 million, 8 s more) and makes no node.
    (A node an own module makes as it is first imported has no line.)"""
    @functools.wraps(importing)
    def untraced(name: str, *args: Any, **kwargs: Any) -> Any:
        # a name imported before (a function-level import, run at every call) costs no more
        if name in sys.modules or (tracer := own_tracer()) is None:
            return importing(name, *args, **kwargs)
        sys.settrace(None)
        try:
            return importing(name, *args, **kwargs)
        finally:
            sys.settrace(tracer)
    return untraced


UNTRACED = -1  # where a stretch the log did not trace begins: its nodes have no line
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

    @contextlib.contextmanager
    def tracing(self, frame: FrameType | None = None) -> Iterator[None]:
        """Trace this thread's own-file lines (and those of frame, already running: a
        with-block's); not when a debugger or coverage traces it."""
        if sys.gettrace() is not None:
            yield
            return
        if frame is not None and self._call(frame, "call", None) is not None:
            frame.f_trace = self._line
        sys.settrace(self._call)
        self._thread = threading.get_ident()
        importing = builtins.__import__
        builtins.__import__ = _untraced(importing)
        try:
            yield
        finally:
            if getattr(builtins.__import__, "__wrapped__", None) is importing:
                builtins.__import__ = importing
            self._thread = None
            sys.settrace(None)
            if frame is not None:
                frame.f_trace = None

    def follow(self, on: bool) -> None:
        """Trace from now on, or not until told (a loop's light steps: with a tracer set,
        CPython runs every call of the thread on its slow path). Only in the thread traced."""
        if self._thread != threading.get_ident():
            return
        tracing = own_tracer() is not None
        if on and not tracing and sys.gettrace() is None:
            frame = caller_frame()  # the frames already running get their tracer back
            while frame is not None:
                if self._call(frame, "call", None) is not None:
                    frame.f_trace = self._line
                frame = frame.f_back
            sys.settrace(self._call)
        elif not on and tracing:
            sys.settrace(None)
            self._own = UNTRACED
            self.starts.append(next_sequence_number())
            self.at.append(UNTRACED)
            self.own_at.append(UNTRACED)

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
        if event == "line":
            self._note(frame)
        elif event == "return":  # the caller's line goes on: `x + self.attn(x)` adds after
            caller = frame.f_back
            while caller is not None and not self._owned.get(caller.f_code.co_filename):
                caller = caller.f_back  # through torch's frames (Module.__call__)
            if caller is not None:
                self._note(caller)
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

    def source_of(self, node: Any) -> Source | None:
        """The scenario line that made node (the one that called the library code that
        did); None for a leaf, or when no line is known."""
        i = self._entry(node)
        return None if i is None or self.own_at[i] == UNTRACED else \
            self.source_at(self.places[self.own_at[i]])

    def library_source_of(self, node: Any) -> Source | None:
        """The line of a library's model code that made node, below its scenario line;
        None when the scenario's own line did."""
        i = self._entry(node)
        if i is None:
            return None
        place = self.places[self.at[i]]
        return self.source_at(place) if self._owned.get(place[0]) == _LIBRARY else None

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
