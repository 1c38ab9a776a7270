"""How a scenario's run ended: finished, stopped at its pass limit, exited, raised or ran out
of time — and the tensors its function returned."""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator
from types import CodeType, FrameType, ModuleType
from typing import Any, NamedTuple

import torch

from ..compat.cpython import caller_frame
from ..errors import GradtraceError, Interrupted, ScenarioError
from .naming.names import ScenarioNames
from .naming.where import at_line, located, quoted, scenario_error, scenario_line
from .observers.gate import PassLimit
from .passes.recorder import Recorder
from .script.forked import exit_child, forked_child, forks_watched
from .script.process_state import (
    ExitHandler,
    ProcessExit,
    exit_handlers_taken,
    os_exit_stopping,
    tracers_kept,
)
from .script.scenario_thread import LATE_HINT, StopWindow, TimeUp, late
from .script.target import Target, call_function, run_module

# the frames between _script's and the script's own, less python's own module frame, plus
# the line log's tracer call as a frame starts: measured, the script recurses exactly as deep
# as under python (998 calls of a function at module level under the default limit of 1000)
_CALLS_TO_THE_MODULE = 3


class Outcome(NamedTuple):
    """The error that stopped the scenario part-way (None: it finished, or stopped at its
    pass limit), and the (name, tensor) pairs its function returned."""

    stopped: ScenarioError | None
    returned: list[tuple[str, Any]]
    failed_call: bool = False  # stopped by a call gradtrace recorded (backward, grad,
    # gradcheck) that raised
    exited: bool = False  # it called sys.exit(0) (or sys.exit(), os._exit(0)): a finish, as
    # for python


def execute(target: Target, code: CodeType, module: ModuleType, lines: list[str],
            recorder: Recorder, names: ScenarioNames, timeout: float | None,
            window: StopWindow) -> Outcome:
    """Run the target's code (and its function, for FILE::FUNC) and say how it ended."""
    path = target.path
    returned: list[tuple[str, Any]] = []
    try:
        with window.open():
            called = _script(target, code, module, window)
            if target.function is not None and called is not None:
                result, scope = called
                names.add([(target.function.rpartition("::")[2], scope)])
                returned = returned_tensors(result, scope)
    except PassLimit:
        pass  # the passes it was allowed ran: the trace says where it was stopped
    except (SystemExit, ProcessExit) as exc:
        if exc.code not in (None, 0):
            return Outcome(exit_error(path, lines, exc), [])
        return Outcome(None, returned, exited=True)
    except GradtraceError:
        raise
    except KeyboardInterrupt as exc:  # the script's own (a real Ctrl-C reaches the main
        # thread): python stops there too, with a traceback and exit 130
        raise Interrupted(f"interrupted {at_line(path, lines, scenario_line(path, exc))}") \
            from None
    except TimeUp as exc:
        line = scenario_line(path, exc)
        return Outcome(ScenarioError(f"{late(timeout)}: it was {at_line(path, lines, line)}",
                                     LATE_HINT, line), [])
    except BaseException as exc:  # what the scenario raised, of any kind (in backward() too:
        # python stops there as well, so gradtrace does, and says so)
        raised_in(names, exc)
        return Outcome(scenario_error(path, lines, exc), [],
                       failed_call=exc is recorder.failed)
    return Outcome(None, returned)


def raised_in(names: ScenarioNames, exc: BaseException) -> None:
    """Name the tensors of the code's frames where exc was raised, as they were then: a
    function's locals were last named at its latest pass, the step before (a loop that
    raises at its first NaN loss shows that loss)."""
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    if frames:
        names.look(frames[-1], hold=True)  # the run ended there: python frees them next


def _script(target: Target, code: CodeType, module: ModuleType,
            window: StopWindow) -> tuple[Any, dict[str, Any]] | None:
    """The target's code, as python runs it to its end: FUNC's return value and locals (None
    for a script); the atexit handlers it registered run last, and a tracer it left on is
    taken off before gradtrace's own code runs."""
    with tracers_kept(), exit_handlers_taken() as at_exit, os_exit_stopping(window), \
            forks_watched(), recursion_room(caller_frame(0)):
        try:
            try:
                run_module(code, module)
                called = None if target.function is None else call_function(target, module)
            except (ProcessExit, TimeUp):  # os._exit runs no handler; a time limit stops it
                at_exit.clear()
                raise
            finally:
                run_exit_handlers(at_exit)
        except BaseException as exc:
            if forked_child():  # os.fork()'s child at the script's end: it ends here
                exit_child(exc)
            raise
        if forked_child():
            exit_child(None)
        return called


@contextlib.contextmanager
def recursion_room(frame: FrameType | None) -> Iterator[None]:
    """The stack as deep for the script as python makes it: the recursion limit is raised by
    the frames below frame (gradtrace's, and the thread's) while the block runs."""
    limit, below = sys.getrecursionlimit(), _CALLS_TO_THE_MODULE
    while frame is not None:
        below, frame = below + 1, frame.f_back
    sys.setrecursionlimit(limit + below)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def run_exit_handlers(handlers: list[ExitHandler]) -> None:
    """Run atexit handlers as python does at exit: the last registered first, each error
    printed ("Exception ignored…") and the next one run; gradtrace's own stops go on up."""
    while handlers:
        func, args, kwargs = handlers.pop()
        try:
            func(*args, **kwargs)
        except (PassLimit, TimeUp, ProcessExit, GradtraceError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # the script's: python prints it and goes on
            print(f"Exception ignored in atexit callback: {func!r}", file=sys.stderr)
            traceback.print_exception(exc)


def exit_error(path: str, lines: list[str], exc: SystemExit | ProcessExit) -> ScenarioError:
    """The error for sys.exit(n) or os._exit(n), n not 0, told where the scenario called it
    (argparse's parse_args(), for a missing argument); the runner adds what it printed."""
    line = scenario_line(path, exc)
    call = "os._exit" if isinstance(exc, ProcessExit) else "sys.exit"
    return ScenarioError(
        f"{located(path, line)}: the scenario called {call}({exc.code!r})"
        f"{quoted(lines, line)}",
        f"`python {path}` exits the same way; the script's own arguments go after `--`",
        line)


def default_roots(target: Target, recorder: Recorder,
                  returned: list[tuple[str, Any]]) -> tuple[list[tuple[str | None, Any]], str]:
    """The roots when neither --root nor OUTPUT picks them, and why: what FUNC returned, else
    the roots of the scenario's last pass."""
    if returned:
        return list(returned), f"what {target.function} returned"
    seen = recorder.default_roots()  # (none alive: the code let go of them, frozen)
    if seen.asked:
        return seen.roots, f"the roots of pass {recorder.options.graph_pass}"
    where = f", at line {seen.line}" if seen.line else ""
    return seen.roots, f"the roots of the scenario's last backward pass{where}"


def returned_tensors(result: Any, scope: dict[str, Any]) -> list[tuple[str, Any]]:
    """The tensors a function returned (a tensor, or a tuple, list or dict of them), named
    as its locals call them, else return, return[0], return['loss']."""
    local = {id(v): k for k, v in scope.items() if isinstance(v, torch.Tensor)}
    if isinstance(result, torch.Tensor):
        items = [("return", result)]
    elif isinstance(result, (tuple, list)):
        items = [(f"return[{i}]", v) for i, v in enumerate(result)]
    elif isinstance(result, dict):
        items = [(f"return[{k!r}]", v) for k, v in result.items()]
    else:
        items = []
    return [(local.get(id(v), name), v) for name, v in items if isinstance(v, torch.Tensor)]
