"""gradcheck and gradgradcheck of every custom autograd.Function a scenario called."""

from __future__ import annotations

import contextlib
import io
import re
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch.autograd.gradcheck import GradcheckError

from ..capture.explain import scenario_line
from ..capture.runner import run_scenario
from ..errors import GradtraceError, ScenarioError
from ..extract.build import RawCall
from ..extract.tensors import describe_value
from ..model.checks import CannotRun, CheckResult, CheckRun, Mismatch, Verdict

# A Function class attribute: the reason its backward is not meant to be the derivative.
SKIP_ATTRIBUTE = "gradtrace_skip"
TABLE_LIMIT = 4096  # Jacobians with more entries are summarised, not listed


@dataclass(frozen=True)
class CheckOptions:
    """gradcheck's tolerances and modes, as `gradtrace check` takes them."""

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    fast: bool = False
    gradgrad: bool = True
    timeout: float | None = None  # seconds for each Function call's checks


def scenario_files(paths: Iterable[str]) -> list[Path]:
    """The .py files named, and those below the folders named, in a stable order."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found.extend(sorted(p.rglob("*.py")))
        else:
            found.append(p)  # run_scenario says what is wrong with it, if anything
    return list(dict.fromkeys(found))


def check_files(files: Iterable[Path], options: CheckOptions, *, stop_on_error: bool = False,
                done: Callable[[Path], None] | None = None) -> CheckRun:
    """Check every file; a file that cannot run is kept as a CannotRun, not raised
    (unless stop_on_error). done(path) is called after each file."""
    results: list[CheckResult] = []
    cannot_run: list[CannotRun] = []
    for path in files:
        try:
            results.extend(check_scenario(path, options))
        except GradtraceError as exc:
            if stop_on_error:
                raise
            cannot_run.append(CannotRun(str(path), exc.message, exc.hint))
        if done is not None:
            done(path)
    return CheckRun(tuple(results), tuple(cannot_run))


def check_scenario(path: Path, options: CheckOptions) -> list[CheckResult]:
    """Run the scenario and check each Function once per distinct input signature."""
    results: list[CheckResult] = []

    def check_calls(calls: list[RawCall]) -> None:
        seen: set[tuple[Any, ...]] = set()
        # what the Functions print or warn while being checked is not the report's
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for call in calls:
                key = (call.function, tuple(_signature(a) for a in call.args))
                if key not in seen:
                    seen.add(key)
                    results.append(bounded_check(call, str(path), options))

    try:
        # Calls are recorded in the forward pass: no backward of gradtrace's own is needed
        run_scenario(str(path), backward=False, saved=False, flow=False,
                     with_calls=check_calls)
    except ScenarioError:
        if not results:
            raise
    return results


def _signature(value: Any) -> tuple[Any, ...]:
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape))
    return ("value", repr(value)[:40])


def bounded_check(call: RawCall, scenario: str, options: CheckOptions) -> CheckResult:
    """check_call within options.timeout: past it, the verdict is "timed out" (the check goes
    on in a background thread that ends with the process)."""
    if options.timeout is None:
        return check_call(call, scenario, options)
    outcome: list[CheckResult] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(check_call(call, scenario, options))
        except BaseException as exc:  # handed back to this thread
            failure.append(exc)

    worker = threading.Thread(target=work, name="gradtrace-check", daemon=True)
    worker.start()
    worker.join(options.timeout)
    if failure:
        raise failure[0]
    if outcome:
        return outcome[0]
    return CheckResult(scenario, call.function.__name__, call.line,
                       tuple(describe_value(a) for a in call.args), "timed out", "skipped",
                       f"gradcheck did not finish within {options.timeout:g} s")


def check_call(call: RawCall, scenario: str, options: CheckOptions) -> CheckResult:
    """gradcheck, then gradgradcheck, of one recorded call, re-run in float64."""
    inputs, from_float32 = _float64_inputs(call.args)

    apply = call.function.apply  # type: ignore[attr-defined]  # an autograd.Function

    def fn(*xs: Any) -> Any:
        return apply(*xs)

    def result(gradcheck: Verdict, gradgradcheck: Verdict, message: str | None,
               smells: tuple[str, ...] = (), mismatch: Mismatch | None = None) -> CheckResult:
        return CheckResult(scenario, call.function.__name__, call.line,
                           tuple(describe_value(a) for a in call.args), gradcheck,
                           gradgradcheck, message, from_float32, smells, mismatch)

    skip = getattr(call.function, SKIP_ATTRIBUTE, None)
    if skip:  # a backward that is meant not to be a derivative (straight-through, DNI …)
        return result("skipped", "skipped", f"skipped by {SKIP_ATTRIBUTE}: {skip}")
    try:
        out = fn(*inputs)
    except Exception as exc:
        return result("error", "skipped", _explain(exc, scenario, "forward"))
    smells = _ctx_smells(out)
    first = _run_check(torch.autograd.gradcheck, fn, inputs, options, scenario)
    second = CheckOutcome("skipped")
    if first.verdict == "pass" and options.gradgrad:
        second = _run_check(torch.autograd.gradgradcheck, fn, inputs, options, scenario)
    last = second if second.verdict != "skipped" else first
    return result(first.verdict, second.verdict, last.message, smells, last.mismatch)


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


def _ctx_smells(out: Any) -> tuple[str, ...]:
    """Tensors a forward kept as ctx attributes instead of save_for_backward."""
    first = out[0] if isinstance(out, (tuple, list)) and out else out
    ctx = getattr(first, "grad_fn", None)
    kept = sorted(k for k, v in getattr(ctx, "__dict__", {}).items()
                  if isinstance(v, torch.Tensor))
    if not kept:
        return ()
    names = ", ".join(f"ctx.{k}" for k in kept)
    return (f"forward keeps tensors as {names} instead of ctx.save_for_backward: a backward "
            "that uses them is not differentiable through them, so second derivatives are "
            "silently wrong (save them, or return them as outputs as Sinh does)",)


MISMATCH = re.compile(r"output (\d+) with respect to input (\d+)")


class CheckOutcome(NamedTuple):
    """The verdict of one gradcheck or gradgradcheck call, and why it failed."""

    verdict: Verdict
    message: str | None = None
    mismatch: Mismatch | None = None


def _run_check(check: Callable[..., Any], fn: Callable[..., Any], inputs: list[Any],
               options: CheckOptions, scenario: str) -> CheckOutcome:
    try:
        check(fn, tuple(inputs), eps=options.eps, atol=options.atol, rtol=options.rtol,
              fast_mode=options.fast, raise_exception=True)
    except GradcheckError as exc:
        text = str(exc).strip().splitlines()[0]
        found = MISMATCH.search(text)
        mismatch = None
        if found and check is torch.autograd.gradcheck:
            mismatch = jacobian_mismatch(fn, inputs, int(found[1]), int(found[2]), options.eps)
        return CheckOutcome("fail", text, mismatch)
    except Exception as exc:
        return CheckOutcome("error", _explain(exc, scenario, "backward"))
    return CheckOutcome("pass")


def _explain(exc: BaseException, scenario: str, where: str) -> str:
    """A one-paragraph reason, with the scenario's file and line when it raised there."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "incorrect number of gradients" in text:
        return f"backward returns the wrong number of gradients: {text}"
    if "returned an invalid gradient" in text:
        return f"backward returns a gradient of the wrong shape or type: {text}"
    if "gradient different than None" in text or "is not differentiable" in text:
        return f"backward returns a gradient for an input that needs none: {text}"
    line = scenario_line(scenario, exc)
    at = f" at {scenario}:{line}" if line else ""
    return f"{where} raised {type(exc).__name__}{at}: {text}"


