"""The asyncio event loop the scenario's thread gets as python's main thread gets it:
`asyncio.get_event_loop()` with none set makes one (with a DeprecationWarning on 3.12 and
3.13), where any other thread gets "no current event loop"."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any


class _MainThreadLike(asyncio.DefaultEventLoopPolicy):  # type: ignore[misc, valid-type]
    """The default policy, with one more thread that gets a loop made as it first asks."""

    def __init__(self, thread: threading.Thread) -> None:
        super().__init__()
        self._thread = thread
        self._set = threading.local()  # called: this thread set its loop (None too)

    def set_event_loop(self, loop: Any) -> None:
        self._set.called = True
        super().set_event_loop(loop)

    def get_event_loop(self) -> Any:
        if threading.current_thread() is self._thread and not getattr(self._set, "called",
                                                                      False):
            if sys.version_info >= (3, 12):
                warnings.warn("There is no current event loop", DeprecationWarning,
                              stacklevel=_outside_asyncio())
            self.set_event_loop(self.new_event_loop())
        return super().get_event_loop()


def _outside_asyncio() -> int:
    """The stacklevel of the first caller outside asyncio, as CPython's policy finds it."""
    level, frame = 2, inspect.currentframe()
    frame = frame.f_back.f_back if frame and frame.f_back else None  # past get_event_loop
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if not (module == "asyncio" or module.startswith("asyncio.")):
            break
        frame, level = frame.f_back, level + 1
    return level


@contextlib.contextmanager
def main_thread_loop() -> Iterator[None]:
    """This thread gets its event loop as the main thread does while the block runs; the
    policy before is put back (Python 3.14 makes none implicitly, in any thread)."""
    if sys.version_info >= (3, 14) or \
            type(asyncio.get_event_loop_policy()) is not asyncio.DefaultEventLoopPolicy:
        yield  # a policy the process chose stays
        return
    before = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(_MainThreadLike(threading.current_thread()))
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(before)
