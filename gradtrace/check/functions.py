"""gradcheck and gradgradcheck of every custom autograd.Function a scenario called."""

from __future__ import annotations

import contextlib
import io
import re
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import torch
from torch.autograd.function import once_differentiable
from torch.autograd.gradcheck import GradcheckError

from ..capture.naming.where import scenario_line
from ..capture.options import CaptureOptions
from ..capture.runner import run_scenario
from ..capture.script.scenario_thread import LEFT_BEHIND
from ..capture.script.target import parse_target
from ..compat.torch import error_kind
from ..errors import GradtraceError, ScenarioError, ScenarioStopped
from ..extract.captured import RawCall
from ..extract.tensors import describe_value
from ..model.checks import CannotRun, CheckResult, CheckRun, Mismatch, Verdict
from ..model.labels import label_file
from .jacobian import (
    Block,
    as_tuple,
    blocks,
    differentiable,
    disagreeing,
    entries,
    floating,
)
from .limits import MAX_JACOBIAN, SAMPLE, TABLE_LIMIT
from .straight import straight_through

# A Function class attribute: the reason its backward is not meant to be the derivative.
SKIP_ATTRIBUTE = "gradtrace_skip"


@dataclass(frozen=True)
class CheckOptions:
    """gradcheck's tolerances and modes, as `gradtrace check` takes them."""

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    fast: bool = False
    gradgrad: bool = True
    timeout: float | None = None  # seconds for each scenario's run, and each call's checks
    max_jacobian: int = MAX_JACOBIAN  # entries; above it, sampled coordinates are checked


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
    """gradcheck, then gradgradcheck, of one recorded call, re-run in float64; a Jacobian
    over options.max_jacobian entries is checked on sampled coordinates (stage: told
    where it is)."""
    stage = stage or Stage()
    inputs, from_float32 = _float64_inputs(call.args)

    apply = call.function.apply  # type: ignore[attr-defined]  # an autograd.Function

    def fn(*xs: Any) -> Any:
        return apply(*xs)

    def result(gradcheck: Verdict, gradgradcheck: Verdict, message: str | None,
               smells: tuple[str, ...] = (), mismatch: Mismatch | None = None,
               sampled: str | None = None) -> CheckResult:
        return CheckResult(scenario, call.function.__name__, call.line,
                           tuple(describe_value(a) for a in call.args), gradcheck,
                           gradgradcheck, message, from_float32, smells, mismatch, sampled)

    skip = getattr(call.function, SKIP_ATTRIBUTE, None)
    if skip:  # a backward that is meant not to be a derivative (straight-through, DNI …)
        return result("skipped", "skipped", f"skipped by {SKIP_ATTRIBUTE}: {skip}")
    try:
        out = as_tuple(fn(*inputs))
    except Exception as exc:
        return result("error", "skipped", _reason(exc, scenario, "forward"))
    once = _once_differentiable(call.function)
    smells = () if once else _ctx_smells(out)
    size = entries(inputs, out)
    sample = SAMPLE if size > options.max_jacobian else None
    first = _first_order(fn, inputs, options, scenario, sample)
    if first.verdict == "fail" and (through := straight_through(fn, inputs, options.atol)):
        return result("straight-through", "skipped", through, smells, first.mismatch,
                      _sampled_text(first, size, options))
    second = CheckOutcome("skipped")
    stage.first, stage.now = first.verdict, "gradgradcheck"
    if first.verdict == "pass" and options.gradgrad:
        if once:
            second = CheckOutcome("not applicable", "backward is @once_differentiable: it "
                                  "refuses double backward, so there is none to check")
        else:
            second = _second_order(fn, inputs, out, options, scenario)
    last = second if second.verdict in ("fail", "error", "not applicable") else first
    return result(first.verdict, second.verdict, last.message, smells, last.mismatch,
                  _sampled_text(first, size, options, second))


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


MISMATCH = re.compile(r"output (\d+) with respect to input (\d+)")


class CheckOutcome(NamedTuple):
    """The verdict of one gradcheck or gradgradcheck, why it failed, and how many
    coordinates it checked when not all (inputs, outputs; of how many)."""

    verdict: Verdict
    message: str | None = None
    mismatch: Mismatch | None = None
    sampled: tuple[int, int, int, int] | None = None


