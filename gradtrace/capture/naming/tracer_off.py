"""Where the line log's tracer is off: gradtrace's own bookkeeping, the script's imports, and
torch.compile's compilations. The last two run millions of lines and make no node of the
script's (Lightning's import: 8 s more under the tracer; a cold compile 1.9× as long)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from .where import forwards

settrace = sys.settrace  # gradtrace's own calls skip the script's (LineLog._settrace_kept)


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
        settrace(self._tracer)

    def __exit__(self, *exc: object) -> None:
        settrace(self._before)


def untraced_imports(importing: Callable[..., Any], tracer: Callable[[], Any],
                     imported: Callable[[], None]) -> Callable[..., Any]:
    """importing (builtins.__import__) run with the tracer (tracer(): the line log's, or
    None) off, imported() told after each first import. (A node an own module makes as it is
    first imported has no line.)"""
    @functools.wraps(importing)
    @forwards  # an import that fails is the script's (python fails the same way)
    def untraced(name: str, *args: Any, **kwargs: Any) -> Any:
        # a name imported before (a function-level import, run at every call) costs no more
        if name in sys.modules or (off := tracer()) is None:
            return importing(name, *args, **kwargs)
        settrace(None)
        try:
            return importing(name, *args, **kwargs)
        finally:
            settrace(off)
            imported()
    return untraced


class CompilesUntraced:
    """Takes the line log's tracer off while torch.compile compiles in the thread it traces,
    and sets it back after (compat.CompileCallbacks says when)."""

    def __init__(self, traced: Callable[[], bool], tracer: Callable[[], Any]) -> None:
        self._traced = traced  # whether this thread is the one the log traces
        self._tracer = tracer  # its tracer, when set now
        self._off: Callable[..., Any] | None = None  # the tracer taken off

    def began(self) -> None:
        if self._traced() and (tracer := self._tracer()) is not None:
            self._off = tracer
            settrace(None)

    def ended(self) -> None:
        if self._off is not None and self._traced():
            off, self._off = self._off, None
            if sys.gettrace() is None:
                settrace(off)
