"""Run a scenario file as `python` would, recording it, and build its Trace."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, NamedTuple

import torch

from ..errors import GradtraceError, Interrupted, ScenarioError
from ..extract.build import RawCall
from ..findings.graph import unreached
from ..findings.passes import pass_findings
from ..findings.registry import (
    GRAPH_CUT,
    NO_GRAPH,
    PASSES_CAPPED,
    SCENARIO_STOPPED,
)
from ..model.records import Finding, Trace
from .explain import (
    Statement,
    at_line,
    bound_at,
    graph_cut,
    leaf_cut,
    running_at,
    scenario_error,
    scenario_line,
    statements_run,
    why_no_root,
)
from .higher import second_derivatives
from .modules import ModuleTracker, module_paths
from .names import ScenarioNames
from .provenance import LineLog
from .recorder import PassLimit, Recorder
from .roots import choose_outputs, named_tensors
from .target import (
    DEFAULT_PASSES,
    Target,
    call_function,
    installed_module,
    parse_target,
    run_module,
)

# Deep graphs are freed recursively by torch; a big stack keeps a 100,000-node graph alive
# through teardown. Only touched pages are committed, so this costs no memory up front.
STACK_SIZE = 1 << 30
RUN_LOCK = threading.Lock()  # the recorder patches torch globally: one run at a time


def run_scenario(
    target: str | Path | Target, roots: Sequence[str] = (), backward: bool = True,
    order: int = 1, saved: bool = True, flow: bool = True,
    with_calls: Callable[[list[RawCall]], None] | None = None, timeout: float | None = None,
    passes: int | None = DEFAULT_PASSES,
) -> Trace:
    """Run the scenario (a path, "FILE::FUNC", or a Target with argv) and return its Trace.

    roots names the roots (else OUTPUT, else what FUNC returned, else the last pass's roots,
    else the last named tensor with a grad_fn);
    backward=False skips gradtrace's own backward when the scenario runs none;
    order=2 also computes second derivatives of the first backward's (scalar) root;
    saved=False does not read saved tensors, flow=False records no gradient flow (faster,
    for pictures that do not show them). with_calls, if given, is called with the recorded
    Function calls while the scenario's module is still alive (its Functions can run again).
    timeout bounds the whole run in seconds (ScenarioError naming the line it was on);
    passes stops the scenario at its pass after that many (None: no limit).
    """
    if not isinstance(target, Target):
        target = parse_target(str(target))
    code, lines = _compile(target.path)
    window = _StopWindow()
    options = _Options(list(roots), backward, order, saved, flow, with_calls, timeout, passes)
    with RUN_LOCK:
        return _in_big_stack(lambda: _run(target, code, lines, options, window),
                             target.path, lines, timeout, window)


class _Options(NamedTuple):
    roots: list[str]
    backward: bool
    order: int
    saved: bool
    flow: bool
    with_calls: Callable[[list[RawCall]], None] | None
    timeout: float | None
    passes: int | None


def trace_tensors(outputs: list[Any], names: dict[str, Any], backward: bool,
                  saved: bool = True) -> Trace:
    """The Trace of the graph behind live output tensors, labelled from names."""
    for t in outputs:
        if not isinstance(t, torch.Tensor) or t.grad_fn is None:
            raise ScenarioError("gradtrace.trace() takes tensors that have a grad_fn "
                                f"(got {type(t).__name__}"
                                f"{'' if not isinstance(t, torch.Tensor) else ' without one'})",
                                "pass the output of a computation on tensors that require grad")
    # No big-stack thread here: the caller holds the graph, so nothing gradtrace drops can
    # free a deep chain (and release() drops node references root first).
    return _trace_live(outputs, names, backward, saved)


def _trace_live(outputs: list[Any], names: dict[str, Any], backward: bool,
                saved: bool) -> Trace:
    named = named_tensors(names)
    name_of = {id(t): n for n, t in reversed(named)}
    picked = [(name_of.get(id(t), f"output{i}"), t) for i, t in enumerate(outputs)]
    recorder = Recorder("<python>", [], ScenarioNames(None, dict(names)))
    recorder.read_saved = saved
    if backward:
        own_backward(recorder, [t for _, t in picked])
    return recorder.trace(None, named, picked, "passed to gradtrace.trace()",
                          pass_findings(recorder.passes), module_paths(names, None))


def _compile(path: str) -> tuple[CodeType, list[str]]:
    p = Path(path)
    if not p.exists():
        raise ScenarioError(f"no such file: {path}", "check the path; scenarios are .py files")
    if p.is_dir():
        raise ScenarioError(f"{path} is a directory, not a scenario file",
                            "pass a .py file, e.g. scenarios/chain_rule.py")
    if p.suffix != ".py":
        raise ScenarioError(
            f"{path} is not a Python file (expected a .py scenario)",
            "a scenario is ordinary Python code that builds tensors; name it *.py",
        )
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read {path}: {exc.strerror}") from exc
    try:  # bytes, as `python` reads a file: a BOM or a coding cookie picks the encoding
        code = compile(data, path, "exec")
        source = importlib.util.decode_source(data)
    except SyntaxError as exc:
        if "unicode error" in exc.msg or "Non-UTF-8" in exc.msg:
            raise ScenarioError(
                f"{path} is not UTF-8 text and declares no other encoding: {exc.msg}",
                "save the scenario as UTF-8, or declare its encoding on line 1 or 2 "
                "(# -*- coding: latin-1 -*-)") from exc
        where = f"{path}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
        text = (exc.text or "").rstrip("\n")
        shown = f"\n    {text.strip()}" if text.strip() else ""
        raise ScenarioError(
            f"{where}: syntax error: {exc.msg}{shown}",
            f"fix the line; `python {path}` shows the same error",
        ) from exc
    except (ValueError, LookupError) as exc:  # NUL bytes, an unknown encoding
        raise ScenarioError(f"{path} cannot be compiled: {exc}") from exc
    return code, source.splitlines()


class ScenarioStopped(ScenarioError):
    """The scenario raised or ran out of time after recording something: trace holds what
    was recorded up to there (with an error finding saying where it stopped)."""

    def __init__(self, message: str, hint: str | None, trace: Trace) -> None:
        super().__init__(message, hint)
        self.trace = trace


class _TimeLimit(BaseException):
    """Raised inside the scenario's thread when its time is up (not an Exception: a
    scenario's `except Exception` does not swallow it)."""