def _first_order(fn: Callable[..., Any], inputs: list[Any], options: CheckOptions,
                 scenario: str, sample: int | None) -> CheckOutcome:
    """gradcheck, or its test on sampled coordinates when the Jacobian is over budget."""
    if sample is not None:
        return _sampled_check(fn, inputs, options, scenario, sample)
    try:
        _torch_check(torch.autograd.gradcheck, fn, inputs, options)
    except GradcheckError as exc:
        found = MISMATCH.search(str(exc))
        if found is None:
            return CheckOutcome("fail", _first_line(exc))
        output, index = int(found[1]), differentiable(inputs)[int(found[2])]
        (block,) = blocks(fn, inputs, options.eps, pairs=[(output, index)])
        return CheckOutcome("fail", _disagree_text(output, index),
                            _mismatch(block, False, options))
    except Exception as exc:
        return CheckOutcome("error", _reason(exc, scenario, "backward"))
    return CheckOutcome("pass")


def _torch_check(check: Callable[..., Any], fn: Callable[..., Any], inputs: list[Any],
                 options: CheckOptions) -> None:
    """torch's gradcheck or gradgradcheck with the options; raises what it finds."""
    check(fn, tuple(inputs), eps=options.eps, atol=options.atol, rtol=options.rtol,
          fast_mode=options.fast, raise_exception=True)


# A correct Function need not have a correct double backward: said with each such failure.
FIRST_ORDER = (" (a Function meant for first derivatives only: mark its backward "
               "@once_differentiable, or skip the second-order check)")


def _second_order(fn: Callable[..., Any], inputs: list[Any], out: tuple[Any, ...],
                  options: CheckOptions, scenario: str) -> CheckOutcome:
    """gradgradcheck: the first-order check of backward itself (sampled when over budget)."""
    grads = [torch.randn(out[k].shape, dtype=out[k].dtype,
                         generator=torch.Generator().manual_seed(k)).requires_grad_(True)
             for k in differentiable(out)]
    if entries([*inputs, *grads], inputs) > options.max_jacobian:
        return _sampled_check(backward_of(fn, len(inputs)), [*inputs, *grads], options,
                              scenario, SAMPLE, second=True)
    try:
        _torch_check(torch.autograd.gradgradcheck, fn, inputs, options)
    except GradcheckError as exc:
        found = MISMATCH.search(str(exc))
        if found is None:
            return CheckOutcome("fail", f"double backward: {_first_line(exc)}{FIRST_ORDER}")
        return CheckOutcome("fail", _disagree_text(int(found[1]), int(found[2]), second=True)
                            + FIRST_ORDER,
                            _second_mismatch(fn, [*inputs, *grads], len(inputs),
                                             int(found[1]), int(found[2]), options))
    except Exception as exc:
        return CheckOutcome("error", _reason(exc, scenario, "double backward"))
    return CheckOutcome("pass")


def _second_mismatch(fn: Callable[..., Any], args: list[Any], n: int, output: int,
                     index: int, options: CheckOptions) -> Mismatch | None:
    """The block of backward's Jacobian gradgradcheck found wrong, with our own incoming
    gradients (torch draws its own at random): None when it agrees with them."""
    try:
        (block,) = blocks(backward_of(fn, n), args, options.eps,
                          pairs=[(output, differentiable(args)[index])])
    except Exception:  # the Function's own code raised: the verdict stands, without numbers
        return None
    if disagreeing([block], options.atol, options.rtol) is None:
        return None
    return _mismatch(block, False, options, second=True)


def backward_of(fn: Callable[..., Any], n: int) -> Callable[..., Any]:
    """(inputs…, grad_outputs…) -> the gradients backward gives the differentiable inputs,
    with a graph of their own: the function gradgradcheck checks."""
    def backward(*args: Any) -> tuple[Any, ...]:
        xs, grad_outputs = args[:n], args[n:]
        outs = as_tuple(fn(*xs))
        outs = tuple(outs[k] for k in differentiable(outs))
        wrt = [xs[i] for i in differentiable(xs)]
        got = torch.autograd.grad(outs, wrt, grad_outputs, create_graph=True,
                                  allow_unused=True)
        return tuple(torch.zeros_like(x) if g is None else g
                     for x, g in zip(wrt, got, strict=True))
    return backward


