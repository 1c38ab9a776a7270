"""gradcheck and gradgradcheck of one Function at given inputs: the outcome, and where they
fail the Jacobian block that disagrees, located, phrased and recorded with its shapes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch
from torch.autograd.gradcheck import GradcheckError

from ..model.checks import Mismatch, Verdict
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
from .wording import (
    at_random,
    disagree_text,
    double_failed,
    double_text,
    first_line,
    reason,
    torch_words,
)


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


class CheckOutcome(NamedTuple):
    """The verdict of one gradcheck or gradgradcheck, why it failed, and how many
    coordinates it checked when not all (inputs, outputs; of how many)."""

    verdict: Verdict
    message: str | None = None
    mismatch: Mismatch | None = None
    sampled: tuple[int, int, int, int] | None = None


class Inputs(NamedTuple):
    """The inputs a check runs at: the recorded ones, or random ones (with what the recorded
    values hide, in words, where they do)."""

    values: list[Any]
    random: bool = False
    hidden: str | None = None


MISMATCH = re.compile(r"output (\d+) with respect to input (\d+)")


def first_order(fn: Callable[..., Any], at: Inputs, options: CheckOptions, scenario: str,
                sample: int | None) -> CheckOutcome:
    """gradcheck, or its test on sampled coordinates when the Jacobian is over budget."""
    inputs = at.values
    told = _Told(fn, at, inputs)
    if sample is not None:
        return _sampled_check(fn, inputs, options, scenario, sample, told)
    try:
        _torch_check(torch.autograd.gradcheck, fn, inputs, options)
    except GradcheckError as exc:
        found = MISMATCH.search(str(exc))
        pairs = None if found is None else [(int(found[1]),
                                             differentiable(inputs)[int(found[2])])]
        block = _located(fn, inputs, options, pairs)
        return CheckOutcome("fail", told.said(told.what(exc, pairs, block)),
                            None if block is None else told.mismatch(block, False, options))
    except Exception as exc:
        return CheckOutcome("error", reason(exc, scenario, "backward"))
    return CheckOutcome("pass")


def second_order(fn: Callable[..., Any], at: Inputs, out: tuple[Any, ...],
                 options: CheckOptions, scenario: str) -> CheckOutcome:
    """gradgradcheck: the first-order check of backward itself (sampled when over budget)."""
    inputs = at.values
    grads = [torch.randn(out[k].shape, dtype=out[k].dtype,
                         generator=torch.Generator().manual_seed(k)).requires_grad_(True)
             for k in differentiable(out)]
    args = [*inputs, *grads]
    told = _Told(fn, at, args, second=True)
    backward = backward_of(fn, len(inputs))
    if entries(args, inputs) > options.max_jacobian:
        return _sampled_check(backward, args, options, scenario, SAMPLE, told)
    try:
        _torch_check(torch.autograd.gradgradcheck, fn, inputs, options)
    except GradcheckError as exc:
        found = MISMATCH.search(str(exc))
        pairs = None if found is None else [(int(found[1]),
                                             differentiable(args)[int(found[2])])]
        block = _located(backward, args, options, pairs)
        if block is not None and disagreeing([block], options.atol, options.rtol) is None:
            block = None  # it agrees with our incoming gradients (torch draws its own)
        return CheckOutcome("fail", told.said(told.what(exc, pairs, block)),
                            None if block is None else told.mismatch(block, False, options))
    except Exception as exc:
        return CheckOutcome("error", reason(exc, scenario, "double backward"))
    return CheckOutcome("pass")


def _torch_check(check: Callable[..., Any], fn: Callable[..., Any], inputs: list[Any],
                 options: CheckOptions) -> None:
    """torch's gradcheck or gradgradcheck with the options; raises what it finds."""
    check(fn, tuple(inputs), eps=options.eps, atol=options.atol, rtol=options.rtol,
          fast_mode=options.fast, raise_exception=True)