# After the time limit, how long the scenario gets to stop at its next Python line (then
# what it recorded is built and shown); a thread stuck in one C call (a long sleep) is left
# behind, and only the line is reported.
STOP_GRACE = 3.0


def _in_big_stack(work: Callable[[], Trace], path: str, lines: list[str],
                  timeout: float | None, window: _StopWindow) -> Trace:
    """work() in a thread with a big stack; a time limit and Ctrl-C name the scenario line
    the thread was on."""
    result: list[Trace] = []
    error: list[BaseException] = []

    def target() -> None:
        # The threads the scenario starts are not daemons unless it says so, as under
        # `python` (they inherit the flag from this thread; _run waits for them).
        threading.current_thread()._daemonic = False  # type: ignore[attr-defined]
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread, re-raised there
            error.append(exc)

    # daemon: Ctrl-C or a time limit in the main thread ends gradtrace while a scenario runs
    thread = threading.Thread(target=target, name="gradtrace-scenario", daemon=True)
    below_python = io.StringIO()
    streams = sys.stdout, sys.stderr  # the scenario redirects them while it runs
    where = ""
    try:
        # here, not in the thread: a time limit or Ctrl-C must give the descriptors back
        # before gradtrace says anything
        with _descriptors_captured(below_python):
            old = threading.stack_size(STACK_SIZE)  # read when the thread starts
            try:
                thread.start()
            finally:
                threading.stack_size(old)
            thread.join(timeout)
            if thread.is_alive():
                where = running_at(thread, path, lines)
                window.stop()
                if window.closed.wait(STOP_GRACE):
                    thread.join()  # building what was recorded: bounded by its size
    except KeyboardInterrupt:
        sys.stdout, sys.stderr = streams  # the thread cannot undo its redirection now
        raise Interrupted(f"interrupted {running_at(thread, path, lines)}") from None
    if thread.is_alive():
        sys.stdout, sys.stderr = streams
        raise ScenarioError(f"{_late(timeout)}: it was {where}", _LATE_HINT)
    printed = below_python.getvalue()
    if error:
        if printed and isinstance(error[0], ScenarioStopped):
            error[0].trace = _with_printed(error[0].trace, printed)
        raise error[0]
    return _with_printed(result[0], printed)


def _with_printed(trace: Trace, printed: str) -> Trace:
    return replace(trace, stdout=trace.stdout + printed) if printed else trace


