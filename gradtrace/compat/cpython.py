"""CPython's private names gradtrace relies on (checked on CPython 3.10–3.13), each with a
fallback: frames of other threads, the interpreter's exit steps, thread flags."""

from __future__ import annotations

import atexit
import concurrent.futures.thread
import inspect
import sys
import threading
import warnings
from types import FrameType
from typing import Any

from . import probe

_PYTHON = f"Python {sys.version.split()[0]}"
_CHECKED = "CPython 3.10, 3.11, 3.12, 3.13"


def _find(owner: Any, name: str) -> Any:
    """owner.name, or AttributeError: a probe's find."""
    return getattr(owner, name)


def caller_frame(depth: int = 1) -> FrameType | None:
    """The frame depth calls above the caller's (1: its caller's), by the public
    inspect.currentframe(); None on a Python without frames or a stack not that deep."""
    frame = inspect.currentframe()  # this function's
    for _ in range(depth + 1):
        frame = frame and frame.f_back
    return frame


_current_frames = probe(_PYTHON, "sys._current_frames", lambda: _find(sys, "_current_frames"),
                        "a time limit or signal does not say which line the script was on",
                        _CHECKED)


def thread_frame(thread: threading.Thread) -> FrameType | None:
    """The frame another thread runs now (None when unknown)."""
    if _current_frames is None:
        return None
    return _current_frames().get(thread.ident or -1)  # type: ignore[no-any-return]


_run_exitfuncs = probe(_PYTHON, "atexit._run_exitfuncs", lambda: _find(atexit, "_run_exitfuncs"),
                       "atexit handlers of the script do not run when gradtrace exits at once",
                       _CHECKED)


def exit_status(code: object) -> int:
    """The exit status `sys.exit(code)` gives under `python`: None is 0, text is printed, 1."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def run_exit_handlers() -> None:
    """Run the atexit handlers now, as the interpreter would at its exit."""
    if _run_exitfuncs is not None:
        _run_exitfuncs()


_filters_mutated = probe(_PYTHON, "warnings._filters_mutated",
                         lambda: _find(warnings, "_filters_mutated"),
                         "a warning filter gradtrace removed may stay cached for a call site",
                         _CHECKED)


def remove_warning_filter(entry: Any) -> None:
    """Take entry out of warnings.filters, dropping the call sites' caches of the old list
    (what warnings.filterwarnings does when it adds one)."""
    if entry in warnings.filters:
        warnings.filters.remove(entry)  # type: ignore[attr-defined]
        if _filters_mutated is not None:
            _filters_mutated()


_pool = probe(_PYTHON, "concurrent.futures.thread._threads_queues",
              lambda: (_find(concurrent.futures.thread, "_threads_queues"),
                       _find(concurrent.futures.thread, "_worker").__code__),
              "an idle thread pool worker the script left is waited for until the time limit",
              _CHECKED)


def idle_pool_worker(thread: threading.Thread) -> bool:
    """Whether thread is a concurrent.futures worker waiting for work with none queued (one
    torch.compile's inductor started, say): `python` would have stopped it at exit."""
    if _pool is None:
        return False
    queues, worker_code = _pool
    queue = queues.get(thread)
    frame = thread_frame(thread)
    return queue is not None and queue.empty() and frame is not None \
        and frame.f_code is worker_code  # no work item's frame above it: between items


_daemonic = probe(_PYTHON, "threading.Thread._daemonic",
                  lambda: _find(threading.current_thread(), "_daemonic"),
                  "threads a script starts are daemons, not waited for at its end", _CHECKED)


def make_non_daemon(thread: threading.Thread) -> None:
    """Threads a thread starts inherit its daemon flag; Python forbids setting it on a running
    thread, so the private flag is set."""
    if _daemonic is not None:
        thread._daemonic = False  # type: ignore[attr-defined]
