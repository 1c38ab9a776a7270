"""Run a scenario file as `python` would, recording it, and build its Trace."""

from __future__ import annotations

import contextlib
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
from types import CodeType
from typing import Any

import torch

from ..errors import Interrupted, ScenarioError
from ..extract.build import RawCall, build_trace
from ..findings.passes import pass_findings
from ..findings.registry import NO_GRAPH
from ..model.records import Finding, Trace
from .explain import running_at, scenario_error, scenario_line, why_no_root
from .higher import second_derivatives
from .modules import ModuleTracker, module_paths
from .recorder import Recorder
from .roots import choose_outputs, named_tensors

# Deep graphs are freed recursively by torch; a big stack keeps a 100,000-node graph alive
# through teardown. Only touched pages are committed, so this costs no memory up front.
STACK_SIZE = 1 << 30
_RUN_LOCK = threading.Lock()  # the recorder patches torch globally: one run at a time


def run_scenario(
    path: str | Path, roots: Sequence[str] = (), backward: bool = True, order: int = 1,
    saved: bool = True, flow: bool = True,
    with_calls: Callable[[list[RawCall]], None] | None = None, timeout: float | None = None,
) -> Trace:
    """Run the scenario at path and return its Trace.

    roots names the roots (else OUTPUT, else the last named tensor with a grad_fn);
    backward=False skips gradtrace's own backward when the scenario runs none;
    order=2 also computes second derivatives of the first backward's (scalar) root;
    saved=False does not read saved tensors, flow=False records no gradient flow (faster,
    for pictures that do not show them). with_calls, if given, is called with the recorded
    Function calls while the scenario's module is still alive (its Functions can run again).
    timeout bounds the whole run in seconds (ScenarioError naming the line it was on).
    """
    path = str(path)
    code, lines = _compile(path)
    with _RUN_LOCK:
        return _in_big_stack(
            lambda: _run(path, code, lines, list(roots), backward, order, saved, flow,
                         with_calls), path, lines, timeout)


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
    recorder = Recorder("<python>", [], dict(names))
    recorder.read_saved = saved
    if backward:
        own_backward(recorder, [t for _, t in picked])
    return build_trace(
        scenario=None, named=named, outputs=picked, root_reason="passed to gradtrace.trace()",
        passes=recorder.passes, calls=[], findings=pass_findings(recorder.passes),
        saved_before=recorder.saved_before if saved else None,
        grad_before=recorder.grad_before or {},
        modules=module_paths(names, None),
    )


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


def _in_big_stack(work: Callable[[], Trace], path: str, lines: list[str],
                  timeout: float | None) -> Trace:
    """work() in a thread with a big stack; a time limit and Ctrl-C name the scenario line
    the thread was on."""
    result: list[Trace] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread, re-raised there
            error.append(exc)

    # daemon: Ctrl-C in the main thread ends gradtrace even while a scenario still runs
    thread = threading.Thread(target=target, name="gradtrace-scenario", daemon=True)
    below_python = io.StringIO()
    streams = sys.stdout, sys.stderr  # the scenario redirects them while it runs
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
    except KeyboardInterrupt:
        sys.stdout, sys.stderr = streams  # the thread cannot undo its redirection now
        raise Interrupted(f"interrupted {running_at(thread, path, lines)}") from None
    if thread.is_alive():
        sys.stdout, sys.stderr = streams
        raise ScenarioError(
            f"the scenario did not finish within {timeout:g} s: it was "
            f"{running_at(thread, path, lines)}",
            "give it more time (--timeout SECONDS), or make it do less")
    if error:
        raise error[0]
    printed = below_python.getvalue()
    return replace(result[0], stdout=result[0].stdout + printed) if printed else result[0]


def _run(path: str, code: CodeType, lines: list[str], requested: list[str], backward: bool,
         order: int, saved: bool, flow: bool,
         with_calls: Callable[[list[RawCall]], None] | None = None) -> Trace:
    namespace: dict[str, Any] = {
        "__name__": "__main__", "__file__": path, "__builtins__": __builtins__,
    }
    recorder = Recorder(path, lines, namespace)
    recorder.order = order
    recorder.read_saved = saved
    recorder.capture_flow = flow
    tracker = ModuleTracker()
    output = io.StringIO()
    findings: list[Finding] = []
    try:
        with _scenario_process_state(path, output), recorder.patched(), tracker.tracking():
            try:
                exec(code, namespace)
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise ScenarioError(
                        f"{path}: the scenario called sys.exit({exc.code!r})") from exc
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # what the scenario raised, of any kind
                if exc is not recorder.failed:
                    raise scenario_error(path, lines, exc) from exc
        named = named_tensors(namespace)
        if not named:
            raise ScenarioError(
                f"{path} binds no tensors at module level",
                "assign the tensors you want to see to module-level names, "
                "e.g. `x = torch.tensor(5.0, requires_grad=True)`",
            )
        outputs, reason = choose_outputs(path, namespace, named, requested)
        if not outputs:
            why = why_no_root(named, lines)
            if recorder.passes:
                findings.append(NO_GRAPH.finding(f"no autograd graph: {why}"))
            elif recorder.calls or recorder.checks:
                findings.append(NO_GRAPH.finding(
                    "no named tensor has a grad_fn, so there is no graph to show; "
                    "the scenario's gradcheck and Function calls are reported instead",
                    severity="info"))
            else:
                raise ScenarioError(
                    f"{path}: no output to trace: {why}",
                    "an output is a tensor with a grad_fn; see `gradtrace show --help`")
        if outputs and backward and not recorder.passes:
            own_backward(recorder, [t for _, t in outputs])
        if order == 2 and recorder.second_order is None and outputs:
            recorder.second_order = second_derivatives(outputs[0][1], outputs[0][0], named)
        findings.extend(recorder.checks)
        findings.extend(pass_findings(recorder.passes))
        if with_calls is not None:
            with_calls(recorder.calls)
        return build_trace(
            scenario=path,
            named=named,
            outputs=outputs,
            root_reason=reason,
            passes=recorder.passes,
            calls=recorder.calls,
            findings=findings,
            saved_before=recorder.saved_before if saved else None,
            grad_before=recorder.grad_before or {},
            stdout=output.getvalue(),
            second_order=recorder.second_order,
            modules=module_paths(namespace, tracker),
        )
    finally:
        # Drop the scenario's objects here, in the big-stack thread, not in the caller's.
        recorder.saved_before.clear()
        tracker.owner.clear()
        namespace.clear()


@contextlib.contextmanager
def _scenario_process_state(path: str, output: io.StringIO) -> Iterator[None]:
    """Run as `python path` would: its folder on sys.path, argv, and its output captured;
    then restore what a scenario may change for the whole process (`check` runs many)."""
    saved = (sys.argv, list(sys.path), sys.stdin)
    sys.argv = [path]
    sys.path.insert(0, str(Path(path).resolve().parent))
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
    dtype, device = torch.get_default_dtype(), torch.get_default_device()
    grad, anomaly = torch.is_grad_enabled(), torch.is_anomaly_enabled()
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        if torch.get_default_device() != device:
            torch.set_default_device(None if device.type == "cpu" else device)
        torch.set_grad_enabled(grad)
        torch.autograd.set_detect_anomaly(anomaly)
        torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])


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