def _late(timeout: float | None) -> str:
    return f"the scenario did not finish within {timeout or 0:g} s"


_LATE_HINT = "give it more time (--timeout SECONDS), or make it do less"


class _StopWindow:
    """When the time limit may stop the scenario: only while its own code runs (and the
    threads it started), never while gradtrace builds the trace."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
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

    def stop(self) -> None:
        """Raise _TimeLimit in the scenario's thread at its next Python line, if it still runs
        its own code (CPython's asynchronous exception)."""
        import ctypes

        with self._lock:
            if self._thread is not None and self._thread.ident is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._thread.ident), ctypes.py_object(_TimeLimit))


def _run(target: Target, code: CodeType, lines: list[str], options: _Options,
         window: _StopWindow) -> Trace:
    with installed_module(target) as module:
        names = ScenarioNames(target.path, module.__dict__)
        recorder = Recorder(target.path, lines, names)
        recorder.order = options.order
        recorder.order_root = options.roots[0] if options.roots else None
        recorder.read_saved = options.saved
        recorder.capture_flow = options.flow
        recorder.pass_limit = options.passes
        tracker = ModuleTracker()
        line_log = LineLog(names.owns)
        recorder.source_of = line_log.source_of
        output = io.StringIO()
        try:
            with _scenario_process_state(target, output), recorder.patched(), \
                    tracker.tracking(), line_log.tracing():
                stopped, returned = _execute(target, code, module, lines, recorder, names,
                                             options.timeout, window)
            return _recorded(target, lines, options, recorder, names, (tracker, line_log),
                             stopped, returned, output.getvalue())
        finally:
            # Drop the scenario's objects here, in the big-stack thread, not in the caller's.
            recorder.release()
            tracker.owner.clear()
            names.clear()


def _execute(target: Target, code: CodeType, module: ModuleType, lines: list[str],
             recorder: Recorder, names: ScenarioNames, timeout: float | None,
             window: _StopWindow) -> tuple[ScenarioError | None, list[tuple[str, Any]]]:
    """Run the target: the error that stopped it part-way (None: it finished, or stopped at
    its pass limit), and the tensors FUNC returned."""
    path = target.path
    returned: list[tuple[str, Any]] = []
    try:
        with window.open():
            run_module(code, module)
            if target.function is not None:
                result, scope = call_function(target, module)
                names.add([(target.function.rpartition("::")[2], scope)])
                returned = returned_tensors(result, scope)
    except PassLimit:
        pass  # the passes it was allowed ran: the trace says where it was stopped
    except SystemExit as exc:
        if exc.code not in (None, 0):
            return ScenarioError(f"{path}: the scenario called sys.exit({exc.code!r})"), []
    except (KeyboardInterrupt, GradtraceError):
        raise
    except _TimeLimit as exc:
        line = scenario_line(path, exc)
        return ScenarioError(f"{_late(timeout)}: it was {at_line(path, lines, line)}",
                             _LATE_HINT, line), []
    except BaseException as exc:  # what the scenario raised, of any kind
        if exc is not recorder.failed:
            return scenario_error(path, lines, exc), []
    return None, returned


