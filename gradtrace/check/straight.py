"""Straight-through estimators: a backward that is not the derivative by design."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .jacobian import as_tuple, differentiable

FLAT_SHARE = 0.9  # a forward whose derivative is 0 at this share of the elements is flat
STEP = 1e-6  # finite-difference step along a random direction


def straight_through(fn: Callable[..., Any], inputs: list[Any], atol: float) -> str | None:
    """Why a Function that failed gradcheck looks like a straight-through estimator (its
    forward's derivative is 0 almost everywhere, while backward hands the incoming gradient
    on unchanged, or zeroed where it clips), or None."""
    wrt, outs = differentiable(inputs), as_tuple(fn(*inputs))
    out_ids = differentiable(outs)
    if len(wrt) != 1 or len(out_ids) != 1:
        return None
    x, y = inputs[wrt[0]], outs[out_ids[0]]
    if x.numel() != y.numel() or x.is_complex():
        return None
    seeded = torch.Generator().manual_seed(0)
    given = torch.randn(y.shape, dtype=y.dtype, generator=seeded)
    (sent,) = torch.autograd.grad(y, x, given, allow_unused=True)
    if sent is None:
        return None
    same, zero = sent.reshape(-1) == given.reshape(-1), sent.reshape(-1) == 0
    if not bool((same | zero).all()) or not bool(same.any()):
        return None
    direction = torch.randn(x.shape, dtype=x.dtype, generator=seeded)
    with torch.no_grad():
        moved = [as_tuple(fn(*[a + sign * STEP * direction if i == wrt[0] else a
                               for i, a in enumerate(inputs)]))[out_ids[0]]
                 for sign in (1, -1)]
    slope = (moved[0] - moved[1]).reshape(-1) / (2 * STEP)
    flat = float((slope.abs() <= atol).double().mean())
    if flat < FLAT_SHARE:
        return None
    clipped = "" if bool(same.all()) else \
        f" (zeroed at {int(zero.sum()):,} of {zero.numel():,} elements: clipped)"
    return ("looks like a straight-through estimator: its forward's derivative is 0 at "
            f"{flat:.0%} of the elements, while backward passes the incoming gradient on "
            f"unchanged{clipped}; its backward is not the derivative by design — mark the "
            'class gradtrace_skip = "straight-through estimator"')
