"""Inputs beyond the recorded ones: random values, seeded, where a backward that is right only
at the recorded values is wrong (a factor forgotten while it is 1.0, a term dropped while it is
multiplied by 0), and what the recorded values may hide."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .jacobian import as_tuple, differentiable, floating

SEED = 0  # the same random inputs for every run: a verdict does not flicker
# The magnitudes drawn, half from each band: away from 0 and from 1, where a forgotten factor
# or exponent would change a gradient by less than the tolerance
BANDS = ((0.3, 0.8), (1.25, 2.0))
# For a Function whose forward cannot take those (acos, a probability): the recorded values,
# each scaled by a factor drawn from these bands
NEAR = ((0.5, 0.9), (1.1, 1.5))


def random_inputs(inputs: list[Any], near: bool = False, seed: int = SEED) -> list[Any]:
    """The inputs with every differentiable tensor replaced by random values of its shape,
    dtype and device (leaves that require grad): magnitudes uniform in BANDS, the sign of
    the recorded values where none has the other (log, sqrt and fractional powers need
    positive inputs), else either sign; near: the recorded values scaled by factors in NEAR.
    Other arguments are passed on as they are."""
    generator = torch.Generator().manual_seed(seed)
    varied = list(inputs)
    for i in differentiable(inputs):
        recorded = inputs[i].detach()
        parts = [recorded.real, recorded.imag] if recorded.is_complex() else [recorded]
        drawn = [(part.cpu().double() * _banded(part.shape, NEAR, generator)) if near
                 else _drawn(part, generator) for part in parts]
        value = torch.complex(*drawn) if recorded.is_complex() else drawn[0]
        varied[i] = value.to(device=recorded.device, dtype=recorded.dtype).requires_grad_(True)
    return varied


def _banded(shape: torch.Size, bands: tuple[tuple[float, float], ...],
            generator: torch.Generator) -> torch.Tensor:
    """Random float64 values on the CPU, half uniform in each of the two bands."""
    (low, mid), (high, top) = bands
    u = torch.rand(shape, dtype=torch.float64, generator=generator)
    return torch.where(u < 0.5, low + 2 * u * (mid - low), high + (2 * u - 1) * (top - high))


def _drawn(recorded: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random magnitudes in BANDS, with recorded's sign where it has one."""
    size = _banded(recorded.shape, BANDS, generator)
    if bool((recorded >= 0).all()):
        return size
    if bool((recorded <= 0).all()):
        return -size
    sign = torch.randint(0, 2, recorded.shape, generator=generator).double() * 2 - 1
    return size * sign


def unusable(fn: Callable[..., Any], inputs: list[Any]) -> str | None:
    """Why the Function cannot be checked at these inputs (its forward raises, or gives NaN or
    Inf: its domain is narrower), or None."""
    try:
        outs = as_tuple(fn(*inputs))
    except Exception as exc:  # the Function's own code: a domain it checks, say
        text = str(exc).strip().splitlines()
        return f"forward raised {type(exc).__name__} there" + (f" ({text[0]})" if text else "")
    for k, out in enumerate(outs):
        if floating(out) and not bool(torch.isfinite(out.detach()).all()):
            return f"forward's output {k} is not finite there"
    return None


def hiding(args: tuple[Any, ...], numbers_only: bool = False) -> str | None:
    """The recorded inputs whose values hide a wrong backward (all ones: a forgotten factor is
    1; all zeros: a dropped term is 0), in words, or None; numbers_only: only the Python
    numbers among them (random inputs never vary those)."""
    told = []
    for i, a in enumerate(args):
        if floating(a) and a.numel() and not a.is_complex() and not numbers_only:
            values = a.detach()
            one = "1.0" if a.numel() == 1 else "all ones"
            zero = "0.0" if a.numel() == 1 else "all zeros"
            if bool((values == 1).all()):
                told.append(f"input {i} is {one}")
            elif bool((values == 0).all()):
                told.append(f"input {i} is {zero}")
        elif isinstance(a, float) and a in (0.0, 1.0):
            told.append(f"input {i} is the number {a} (numbers are not varied)")
    if not told:
        return None
    return f"as recorded, {', '.join(told)}: values that hide a forgotten factor or term"