def _recorded(target: Target, lines: list[str], options: _Options, recorder: Recorder,
              names: ScenarioNames, where: tuple[ModuleTracker, LineLog],
              stopped: ScenarioError | None, returned: list[tuple[str, Any]],
              printed: str) -> Trace:
    """The Trace of what the scenario did (raised in ScenarioStopped when it stopped
    part-way), with gradtrace's own backward when it ran none."""
    path = target.path
    every = names.merged()
    named = named_tensors(every)
    findings: list[Finding] = []
    if stopped is not None and not (recorder.passes or any(t.grad_fn for _, t in named)):
        raise stopped  # nothing recorded: the error alone says it all
    if not named and not recorder.passes:
        raise ScenarioError(
            f"{target.label} names no tensors",
            "assign tensors to module-level names, call backward() in the functions that "
            "make them, or run one function with FILE::FUNC")
    outputs, reason = choose_outputs(path, names.namespace, named, options.roots,
                                     _fallback(target, recorder, returned))
    if not outputs:
        why, cut_at = why_no_root(named, lines, where[1].lines_run(path))
        if recorder.passes:
            findings.append(NO_GRAPH.finding(
                f"no autograd graph: {why}", line=cut_at,
                tensor=next((n for n, t in named if t.requires_grad), None)))
        elif recorder.calls or recorder.findings:
            findings.append(NO_GRAPH.finding(
                "no named tensor has a grad_fn, so there is no graph to show; "
                "the scenario's gradcheck and Function calls are reported instead",
                severity="info"))
        else:
            raise ScenarioError(
                f"{target.label}: no output to trace: {why}",
                "an output is a tensor with a grad_fn; see `gradtrace show --help`", cut_at)
    if stopped is None:  # after an error, only what the scenario itself did is shown
        if outputs and options.backward and not recorder.passes:
            own_backward(recorder, [t for _, t in outputs])
        if options.order == 2 and recorder.second_order is None and outputs:
            recorder.second_order = second_derivatives(outputs[0][1], outputs[0][0], named)
    else:
        findings.append(SCENARIO_STOPPED.finding(stopped.message, hint=stopped.hint,
                                                 line=stopped.line))
    if recorder.capped_at is not None:
        findings.append(PASSES_CAPPED.finding(
            f"stopped after {options.passes} backward passes, at the next one "
            f"({recorder.capped_at})", hint="--passes all runs the script to the end",
            line=recorder.capped_line))
    findings.extend(recorder.findings)
    statements = functools.cache(lambda: statements_run(lines, where[1].lines_run(path) or set()))
    findings.extend(_cuts(recorder, lines, statements))
    findings.extend(pass_findings(recorder.passes))
    if options.with_calls is not None and stopped is None:
        options.with_calls(recorder.calls)
    trace = recorder.trace(target.label, named, outputs, reason, findings,
                           module_paths(every, where[0]), printed)
    trace = _leaf_lines(trace, path, lines, statements)
    if stopped is not None:
        raise ScenarioStopped(stopped.message, stopped.hint, trace)
    return trace


def _cuts(recorder: Recorder, lines: list[str],
          statements: Callable[[], list[Statement]]) -> list[Finding]:
    """For each pass whose root had no graph ("does not require grad"): the line that lost
    it, from the statements that ran."""
    found = []
    for number, p in enumerate(recorder.passes, 1):
        if p.error is None or "does not require grad" not in p.error:
            continue
        for name in dict.fromkeys(n for n in p.root_names if n):
            cut = graph_cut(name, statements())
            if cut is not None:
                line, why = cut
                found.append(GRAPH_CUT.finding(
                    f"pass {number}: {name} has no graph because line {line} "
                    f"`{lines[line - 1].strip()}` made it so: {why}", tensor=name, line=line,
                    hint="compute it with tensor ops outside no_grad, from tensors that "
                    "require grad (keep .detach(), .item() and torch.tensor() out of it)"))
    return found


def _leaf_lines(trace: Trace, path: str, lines: list[str],
                statements: Callable[[], list[Statement]]) -> Trace:
    """Findings about a leaf told where: the line that bound it, and for leaves no root
    reaches, the line that took a value computed from them without its graph."""
    lost = unreached(trace)
    if not lost and not any(f.tensor and f.line is None for f in trace.findings):
        return trace  # the common case: no scan of the lines that ran
    placed = [replace(f, file=path, line=line)
              if f.tensor and f.line is None and (line := bound_at(f.tensor, statements()))
              else f for f in trace.findings]
    by_name: dict[str, list[str]] = {}  # model -> model.0.weight, model.0.bias, …
    for leaf in lost:
        by_name.setdefault(leaf.partition(".")[0], []).append(leaf)
    for name, leaves in by_name.items():
        cut = leaf_cut(name, statements())
        if cut is None:
            continue
        line, why, through = cut
        who = leaves[0] if len(leaves) == 1 else f"{len(leaves)} tensors of {name} ({leaves[0]}, …)"
        via = "it" if through == leaves[0] else f"{through} (computed from {name})"
        placed.append(GRAPH_CUT.finding(
            f"{who} reach{'es' if len(leaves) == 1 else ''} no root because line {line} "
            f"`{lines[line - 1].strip()}` took {via} without its graph: {why}",
            severity="warning", tensor=leaves[0], file=path, line=line,
            hint="use the tensor itself where the loss needs its gradient; detach only what "
            "should not learn"))
    return replace(trace, findings=tuple(placed))


