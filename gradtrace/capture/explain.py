"""Why a scenario has no graph or could not run, in words a learner can act on."""

from __future__ import annotations

import ast
import contextlib
import os
import sys
import threading
import traceback

import torch

from ..errors import ScenarioError
from ..extract.tensors import Named

_GRAD_CUTTERS = {
    "no_grad": "torch.no_grad()",
    "inference_mode": "torch.inference_mode()",
    "set_grad_enabled": "torch.set_grad_enabled()",
    "detach": ".detach()",
}


def why_no_grad_fn(t: torch.Tensor) -> str:
    """Why a tensor asked for as a root has no grad_fn."""
    if t.requires_grad:
        return "it is a leaf (created by you, not computed)"
    return "it does not require grad"


def why_no_root(named: Named, lines: list[str], ran: set[int] | None = None) -> str:
    """Why no named tensor has a grad_fn, citing the lines that cut the graph — only lines
    that ran, when that is known (a no_grad in a function never called cuts nothing)."""
    wanting = [n for n, t in named if t.requires_grad]
    if not wanting:
        return ("no tensor requires grad; create the inputs with requires_grad=True, "
                "e.g. torch.tensor(5.0, requires_grad=True)")
    calls: dict[str, list[str]] = {}
    with contextlib.suppress(SyntaxError):  # it compiled once; parse it to find the cutters
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                called = getattr(node.func, "attr", None) or getattr(node.func, "id", "")
                if called in _GRAD_CUTTERS and (ran is None or node.lineno in ran):
                    calls.setdefault(_GRAD_CUTTERS[called], []).append(str(node.lineno))
    causes = [f"{what} on line {', '.join(sorted(set(at), key=int))}"
              for what, at in calls.items()]
    told = f" ({'; '.join(causes)})" if causes else ""
    return (f"{', '.join(wanting)} require grad, but nothing was computed from them with "
            f"gradients enabled: the computation ran under torch.no_grad() or was detached{told}")


def scenario_line(path: str, exc: BaseException) -> int | None:
    """The innermost line of the scenario file in exc's traceback, if any."""
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == path:
            line = lineno
    return line


_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the gradtrace package


def scenario_error(path: str, lines: list[str], exc: BaseException) -> ScenarioError:
    """The error for an exception the scenario raised: its file, line and code — or, when
    gradtrace's own code raised it, a bug of gradtrace's (plain `python` would not fail)."""
    line = scenario_line(path, exc)
    where = f"{path}:{line}" if line else path
    text = lines[line - 1].strip() if line and line <= len(lines) else ""
    shown = f"\n    {text}" if text else ""
    frames = list(traceback.walk_tb(exc.__traceback__))
    if frames and os.path.abspath(frames[-1][0].f_code.co_filename).startswith(_OURS + os.sep):
        return ScenarioError(
            f"{where}: gradtrace failed while running this line: "
            f"{type(exc).__name__}: {exc}{shown}",
            "this is a bug in gradtrace, not in your script: please report it; "
            "--debug shows the traceback", line)
    return ScenarioError(
        f"{where}: the scenario raised {type(exc).__name__}: {exc}{shown}",
        f"fix the scenario; `python {path}` shows the full traceback", line)


def running_at(thread: threading.Thread, path: str, lines: list[str]) -> str:
    """ "at s.py:12 `loss.backward()`": the scenario line a running thread is on."""
    frame = sys._current_frames().get(thread.ident or -1)
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
