"""The thread a scenario runs in: a big stack, a time limit, and Ctrl-C, each of which names
the scenario line it stopped at; the main thread meanwhile carries out the calls only it may
make (signal.signal)."""

from __future__ import annotations

import contextlib
import gc
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ...compat.cpython import make_non_daemon
from ...errors import Interrupted, ScenarioError
from ..naming.where import running_at
from .stack import started_thread

RUN_LOCK = threading.Lock()  # a recording patches torch globally: one at a time

# After the time limit, how long the scenario gets to stop at its next Python line (then
# what it recorded is built and shown); a thread stuck in one C call (a long sleep) is left
# behind, and only the line is reported.
STOP_GRACE = 3.0
LATE_HINT = "give it more time (--timeout SECONDS), or make it do less"

Result = TypeVar("Result")


class ProcessEnd:
    """Whether the process ends by os._exit once its command is done (the CLI): a run's last
    collection is then left to the next run (or to that exit), the collector off meanwhile."""

    # a collection as a run ends would look at the whole trace built (~0.2 s a 100,000
    # nodes) only to free what the exit frees
    by_os_exit = False
    owed = False  # a run left its cycles uncollected: the next one collects them first


class TimeUp(BaseException):
    """Raised inside the scenario's thread when its time is up (not an Exception: a
    scenario's `except Exception` does not swallow it)."""


class Carrier(BaseException):
    """What is sent to the scenario's thread: CPython sends a class and makes its instance
    where it arrives; a subclass made by carrier() makes its exception instead, and notes that
    it arrived."""

    carried: BaseException
    arrived = False

    def __new__(cls, *args: Any) -> Any:
        cls.arrived = True
        return cls.carried


def carrier(exc: BaseException) -> type[Carrier]:
    """A class that raises exc itself where it is raised or arrives."""
    return type("Carrier", (Carrier,), {"carried": exc})


def late(timeout: float | None) -> str:
    return f"the scenario did not finish within {timeout or 0:g} s"


class StopWindow:
    """When the time limit may stop the scenario: only while its own code runs (and the
    threads it started), never while gradtrace builds the trace or records a pass."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._held = 0  # inside held(): a stop waits for the block's end
        self._due: type[Carrier] | None = None  # a stop waiting for the end of held()
        self._sent: type[Carrier] | None = None  # sent, and not arrived when last looked
        self.closed = threading.Event()  # the scenario's code is done: the trace is built next

    @contextlib.contextmanager
    def open(self) -> Iterator[None]:
        with self._lock:
            self._thread = threading.current_thread()
        try:
            yield
        finally:
            with self._lock:
                self._thread = None
            self.closed.set()

    def stop(self, exc: BaseException | None = None) -> None:
        """Raise exc (TimeUp when None; what a signal handler raised) in the scenario's thread
        at its next Python line, if it still runs its own code (at the end of held(), if it
        is in one)."""
        sent = carrier(TimeUp() if exc is None else exc)
        with self._lock:
            if self._thread is None:
                return
            if self._held:
                self._due = sent
            else:
                self._send(sent)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A block of gradtrace's bookkeeping a stop must not cut in two: it waits for the
        end (a no-op outside the scenario's thread)."""
        if threading.current_thread() is not self._thread:
            yield
            return
        with self._lock:
            self._defer_sent()  # sent just before the block: it would arrive inside
            held_before = self._held
            self._held += 1
        try:
            yield
        finally:
            with self._lock:
                self._held = held_before
                if not self._held and self._due:
                    self._send(self._due)
                    self._due = None

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Inside held(): a block the stop may cut (the code's own backward, its hooks)."""
        if threading.current_thread() is not self._thread:
            yield
            return
        with self._lock:
            held, self._held = self._held, 0
            due, self._due = self._due, None
        try:
            if due:
                raise due
            yield
        finally:
            with self._lock:
                self._defer_sent()
                self._held = held

    def _defer_sent(self) -> None:
        """Take back a stop sent and not yet arrived; it is due at the end of held()."""
        if self._sent is not None and not self._sent.arrived:
            self._due = self._sent
            self._send(None)

    def _send(self, exc: type[Carrier] | None) -> None:
        """CPython's asynchronous exception, the one way to stop a thread (None: take back
        the one sent)."""
        import ctypes

        assert self._thread is not None and self._thread.ident is not None
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread.ident),
                                                   ctypes.py_object(exc) if exc else None)
        self._sent = exc


# Python runs signal handlers in the main thread, but the kernel may hand a process's signal
# to any thread: one given to the scenario's thread leaves the main thread asleep in its wait,
# and the handler (a script's SIGALRM or SIGTERM, Ctrl-C) waits too. Waking this often runs it.
WAKE = 0.05  # seconds


