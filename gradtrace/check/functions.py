"""gradcheck and gradgradcheck of every custom autograd.Function a scenario called."""

from __future__ import annotations

import contextlib
import inspect
import io
import linecache
import threading
import warnings
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import torch
from torch.autograd.function import once_differentiable

from ..capture.options import CaptureOptions
from ..capture.runner import run_scenario
from ..capture.script.scenario_thread import LEFT_BEHIND
from ..capture.script.target import parse_target
from ..errors import GradtraceError, Interrupted, ScenarioError, ScenarioStopped
from ..extract.captured import RawCall
from ..extract.tensors import describe_value
from ..model.checks import CannotRun, CheckResult, CheckRun, Mismatch, Verdict
from ..model.labels import label_file
from .jacobian import as_tuple, entries
from .limits import SAMPLE
from .orders import CheckOptions, CheckOutcome, sampled_text
from .straight import straight_through
from .trial import Trial
from .wording import FOLLOWS, reason

__all__ = ["CheckOptions", "Watcher", "check_files", "check_scenario", "check_call"]

# A Function class attribute: the reason its backward is not meant to be the derivative.
SKIP_ATTRIBUTE = "gradtrace_skip"


class Watcher(Protocol):
    """Told what is being run and checked: for progress lines."""

    def running(self, target: str) -> None: ...  # a scenario starts
    def checking(self, what: str) -> None: ...  # a Function call's checks begin
    def checked(self) -> None: ...  # and end


def check_files(targets: Iterable[str], options: CheckOptions, *,
                stop_on_error: bool = False, watcher: Watcher | None = None,
                notes: Iterable[str] = ()) -> CheckRun:
    """Check every target (FILE or FILE::FUNC); one that cannot run is kept as a CannotRun,
    not raised (unless stop_on_error)."""
    results: list[CheckResult] = []
    cannot_run: list[CannotRun] = []
    for target in targets:
        if watcher is not None:
            watcher.running(target)
        try:
            results.extend(check_scenario(target, options, watcher))
        except Interrupted:
            raise  # Ctrl-C (or the script's own KeyboardInterrupt) stops them all, as pytest
        except GradtraceError as exc:
            if stop_on_error:
                raise
            cannot_run.append(CannotRun(target, exc.message, exc.hint))
    return CheckRun(tuple(results), tuple(cannot_run), tuple(notes))


def check_scenario(target: str | Path, options: CheckOptions,
                   watcher: Watcher | None = None) -> list[CheckResult]:
    """Run the scenario (FILE or FILE::FUNC) and check each Function once per distinct
    input signature."""
    label = str(target)
    name = Path(parse_target(label).path).name
    results: list[CheckResult] = []
    ran = False  # to its end: what goes wrong after that is building a trace check needs not

    def check_calls(calls: list[RawCall]) -> None:
        nonlocal ran
        ran = True
        seen: set[tuple[Any, ...]] = set()
        # what the Functions print or warn while being checked is not the report's
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for index, call in enumerate(calls, 1):
                key = (call.function, tuple(_signature(a) for a in call.args))
                if key not in seen:
                    seen.add(key)
                    if watcher is not None:
                        watcher.checking(f"{name}:{call.line} {call.function.__name__}("
                                         f"{', '.join(describe_value(a) for a in call.args)})")
                    results.append(replace(bounded_check(call, label, options), call=index))
                    if watcher is not None:
                        watcher.checked()

    try:
        # Calls are recorded in the forward pass: no backward of gradtrace's own is needed
        run_scenario(label, CaptureOptions(backward=False, saved=False, flow=False),
                     with_calls=check_calls, timeout=options.timeout)
    except ScenarioStopped as stop:
        if not (ran or stop.failed_call):  # a failing backward is not check's to judge
            raise
    except ScenarioError:
        # no root, no named tensor: the trace is not what check is about
        if not ran:
            raise
    return results


def _signature(value: Any) -> tuple[Any, ...]:
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape))
    return ("value", repr(value)[:40])


class Stage:
    """Where a call's checks are (what a time limit cut), and gradcheck's verdict once
    known: written by the checking thread, read by the one that waits for it."""

    def __init__(self) -> None:
        self.now = "gradcheck"
        self.first: Verdict | None = None


def bounded_check(call: RawCall, scenario: str, options: CheckOptions) -> CheckResult:
    """check_call within options.timeout: past it, the verdict of the check it was in is
    "timed out" (the check goes on in a background thread that ends with the process)."""
    if options.timeout is None:
        return check_call(call, scenario, options)
    outcome: list[CheckResult] = []
    failure: list[BaseException] = []
    stage = Stage()

    def work() -> None:
        try:
            outcome.append(check_call(call, scenario, options, stage))
        except BaseException as exc:  # handed back to this thread
            failure.append(exc)

    worker = threading.Thread(target=work, name="gradtrace-check", daemon=True)
    worker.start()
    worker.join(options.timeout)
    if worker.is_alive():
        LEFT_BEHIND.add(worker)
    if failure:
        raise failure[0]
    if outcome:
        return outcome[0]
    late = f"{stage.now} did not finish within {options.timeout:g} s"
    verdicts: tuple[Verdict, Verdict] = ("timed out", "skipped") if stage.first is None \
        else (stage.first, "timed out")
    return CheckResult(scenario, call.function.__name__, call.line,
                       tuple(describe_value(a) for a in call.args), *verdicts, late)


