"""The process as `python FILE ARGS` would have it while a scenario runs, and as it was
afterwards: argv, sys.path, breakpoint(), the working folder, torch's process-wide settings
(`check` runs many scenarios in one process), tracers, atexit handlers and os._exit."""

from __future__ import annotations

import atexit
import contextlib
import operator
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from ...compat.torch import default_device_mode, mode_stack_depths, pop_modes_to
from ...errors import ScenarioError
from .event_loop import main_thread_loop
from .forked import write_printed
from .own_imports import folder_kept_out
from .scenario_thread import StopWindow
from .target import Target

# an atexit handler: the function, its arguments and keyword arguments
ExitHandler = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class ProcessExit(BaseException):
    """os._exit(code) in the scenario: it stops there as sys.exit(code) would (gradtrace
    reports what was recorded) instead of ending gradtrace before it could."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def scenario_process(target: Target) -> Iterator[None]:
    """Its folder first on sys.path (not for gradtrace's own imports), its argv, the event
    loop its thread gets as python's main thread does; restored afterwards. stdin is the
    process's, as under python; breakpoint() stops with a clear error (output is captured)."""
    saved = (sys.argv, list(sys.path), sys.breakpointhook)
    folder = str(Path(target.path).resolve().parent)
    sys.argv = [target.path, *target.args]
    sys.path.insert(0, folder)
    sys.breakpointhook = _no_debugger(saved[2], target.path)
    try:
        with torch_settings_kept(), _working_folder_kept(), folder_kept_out(folder), \
                main_thread_loop():
            yield
    finally:
        sys.argv, sys.path[:], sys.breakpointhook = saved


def _no_debugger(hook: Callable[..., Any], path: str) -> Callable[..., Any]:
    """breakpoint(): the hook PYTHONBREAKPOINT names (0: none) as under python; else a
    ScenarioError, since pdb's prompt would go into the captured output, unseen."""
    def breakpoint_hook(*args: Any, **kwargs: Any) -> Any:
        if os.environ.get("PYTHONBREAKPOINT"):
            return hook(*args, **kwargs)
        caller = traceback.extract_stack(limit=2)[0]
        raise ScenarioError(
            f"{caller.filename}:{caller.lineno}: breakpoint() cannot open pdb under "
            "gradtrace: it captures what the script prints, the debugger's prompt too",
            f"debug with `python {caller.filename}`; PYTHONBREAKPOINT=0 skips breakpoint() "
            "(under python too)", caller.lineno if caller.filename == path else None)
    return breakpoint_hook


@contextlib.contextmanager
def _working_folder_kept() -> Iterator[None]:
    folder = os.getcwd()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # the scenario may have removed it
            os.chdir(folder)


@contextlib.contextmanager
def torch_settings_kept() -> Iterator[None]:
    """torch's process-wide settings as they were: default dtype and device, modes, anomaly
    mode, deterministic algorithms, and this thread's grad mode."""
    dtype, device = torch.get_default_dtype(), default_device_mode()
    modes = mode_stack_depths()
    grad, anomaly = torch.is_grad_enabled(), torch.is_anomaly_enabled()
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        if default_device_mode() is not device:  # even one that says cpu: it is a mode
            torch.set_default_device(None if device is None else device.device)
        pop_modes_to(modes)  # set_default_device enters one
        torch.set_grad_enabled(grad)
        torch.autograd.set_detect_anomaly(anomaly)
        # only when changed: setting it imports torch._inductor (seconds)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])


@contextlib.contextmanager
def tracers_kept() -> Iterator[None]:
    """This thread's tracer and profiler, and those threading gives new threads, as they were
    before the block: one the script leaves installed must not run in gradtrace's code."""
    saved = sys.gettrace(), sys.getprofile(), threading.gettrace(), threading.getprofile()
    try:
        yield
    finally:
        # each set again only when changed: cProfile's profiler, for one, is installed in C
        # and cannot be set again from Python (its object is no profile function)
        for get, put, before in ((sys.gettrace, sys.settrace, saved[0]),
                                 (sys.getprofile, sys.setprofile, saved[1]),
                                 (threading.gettrace, threading.settrace, saved[2]),
                                 (threading.getprofile, threading.setprofile, saved[3])):
            if get() is not before:
                put(before)  # type: ignore[operator, arg-type]


@contextlib.contextmanager
def exit_handlers_taken() -> Iterator[list[ExitHandler]]:
    """The atexit handlers registered while the block runs, taken into a list (gradtrace runs
    them when the script ends), never left to run at gradtrace's exit, after its output."""
    register, unregister = atexit.register, atexit.unregister
    taken: list[ExitHandler] = []

    def taking(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        taken.append((func, args, kwargs))
        return func

    def untaking(func: Callable[..., Any]) -> None:
        taken[:] = [h for h in taken if h[0] != func]
        unregister(func)  # registered before the script: python would drop it too

    atexit.register, atexit.unregister = taking, untaking  # type: ignore[assignment]
    try:
        yield taken
    finally:
        atexit.register, atexit.unregister = register, unregister  # type: ignore[assignment]


@contextlib.contextmanager
def os_exit_stopping(window: StopWindow) -> Iterator[None]:
    """os._exit(n) in the scenario's thread raises ProcessExit(n); in a thread it started it
    stops the scenario's thread so and ends its own. A forked child (a DataLoader worker)
    exits as always: it is another process."""
    real, pid, scenario = os._exit, os.getpid(), threading.current_thread()
    # gradtrace's own threads exit as always (a scenario left behind by the time limit keeps
    # this in place while gradtrace exits)
    before = set(threading.enumerate()) - {scenario}

    def exiting(status: int) -> None:
        code = operator.index(status)  # a TypeError for what python refuses
        if os.getpid() != pid:  # a forked child: what it printed goes out first
            write_printed()
            real(code)
        if threading.current_thread() in before:
            real(code)
        if threading.current_thread() is scenario:
            raise ProcessExit(code)
        window.stop(ProcessExit(code))
        raise SystemExit  # ends this thread quietly

    os._exit = exiting  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real
