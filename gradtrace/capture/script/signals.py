"""signal.signal and signal.set_wakeup_fd in a scenario as under `python`, though it runs in a
thread of its own: the main thread (which alone may) makes those calls for it, a handler it
installed runs when its signal arrives, and what the handler raises is raised in the scenario
at its next line. When its code ends, gradtrace's own handlers (Ctrl-C, SIGTERM) are back."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from ...compat.cpython import thread_frame
from .scenario_thread import MainThread, StopWindow


class Relayed:
    """A scenario's handler as the main thread runs it: given the frame the scenario is at,
    and what it raises (sys.exit() in a SIGTERM handler) raised in the scenario."""

    def __init__(self, handler: Any, thread: threading.Thread, window: StopWindow) -> None:
        self.handler = handler
        self._thread = thread
        self._window = window

    def __call__(self, signum: int, frame: Any) -> None:
        at = thread_frame(self._thread) or frame
        try:
            self.handler(signum, at)
        except BaseException as exc:  # the scenario's to handle: it stops there, as in python
            self._window.stop(exc)


@contextlib.contextmanager
def signals_relayed(main: MainThread, window: StopWindow) -> Iterator[None]:
    """While the block runs in the scenario's thread, its signal calls are made by main."""
    thread = threading.current_thread()
    set_handler, get_handler, set_wakeup = signal.signal, signal.getsignal, signal.set_wakeup_fd
    before: dict[int, Any] = {}  # each signal's handler before the scenario first set it
    wakeup: list[int] = []  # the wakeup fd before the scenario first set it

    def relayed_signal(signalnum: int, handler: Any) -> Any:
        if threading.current_thread() is not thread:  # its other threads fail, as in python
            return set_handler(signalnum, handler)
        # Ctrl-C's own handler stays gradtrace's: it stops the run at its line (exit 130)
        ours = handler if not callable(handler) or handler is signal.default_int_handler \
            else Relayed(handler, thread, window)
        previous = main.call(lambda: set_handler(signalnum, ours))
        before.setdefault(int(signalnum), previous)
        return previous.handler if isinstance(previous, Relayed) else previous

    def relayed_getsignal(signalnum: int) -> Any:
        handler = get_handler(signalnum)
        return handler.handler if isinstance(handler, Relayed) else handler

    def relayed_wakeup_fd(fd: int, *, warn_on_full_buffer: bool = True) -> int:
        if threading.current_thread() is not thread:
            return set_wakeup(fd, warn_on_full_buffer=warn_on_full_buffer)
        previous = main.call(lambda: set_wakeup(fd, warn_on_full_buffer=warn_on_full_buffer))
        wakeup[:] = wakeup or [previous]
        return previous

    def restore() -> None:
        """gradtrace's handlers back (only the main thread can, and only it changed them)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in before.items():
            if handler is not None:  # None: not set from Python, cannot be set back
                set_handler(signum, handler)
        before.clear()
        if wakeup:
            set_wakeup(wakeup.pop())

    main.at_end(restore)  # a run cut short (time limit, Ctrl-C) gets them back too
    signal.signal, signal.getsignal = relayed_signal, relayed_getsignal  # type: ignore[assignment]
    signal.set_wakeup_fd = relayed_wakeup_fd  # type: ignore[assignment]
    try:
        yield
    finally:
        signal.signal, signal.getsignal, signal.set_wakeup_fd = \
            set_handler, get_handler, set_wakeup  # type: ignore[assignment]
        main.call(restore)