def check_call(call: RawCall, scenario: str, options: CheckOptions,
               stage: Stage | None = None) -> CheckResult:
    """gradcheck, then gradgradcheck, of one recorded call, re-run in float64 at the recorded
    inputs and at random ones (see varied.py); a Jacobian over options.max_jacobian entries
    is checked on sampled coordinates (stage: told where it is)."""
    stage = stage or Stage()
    inputs, from_float32 = _float64_inputs(call.args)

    apply = call.function.apply  # type: ignore[attr-defined]  # an autograd.Function

    def fn(*xs: Any) -> Any:
        return apply(*xs)

    def result(gradcheck: Verdict, gradgradcheck: Verdict, message: str | None,
               smells: tuple[str, ...] = (), mismatch: Mismatch | None = None,
               sampled: str | None = None, notes: tuple[str, ...] = ()) -> CheckResult:
        return CheckResult(scenario, call.function.__name__, call.line,
                           tuple(describe_value(a) for a in call.args), gradcheck,
                           gradgradcheck, message, from_float32, smells, mismatch, sampled,
                           notes=notes, backward=backward_at(call.function, scenario))

    skip = getattr(call.function, SKIP_ATTRIBUTE, None)
    if skip:  # a backward that is meant not to be a derivative (straight-through, DNI …)
        return result("skipped", "skipped", f"skipped by {SKIP_ATTRIBUTE}: {skip}")
    try:
        out = as_tuple(fn(*inputs))
    except Exception as exc:
        return result("error", "skipped", reason(exc, scenario, "forward"))
    once = _once_differentiable(call.function)
    smells = () if once else _ctx_smells(out)
    size = entries(inputs, out)
    trial = Trial(fn, inputs, call.args, options, scenario,
                  SAMPLE if size > options.max_jacobian else None)
    first, tried = trial.first_order()
    if first.verdict == "fail" and (through := straight_through(fn, tried, options.atol)):
        return result("straight-through", "skipped", through, smells, first.mismatch,
                      sampled_text(first, size, options))
    second = CheckOutcome("skipped")
    stage.first, stage.now = first.verdict, "gradgradcheck"
    if first.verdict == "pass" and options.gradgrad:
        if once:
            second = CheckOutcome("not applicable", "backward is @once_differentiable: it "
                                  "refuses double backward, so there is none to check")
        else:
            second = trial.second_order(out)
    last = second if second.verdict in ("fail", "error", "not applicable") else first
    message = last.message
    if first.verdict == "fail" and options.gradgrad and not once:
        message = f"{message}{FOLLOWS}"
    return result(first.verdict, second.verdict, message, smells, last.mismatch,
                  sampled_text(first, size, options, second), trial.notes())


def backward_at(function: type, scenario: str) -> tuple[str, int] | None:
    """The file and line of the Function's `def backward` (its file named as the scenario is
    where it is the scenario's), or None where backward is torch's own or has no code."""
    owner = next((k for k in function.__mro__ if "backward" in vars(k)), None)
    if owner is None or owner.__module__.split(".")[0] == "torch":
        return None
    # the function itself, under @once_differentiable or any wrapper that says what it wraps
    code = getattr(inspect.unwrap(function.backward), "__code__", None)  # type: ignore[attr-defined]
    if code is None:
        return None
    file, line = code.co_filename, code.co_firstlineno  # a decorator's line, if decorated
    for at in range(line, line + 10):  # the decorators, to the def
        if linecache.getline(file, at).lstrip().startswith(("def ", "async def ")):
            line = at
            break
    own = Path(label_file(scenario))
    same = own.is_file() and Path(file).is_file() and own.samefile(file)
    return (scenario.split("::")[0] if same else file), line


_ONCE_CODE = once_differentiable(lambda ctx: None).__code__  # every wrapper shares it


def _once_differentiable(function: type) -> bool:
    """Whether the Function's backward is wrapped by @once_differentiable."""
    return getattr(getattr(function, "backward", None), "__code__", None) is _ONCE_CODE


def _float64_inputs(args: tuple[Any, ...]) -> tuple[list[Any], bool]:
    inputs, from_float32 = [], False
    for a in args:
        if isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex()):
            wide = torch.complex128 if a.is_complex() else torch.float64
            from_float32 |= a.dtype != wide
            inputs.append(a.detach().to(wide).clone().requires_grad_(True))
        else:
            inputs.append(a)  # ints, bools and non-tensors pass through
    return inputs, from_float32


def _ctx_smells(out: tuple[Any, ...]) -> tuple[str, ...]:
    """Tensors a forward kept as ctx attributes instead of save_for_backward."""
    ctx = getattr(out[0], "grad_fn", None) if out else None
    kept = sorted(k for k, v in getattr(ctx, "__dict__", {}).items()
                  if isinstance(v, torch.Tensor))
    if not kept:
        return ()
    names = ", ".join(f"ctx.{k}" for k in kept)
    return (f"forward keeps tensors as {names} instead of ctx.save_for_backward: a backward "
            "that uses them is not differentiable through them, so second derivatives are "
            "silently wrong (save them, mark backward @once_differentiable, or return them "
            "as outputs as Sinh does)",)