def _sampled_check(fn: Callable[..., Any], inputs: list[Any], options: CheckOptions,
                   scenario: str, sample: int, second: bool = False) -> CheckOutcome:
    """gradcheck's test (|analytical - numerical| <= atol + rtol * |numerical|) on `sample`
    random coordinates of each input and output: memory and time stay bounded."""
    try:
        found = blocks(fn, inputs, options.eps, size=sample)
    except Exception as exc:
        return CheckOutcome("error", _reason(exc, scenario, "backward"))
    n_in = sum(inputs[i].numel() for i in differentiable(inputs))
    n_out = sum(o.numel() for o in as_tuple(fn(*inputs)) if floating(o))
    k_in = len({(b.input, r) for b in found for r in b.rows})
    k_out = len({(b.output, c) for b in found for c in b.cols})
    counts = (k_in, n_in, k_out, n_out)
    bad = disagreeing(found, options.atol, options.rtol)
    if bad is None:
        return CheckOutcome("pass", sampled=counts)
    return CheckOutcome("fail", _disagree_text(bad.output, bad.input, second),
                        _mismatch(bad, True, options, second), counts)


def _sampled_text(first: CheckOutcome, size: int, options: CheckOptions,
                  second: CheckOutcome | None = None) -> str | None:
    """ "sampled (…): gradcheck 32/10,000 inputs × 32/10,000 outputs", or None."""
    told = [f"{what} {k_in:,}/{n_in:,} inputs × {k_out:,}/{n_out:,} outputs"
            for what, outcome in (("gradcheck", first), ("gradgradcheck", second))
            if outcome is not None and outcome.sampled is not None
            for k_in, n_in, k_out, n_out in [outcome.sampled]]
    if not told:
        return None
    return (f"sampled at random (the Jacobian has {size:,} entries, over --max-jacobian "
            f"{options.max_jacobian:,}): {', '.join(told)}")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0].rstrip(",") if str(exc).strip() \
        else type(exc).__name__


def _disagree_text(output: int, index: int, second: bool = False) -> str:
    """Which Jacobian block disagrees with finite differences, in words."""
    if second:
        return (f"double backward: the derivative of gradient {output} with respect to input "
                f"{index} (the inputs, then the incoming gradients) disagrees with finite "
                "differences")
    return (f"backward's Jacobian of output {output} with respect to input {index} "
            "disagrees with finite differences")


def _mismatch(b: Block, sampled: bool, options: CheckOptions,
              second: bool = False) -> Mismatch:
    """The Mismatch record of a block: worst entry, errors, the entries when few."""
    diff = (b.numerical - b.analytical).abs()
    size = b.numerical.abs()
    worst = divmod(int(diff.argmax()), diff.shape[1]) if diff.numel() else (0, 0)
    # gradcheck's own test; where |numerical| <= atol the absolute part decides it, and a
    # relative error (3.4 against 1e-17) would be noise either way
    bad = diff > options.atol + options.rtol * size
    if not bool(bad.any()):
        bad = diff > 0  # our differences agree where torch's did not: say what differs
    near_zero = size <= options.atol
    max_rel = None if bool((bad & near_zero).any()) or not bool(bad.any()) \
        else float((diff[bad] / size[bad]).max())
    small = diff.numel() <= TABLE_LIMIT
    at = (float(b.numerical[worst]), float(b.analytical[worst])) if diff.numel() \
        else (0.0, 0.0)
    return Mismatch(b.output, b.input,
                    b.numerical.tolist() if small else None,
                    b.analytical.tolist() if small else None,
                    float(diff.max()) if diff.numel() else 0.0, max_rel,
                    (b.rows[worst[0]], b.cols[worst[1]]),
                    tuple(b.rows) if sampled else None, tuple(b.cols) if sampled else None,
                    "gradgradcheck" if second else "gradcheck", at,
                    abs(at[0]) <= options.atol)


# What a Function's backward did wrong, by the kind torch_compat.error_kind gives the error.
_BACKWARD_MISTAKES = {
    "wrong-count": "backward returns the wrong number of gradients",
    "invalid-gradient": "backward returns a gradient of the wrong shape or type",
    "needless-gradient": "backward returns a gradient for an input that needs none",
}


def _reason(exc: BaseException, scenario: str, where: str) -> str:
    """A one-paragraph reason, with the scenario's file and line when it raised there."""
    text = _first_line(exc)
    meaning = _BACKWARD_MISTAKES.get(error_kind(text) or "")
    if meaning is not None:
        return f"{meaning}: {text}"
    path = label_file(scenario)
    line = scenario_line(path, exc)
    at = f" at {path}:{line}" if line else ""
    return f"{where} raised {type(exc).__name__}{at}: {text}"