def _fallback(target: Target, recorder: Recorder,
              returned: list[tuple[str, Any]]) -> tuple[list[tuple[str | None, Any]], str]:
    """The default roots when neither --root nor OUTPUT picks them, and why."""
    if returned:
        return list(returned), f"what {target.function} returned"
    line = next((p.line for p in reversed(recorder.passes) if p.by == "scenario"), None)
    where = f", at line {line}" if line else ""
    return list(recorder.last_roots), f"the roots of the scenario's last backward pass{where}"


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


@contextlib.contextmanager
def _scenario_process_state(target: Target, output: io.StringIO) -> Iterator[None]:
    """Run as `python FILE ARGS` would: its folder on sys.path, argv, and its output
    captured; then restore what a scenario may change for the whole process (`check` runs
    many)."""
    saved = (sys.argv, list(sys.path), sys.stdin)
    sys.argv = [target.path, *target.args]
    sys.path.insert(0, str(Path(target.path).resolve().parent))
    sys.stdin = io.StringIO()
    try:
        with _torch_state(), _working_folder(), contextlib.redirect_stdout(output), \
                contextlib.redirect_stderr(output), warnings.catch_warnings():
            # Warnings are part of what the scenario prints, whoever else listens for them.
            warnings.simplefilter("default")
            warnings.showwarning = _warning_to(output)
            yield
    finally:
        sys.argv, sys.path[:], sys.stdin = saved[0], saved[1], saved[2]


@contextlib.contextmanager
def _descriptors_captured(output: io.StringIO) -> Iterator[None]:
    """File descriptors 1 and 2 into a file while the scenario runs: what its subprocesses,
    C extensions and os.write print joins its captured output, not gradtrace's stdout.
    (It comes after what Python printed: the two cannot be interleaved.)"""
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.flush()  # type: ignore[union-attr]
    saved: list[tuple[int, int]] = []
    with tempfile.TemporaryFile() as capture:
        for fd in (1, 2):
            with contextlib.suppress(OSError):  # a closed descriptor stays closed
                saved.append((fd, os.dup(fd)))
                os.dup2(capture.fileno(), fd)
        try:
            yield
        finally:
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            capture.seek(0)
            output.write(capture.read().decode("utf-8", "replace"))


@contextlib.contextmanager
def _working_folder() -> Iterator[None]:
    folder = os.getcwd()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # the scenario may have removed it
            os.chdir(folder)


@contextlib.contextmanager
def _torch_state() -> Iterator[None]:
    """torch's process-wide settings as they were: default dtype and device, anomaly mode,
    deterministic algorithms, and this thread's grad mode."""
    dtype, device = torch.get_default_dtype(), _device_context()
    modes = torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()
    grad, anomaly = torch.is_grad_enabled(), torch.is_anomaly_enabled()
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        if _device_context() is not device:  # even one that says cpu: it is a mode
            torch.set_default_device(None if device is None else device.device)
        # Modes left entered (set_default_device enters one) live in this thread's C++
        # state, which the thread frees as it ends, after Python has let go of it: a
        # Python object freed then, while the interpreter shuts down, aborted gradtrace
        # (`terminate called without an active exception`, exit 134).
        while torch._C._len_torch_function_stack() > modes[0]:
            torch._C._pop_torch_function_stack()
        while torch._C._len_torch_dispatch_stack() > modes[1]:
            torch._C._pop_torch_dispatch_stack()
        torch.set_grad_enabled(grad)
        torch.autograd.set_detect_anomaly(anomaly)
        # only when changed: setting it imports torch._inductor (seconds)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])


def _device_context() -> Any:
    """The DeviceContext mode torch.set_default_device entered in this thread, if any."""
    return getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)


def _warning_to(output: io.StringIO) -> Callable[..., None]:
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        output.write(warnings.formatwarning(message, category, filename, lineno, line))

    return show


def own_backward(recorder: Recorder, roots: list[torch.Tensor]) -> None:
    """gradtrace's own backward from the roots (ones for non-scalars), recorded as a pass."""
    roots = list({id(t): t for t in roots}.values())
    grads = [None if t.numel() == 1 else torch.ones_like(t) for t in roots]
    try:
        recorder.run_pass("backward", "gradtrace", roots, False, False,
                          lambda: torch.autograd.backward(roots, grads))
    except Exception as exc:  # recorded as the pass's error; where in the scenario, if it was
        where = scenario_line(recorder.path, exc)
        failed = recorder.passes[-1]
        if where is not None and failed.error is not None:
            failed.error += f" (at {recorder.path}:{where})"
