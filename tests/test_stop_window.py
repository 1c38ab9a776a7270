"""The time limit stops the scenario's own code, never gradtrace's bookkeeping around a pass:
a stop that comes while a pass is recorded waits for the record to be whole."""

from __future__ import annotations

import threading
from collections.abc import Callable

from gradtrace.capture.script.scenario_thread import StopWindow, TimeUp


def _in_window(window: StopWindow, body: Callable[[list[str]], None]) -> list[str]:
    """Run body(log) in a thread inside the window; log says what it did and where it stopped."""
    log: list[str] = []

    def target() -> None:
        with window.open():
            try:
                body(log)
            except TimeUp:
                log.append("stopped")

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), log
    return log


def _asked_when(reached: threading.Event, window: StopWindow,
                asked: threading.Event | None = None) -> None:
    """Once reached is set, stop the window (then set asked), from another thread."""
    def stop() -> None:
        reached.wait(30)
        window.stop()
        if asked is not None:
            asked.set()

    threading.Thread(target=stop).start()


def _spin_until(done: threading.Event) -> None:
    """Python lines (a stop can land between them) until done is set."""
    while not done.is_set():
        sum(range(10))


def test_a_stop_during_bookkeeping_waits_for_its_end_then_stops_the_code() -> None:
    window, reached, asked = StopWindow(), threading.Event(), threading.Event()

    def body(log: list[str]) -> None:
        with window.held():
            reached.set()
            asked.wait(30)
            for i in range(1000):  # every line of the record is written
                log.append(f"row {i}")
        _spin_until(threading.Event())  # the code's own loop: only the stop ends it

    _asked_when(reached, window, asked)
    log = _in_window(window, body)
    assert log == [f"row {i}" for i in range(1000)] + ["stopped"]


def test_the_code_inside_a_pass_can_be_stopped_and_the_record_is_finished() -> None:
    window, reached = StopWindow(), threading.Event()

    def body(log: list[str]) -> None:
        with window.held():
            try:
                with window.released():  # the code's backward, its hooks
                    reached.set()
                    _spin_until(threading.Event())
            finally:
                log.append("record finished")
        log.append("not reached")

    _asked_when(reached, window)
    log = _in_window(window, body)
    assert log == ["record finished", "stopped"]


def test_a_stop_that_waited_stops_the_codes_backward_before_it_starts() -> None:
    window, reached, asked = StopWindow(), threading.Event(), threading.Event()

    def body(log: list[str]) -> None:
        with window.held():
            reached.set()
            asked.wait(30)
            log.append("before the backward")
            try:
                with window.released():
                    log.append("backward ran")
            finally:
                log.append("record finished")

    _asked_when(reached, window, asked)
    log = _in_window(window, body)
    assert log == ["before the backward", "record finished", "stopped"]


def test_outside_the_scenarios_thread_held_and_released_do_nothing() -> None:
    window = StopWindow()
    with window.held(), window.released():
        pass
    window.stop()  # no scenario runs: nothing to stop
