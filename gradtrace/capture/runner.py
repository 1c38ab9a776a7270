"""Run a scenario file as `python` would, recording it in a capture session, and build its
Trace."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
from types import CodeType

from ..errors import ScenarioError, ScenarioStopped
from ..extract.captured import RawCall
from ..model.records import Trace
from .execution import default_roots, execute
from .options import CaptureOptions
from .script.printed import descriptors_captured, python_output_captured
from .script.process_state import scenario_process
from .script.scenario_thread import RUN_LOCK, MainThread, StopWindow, in_big_stack
from .script.signals import signals_relayed
from .script.source import compile_scenario
from .script.target import Target, installed_module, parse_target
from .session import CaptureSession


def run_scenario(
    target: str | Path | Target, options: CaptureOptions = CaptureOptions(),
    with_calls: Callable[[list[RawCall]], None] | None = None, timeout: float | None = None,
) -> Trace:
    """Run the scenario (a path, "FILE::FUNC", or a Target with argv) and return its Trace.

    Roots: options.roots, else OUTPUT, else what FUNC returned, else the last pass's roots,
    else the last named tensor with a grad_fn. with_calls, if given, is called with the
    recorded Function calls while the scenario's module is still alive (its Functions can
    run again). timeout bounds the whole run in seconds (ScenarioError naming the line it
    was on). A scenario that stopped part-way raises ScenarioStopped with what it recorded.
    """
    if not isinstance(target, Target):
        target = parse_target(str(target))
    code, lines = compile_scenario(target.path)
    window, main = StopWindow(), MainThread()
    printed_below = io.StringIO()  # what subprocesses and C code wrote to fds 1 and 2
    streams = sys.stdout, sys.stderr  # the scenario's thread redirects them while it runs
    with RUN_LOCK:
        try:
            with descriptors_captured(printed_below) as printed_so_far:
                return in_big_stack(
                    lambda: _run(target, code, lines, options, with_calls, timeout, window,
                                 main, printed_so_far),
                    target.path, lines, timeout, window, main)
        except ScenarioStopped:  # its trace holds what the scenario printed
            raise
        except ScenarioError as error:  # no trace shows what it printed: the error does
            error.printed += printed_below.getvalue()
            raise
        finally:
            sys.stdout, sys.stderr = streams  # a thread stopped part-way cannot undo them


def _run(target: Target, code: CodeType, lines: list[str], options: CaptureOptions,
         with_calls: Callable[[list[RawCall]], None] | None, timeout: float | None,
         window: StopWindow, main: MainThread, printed_below: Callable[[], str]) -> Trace:
    with installed_module(target) as module:
        session = CaptureSession(target.path, lines, module.__dict__, options, window)
        printed = io.StringIO()
        try:
            echo = None if options.listener is None else options.listener.printed
            with scenario_process(target), python_output_captured(printed, echo), \
                    signals_relayed(main, window), session.recording():
                outcome = execute(target, code, module, lines, session.recorder,
                                  session.names, timeout, window)
            # a failed backward or gradcheck leaves the module and its Functions whole: they
            # can run again
            if with_calls is not None and (outcome.stopped is None or outcome.failed_call):
                with_calls(session.recorder.calls)
            try:
                return session.finish(
                    target.label, default_roots(target, session.recorder, outcome.returned),
                    stopped=outcome.stopped or session.refused,
                    printed=lambda: printed.getvalue() + printed_below(),
                    exited=outcome.exited)
            except ScenarioStopped as stop:  # its trace holds what the scenario printed
                stop.failed_call = outcome.failed_call
                raise
            except ScenarioError as error:
                error.printed = printed.getvalue()
                raise
        finally:
            session.close()  # here, in the big-stack thread, not in the caller's