def _located(fn: Callable[..., Any], args: list[Any], options: CheckOptions,
             pairs: list[tuple[int, int]] | None) -> Block | None:
    """The block of fn's Jacobian torch named (pairs), or the first of all that disagrees:
    None where none does, or the Function's own code raised (the verdict stands)."""
    try:
        found = blocks(fn, args, options.eps, pairs=pairs)
    except Exception:
        return None
    if pairs is not None:
        return found[0] if found else None
    return disagreeing(found, options.atol, options.rtol)


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


def _sampled_check(fn: Callable[..., Any], args: list[Any], options: CheckOptions,
                   scenario: str, sample: int, told: _Told) -> CheckOutcome:
    """gradcheck's test (|analytical - numerical| <= atol + rtol * |numerical|) on `sample`
    random coordinates of each input and output: memory and time stay bounded."""
    try:
        found = blocks(fn, args, options.eps, size=sample)
    except Exception as exc:
        return CheckOutcome("error", reason(exc, scenario, "backward"))
    n_in = sum(args[i].numel() for i in differentiable(args))
    n_out = sum(o.numel() for o in as_tuple(fn(*args)) if floating(o))
    k_in = len({(b.input, r) for b in found for r in b.rows})
    k_out = len({(b.output, c) for b in found for c in b.cols})
    counts = (k_in, n_in, k_out, n_out)
    bad = disagreeing(found, options.atol, options.rtol)
    if bad is None:
        return CheckOutcome("pass", sampled=counts)
    return CheckOutcome("fail", told.said(told.block(bad.output, bad.input)),
                        told.mismatch(bad, True, options), counts)


class _Told:
    """How a failure at some inputs is told: its message, and its Mismatch record with the
    shapes of the input and output it is about (for gradgradcheck: backward's, over the
    inputs and then the incoming gradients, its outputs the inputs' gradients)."""

    def __init__(self, fn: Callable[..., Any], at: Inputs, args: list[Any],
                 second: bool = False) -> None:
        self.fn, self.at, self.args, self.second = fn, at, args, second

    def said(self, what: str) -> str:
        """The failure's message: what disagrees, where the inputs are random that they
        are, for gradgradcheck what that means."""
        if self.at.random:
            what = at_random(what, self.at.hidden)
        return double_failed(what) if self.second else what

    def what(self, exc: GradcheckError, pairs: list[tuple[int, int]] | None,
             block: Block | None) -> str:
        """What torch found, in words: the block it named, or its message (and the block
        that disagrees, where one does)."""
        if pairs is not None:
            return self.block(*pairs[0])
        words = torch_words(first_line(exc), self.second)
        return words if block is None else f"{words}; {self.block(block.output, block.input)}"

    def block(self, output: int, index: int) -> str:
        """A block in words (for gradgradcheck, of backward's Jacobian: the gradient of which
        input, with respect to which input or incoming gradient)."""
        if not self.second:
            return disagree_text(output, index)
        return double_text(self._graded(output), index, len(self.at.values))

    def _graded(self, output: int) -> int:
        """The input whose gradient is backward's output `output`."""
        return differentiable(self.at.values)[output]

    def mismatch(self, b: Block, sampled: bool, options: CheckOptions) -> Mismatch:
        """The Mismatch record of a block: worst entry, errors, the entries when few."""
        if self.second:
            output = self._graded(b.output)
            out_shape = tuple(self.at.values[output].shape)
        else:
            output = b.output
            out_shape = tuple(as_tuple(self.fn(*self.at.values))[output].shape)
        return replace(_mismatch(b, sampled, options, self.second), output=output,
                       input_shape=tuple(self.args[b.input].shape), output_shape=out_shape,
                       inputs="random" if self.at.random else "recorded")


def _mismatch(b: Block, sampled: bool, options: CheckOptions, second: bool) -> Mismatch:
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


def sampled_text(first: CheckOutcome, size: int, options: CheckOptions,
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