def jacobian_mismatch(fn: Callable[..., Any], inputs: list[Any], output: int, index: int,
                      eps: float) -> Mismatch:
    """Numerical (central differences) and analytical Jacobians of one output/input pair."""
    x = inputs[index]
    with torch.no_grad():
        base = _as_tuple(fn(*inputs))[output]
        numerical = torch.zeros(x.numel(), base.numel(), dtype=torch.float64)
        flat = x.view(-1)
        for k in range(x.numel()):
            keep = flat[k].item()
            flat[k] = keep + eps
            plus = _as_tuple(fn(*inputs))[output].reshape(-1).double()
            flat[k] = keep - eps
            minus = _as_tuple(fn(*inputs))[output].reshape(-1).double()
            flat[k] = keep
            numerical[k] = (plus - minus) / (2 * eps)
    out = _as_tuple(fn(*inputs))[output].reshape(-1)
    analytical = torch.zeros_like(numerical)
    for m in range(out.numel()):
        (g,) = torch.autograd.grad(out[m], x, retain_graph=True, allow_unused=True)
        if g is not None:
            analytical[:, m] = g.detach().reshape(-1).double()
    diff = (numerical - analytical).abs()
    worst = divmod(int(diff.argmax()), diff.shape[1]) if diff.numel() else (0, 0)
    scale = numerical.abs().clamp_min(1e-12)
    small = numerical.numel() <= TABLE_LIMIT
    return Mismatch(output, index,
                    numerical.tolist() if small else None,
                    analytical.tolist() if small else None,
                    float(diff.max()) if diff.numel() else 0.0,
                    float((diff / scale).max()) if diff.numel() else 0.0, worst)


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