# Threads gradtrace gave up waiting for (a scenario past its time limit and grace, a check
# past its --timeout) run on in this process: their backward calls belong to no later run.
LEFT_BEHIND: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


class MainThread:
    """The calls only the main thread may make (signal.signal), made by the scenario's thread:
    the thread that made this, which waits for the scenario, carries them out meanwhile."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # the thread that serves calls (they wait in the queue until it does), until it stops
        self._server: threading.Thread | None = threading.current_thread()
        self._at_end: list[Callable[[], None]] = []

    def call(self, work: Callable[[], Result]) -> Result:
        """work() in the serving thread, its result or error handed back (in this thread
        when none serves: it fails as it would have)."""
        result: list[Result] = []
        error: list[BaseException] = []
        done = threading.Event()

        def run() -> None:
            try:
                result.append(work())
            except BaseException as exc:  # handed to the caller's thread, re-raised there
                error.append(exc)
            finally:
                done.set()

        with self._lock:
            serving = self._server not in (None, threading.current_thread())
            if serving:
                self._requests.put(run)
        if not serving:
            return work()
        done.wait()
        if error:
            raise error[0]
        return result[0]

    def at_end(self, work: Callable[[], None]) -> None:
        """work() in the serving thread once it stops serving: what the run changed put back
        even when the run was cut short (a time limit, Ctrl-C)."""
        self._at_end.append(work)

    def ended(self) -> None:
        """Said by the scenario's thread as it ends: the wait is over."""
        self._requests.put(None)

    def serve(self, thread: threading.Thread, timeout: float | None) -> None:
        """Wait for thread as thread.join(timeout) does, carrying out its calls meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while (left := None if deadline is None else deadline - time.monotonic()) is None \
                    or left > 0:
                try:
                    run = self._requests.get(timeout=WAKE if left is None else min(left, WAKE))
                except queue.Empty:
                    continue  # the deadline, or a wake to run signal handlers
                if run is None:
                    thread.join()  # it is at its end
                    break
                run()
        finally:
            with self._lock:
                self._server = None
            while not self._requests.empty():  # asked for as serving stopped: done here
                if (run := self._requests.get()) is not None:
                    run()
            while self._at_end:
                self._at_end.pop()()


def in_big_stack(work: Callable[[], Result], path: str, lines: list[str],
                 timeout: float | None, window: StopWindow,
                 main: MainThread | None = None) -> Result:
    """work() in a thread with a big stack; a time limit and Ctrl-C name the scenario line
    the thread was on; main's calls are carried out by this thread meanwhile."""
    main = main or MainThread()
    result: list[Result] = []
    error: list[BaseException] = []

    def target() -> None:
        # The threads the scenario starts are not daemons unless it says so, as under
        # `python` (they inherit the flag from this thread; the run waits for them).
        make_non_daemon(threading.current_thread())
        # What the run leaves in reference cycles (a deep graph among it) is freed on this
        # big stack (or never, see ProcessEnd): freed by the collector on another thread's
        # stack, it overflows it. The objects older than the run are set aside meanwhile, so
        # that collection looks at the run's objects only (a full one costs ~0.1 s once torch
        # is imported). Not when the host froze some itself (a notebook's): unfreezing would
        # undo its own.
        if ProcessEnd.owed:  # `check` and `diff` run several: the run before's cycles
            gc.enable()  # are freed here, before this run's objects are set aside
            gc.collect()
            ProcessEnd.owed = False
        ours = not gc.get_freeze_count()
        if ours:
            gc.freeze()
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread, re-raised there
            error.append(exc)
        finally:
            if ProcessEnd.by_os_exit:
                gc.disable()  # its cycles are not freed on a smaller stack either
                ProcessEnd.owed = True
            else:
                gc.collect()
            if ours:
                gc.unfreeze()
            main.ended()

    # daemon: Ctrl-C or a time limit in the main thread ends gradtrace while a scenario runs
    thread = started_thread(target, "gradtrace-scenario")
    where = ""
    try:
        main.serve(thread, timeout)
        if thread.is_alive():
            where = running_at(thread, path, lines)
            window.stop()
            if window.closed.wait(STOP_GRACE):
                thread.join()  # building what was recorded: bounded by its size
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted {running_at(thread, path, lines)}") from None
    if thread.is_alive():
        LEFT_BEHIND.add(thread)
        raise ScenarioError(f"{late(timeout)}: it was {where}", LATE_HINT)
    if error:
        raise error[0]
    return result[0]
