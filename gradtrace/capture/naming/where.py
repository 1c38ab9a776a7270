"""Where in the scenario something happened: the line an exception came from, the line a
running thread is on, and an error the scenario raised told as its file, line and code."""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Callable
from types import CodeType
from typing import Any, TypeVar

from ...compat.cpython import caller_frame, thread_frame
from ...errors import ScenarioError


def scenario_line(path: str, exc: BaseException) -> int | None:
    """The innermost line of the scenario file in exc's traceback, if any."""
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        # a RecursionError the line log's tracer raised as a function started is told at the
        # line that called it, as python tells it
        if frame.f_code.co_filename == path and not (
                line is not None and isinstance(exc, RecursionError)
                and lineno == frame.f_code.co_firstlineno):
            line = lineno
    return line


def _folder_now() -> str:
    try:
        return os.getcwd()
    except OSError:  # deleted under gradtrace: the file system's root stands in
        return os.sep


_STARTED_IN = _folder_now()  # where a relative file name is read from, as python read it


def absolute(filename: str) -> str:
    """filename made absolute against the folder gradtrace started in: never by asking for
    the current folder, which the script may have deleted (or left)."""
    return os.path.normpath(filename if os.path.isabs(filename)
                            else os.path.join(_STARTED_IN, filename))


# the gradtrace package (this file is gradtrace/capture/naming/where.py)
_OURS = os.path.dirname(os.path.dirname(os.path.dirname(absolute(__file__))))
_FORWARDERS: set[CodeType] = set()


def gradtrace_file(filename: str) -> bool:
    """Whether filename is one of gradtrace's own files."""
    return absolute(filename).startswith(_OURS + os.sep)


_Function = TypeVar("_Function", bound=Callable[..., Any])


def forwards(function: _Function) -> _Function:
    """Mark a wrapper of gradtrace's that hands the script's call on to torch: an exception
    torch raises under it is the script's (a second backward through a freed graph, say)."""
    _FORWARDERS.add(function.__code__)
    return function


def scenario_error(path: str, lines: list[str], exc: BaseException) -> ScenarioError:
    """The error for an exception the scenario raised: its file, line and code, and that
    gradtrace stopped it there — or, when gradtrace's own code raised it, a bug of
    gradtrace's (plain `python` would not fail)."""
    line = scenario_line(path, exc)
    where, shown = located(path, line), quoted(lines, line)
    ours = None if runaway_recursion(exc) else ours_below_the_scenario(path, exc)
    if ours is not None:
        return ScenarioError(
            f"{where}: gradtrace failed while running this line (in its own {ours}): "
            f"{type(exc).__name__}: {exc}{shown}",
            f"this is a bug in gradtrace, not in your script (`python {path}` runs it): "
            "please report it; --debug shows the traceback", line)
    raised = f"{where}: the scenario raised {type(exc).__name__}"
    return ScenarioError(
        f"{raised}: {exc}{shown}",
        "python fails the same way: the script recursed deeper than its recursion limit; "
        f"`python {path}` shows the full traceback" if runaway_recursion(exc) else
        "gradtrace stopped the script there, as python would have: fix the scenario; "
        f"`python {path}` shows the full traceback", line, brief=raised)


def runaway_recursion(exc: BaseException) -> bool:
    """Whether exc is a RecursionError of code other than gradtrace's: more than half the
    recursion limit's frames in its traceback are not gradtrace's (any line may run out of
    stack where the script's own recursion has used it up)."""
    if not isinstance(exc, RecursionError):
        return False
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)
              if not gradtrace_file(frame.f_code.co_filename)]
    return len(frames) > sys.getrecursionlimit() // 2


def ours_below_the_scenario(path: str, exc: BaseException) -> str | None:
    """"gradtrace/capture/observers/steps.py:97" when the innermost of gradtrace's frames below the
    scenario's last one, as exc (or an exception it came from: torch.compile wraps what
    failed while it compiled) was raised, is gradtrace's own work, not a wrapper handing the
    script's call on to torch (forwards); None when the script's own code failed."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = list(traceback.walk_tb(error.__traceback__))
        last = max((i for i, (f, _) in enumerate(frames) if f.f_code.co_filename == path),
                   default=-1)
        ours = [(f, n) for f, n in frames[last + 1:] if gradtrace_file(f.f_code.co_filename)]
        if ours and ours[-1][0].f_code not in _FORWARDERS:
            frame, lineno = ours[-1]
            file = absolute(frame.f_code.co_filename)
            return f"{os.path.relpath(file, os.path.dirname(_OURS))}:{lineno}"
        # torch.compile tells where in Python it failed as text ("from user code: File …")
        if f'"{_OURS}{os.sep}' in str(error):
            return "code"
        error = error.__cause__ or error.__context__
    return None


def located(path: str, line: int | None) -> str:
    """ "s.py:12", or the file alone when the line is not one of its own."""
    return f"{path}:{line}" if line else path


def quoted(lines: list[str], line: int | None) -> str:
    """The line's code on a line of its own, indented ("" when unknown)."""
    text = lines[line - 1].strip() if line and line <= len(lines) else ""
    return f"\n    {text}" if text else ""


def running_line(path: str, lines: list[str]) -> tuple[int | None, str | None]:
    """The line of the file at path that this thread is running now, and its text."""
    frame = caller_frame()
    while frame is not None and frame.f_code.co_filename != path:
        frame = frame.f_back
    if frame is None:
        return None, None
    lineno = frame.f_lineno
    return lineno, lines[lineno - 1].strip() if 0 < lineno <= len(lines) else None


def running_at(thread: threading.Thread, path: str, lines: list[str]) -> str:
    """ "at s.py:12 `loss.backward()`": the scenario line a running thread is on."""
    frame = thread_frame(thread)
    line = None
    while frame is not None:  # innermost first: the first frame in the scenario's file
        if frame.f_code.co_filename == path:
            line = frame.f_lineno
            break
        frame = frame.f_back
    return at_line(path, lines, line)


def at_line(path: str, lines: list[str], line: int | None) -> str:
    """ "at s.py:12 `loss.backward()`", or where outside the file's own lines."""
    if line is None:
        return f"in {path} (outside its own lines)"
    code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return f"at {path}:{line}" + (f" `{code}`" if code else "")
