"""A Function's Jacobians at bounded cost: blocks of numerical (central differences) and
analytical (one backward per output coordinate) entries, on all coordinates or a sample."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch


class Block(NamedTuple):
    """The Jacobian entries of one output with respect to one input, on chosen coordinates
    (rows: input elements, columns: output elements)."""

    output: int
    input: int
    rows: list[int]
    cols: list[int]
    numerical: torch.Tensor
    analytical: torch.Tensor


def as_tuple(out: Any) -> tuple[Any, ...]:
    """A Function's result as a tuple of its outputs."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def floating(t: Any) -> bool:
    """A tensor of floating or complex numbers: one that can have a gradient."""
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def differentiable(values: Sequence[Any]) -> list[int]:
    """Positions of the floating tensors that require grad."""
    return [i for i, v in enumerate(values) if floating(v) and v.requires_grad]


def entries(inputs: Sequence[Any], outputs: Sequence[Any]) -> int:
    """How many entries the full Jacobian of outputs with respect to inputs has."""
    n_in = sum(inputs[i].numel() for i in differentiable(inputs))
    n_out = sum(o.numel() for o in outputs if floating(o))
    return n_in * n_out


def sample_of(n: int, size: int | None, seed: int) -> list[int]:
    """All of range(n) when size is None or n <= size, else size of them at random (fixed
    by seed), in order."""
    if size is None or n <= size:
        return list(range(n))
    chosen = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:size]
    return sorted(chosen.tolist())


def _columns(n: int, aligned: list[int], size: int | None, seed: int) -> list[int]:
    """Output coordinates to check: half at the first input's sampled positions (an
    elementwise Function's Jacobian is its diagonal), the rest at random."""
    if size is None or n <= size:
        return list(range(n))
    chosen = dict.fromkeys(r % n for r in aligned[: size // 2])
    for c in sample_of(n, size, seed):
        if len(chosen) >= size:
            break
        chosen.setdefault(c)
    return sorted(chosen)


def blocks(fn: Callable[..., Any], inputs: list[Any], eps: float,
           size: int | None = None, pairs: Sequence[tuple[int, int]] | None = None
           ) -> list[Block]:
    """Numerical and analytical blocks of every (output, input) pair (or the pairs given), on
    every coordinate or on `size` of each input's and each output's at random.

    Costs 2 forwards per input coordinate and 1 backward per output coordinate; memory is
    that of the blocks."""
    outs = as_tuple(fn(*inputs))
    out_ids = [o for o, t in enumerate(outs) if floating(t)]
    in_ids = differentiable(inputs)
    wanted = set(pairs) if pairs is not None else {(o, i) for o in out_ids for i in in_ids}
    in_ids = [i for i in in_ids if any(p[1] == i for p in wanted)]
    out_ids = [o for o in out_ids if any(p[0] == o for p in wanted)]
    rows = {i: sample_of(inputs[i].numel(), size, seed=i) for i in in_ids}
    aligned = rows[in_ids[0]] if in_ids else []
    cols = {o: _columns(outs[o].numel(), aligned, size, seed=1000 + o) for o in out_ids}
    numerical = {(o, i): torch.zeros(len(rows[i]), len(cols[o]), dtype=torch.float64)
                 for o in out_ids for i in in_ids}
    where = {o: torch.tensor(cols[o], dtype=torch.long) for o in out_ids}
    picks = {i: torch.tensor(rows[i], dtype=torch.long) for i in in_ids}
    for i in in_ids:
        flat = inputs[i].detach().view(-1)  # moved in place: fn may need grad mode itself
        for k, r in enumerate(rows[i]):
            keep = flat[r].item()
            flat[r] = keep + eps
            plus = _picked(fn, inputs, where)
            flat[r] = keep - eps
            minus = _picked(fn, inputs, where)
            flat[r] = keep
            for o in out_ids:
                numerical[o, i][k] = (plus[o] - minus[o]).real.double() / (2 * eps)
    analytical = {key: torch.zeros_like(block) for key, block in numerical.items()}
    outs = as_tuple(fn(*inputs))
    for o in out_ids:
        if not outs[o].requires_grad:
            continue  # an output without a graph: its analytical Jacobian is zero
        for m, c in enumerate(cols[o]):
            seed = torch.zeros_like(outs[o]).reshape(-1)
            seed[c] = 1
            grads = torch.autograd.grad(outs[o], [inputs[i] for i in in_ids],
                                        seed.view_as(outs[o]), retain_graph=True,
                                        allow_unused=True)
            for i, g in zip(in_ids, grads, strict=True):
                if g is not None:
                    analytical[o, i][:, m] = g.reshape(-1)[picks[i]].real.double()
    return [Block(o, i, rows[i], cols[o], numerical[o, i], analytical[o, i])
            for o in out_ids for i in in_ids if (o, i) in wanted]


def _picked(fn: Callable[..., Any], inputs: list[Any], where: dict[int, Any],
            ) -> dict[int, Any]:
    """fn's outputs at the chosen elements, copied at once (indexing by a tensor copies): an
    output may be an input itself, or a view of one, that the next nudge moves."""
    outs = as_tuple(fn(*inputs))
    return {o: outs[o].detach().reshape(-1)[chosen] for o, chosen in where.items()}


def disagreeing(found: Sequence[Block], atol: float, rtol: float) -> Block | None:
    """The first block where |analytical - numerical| > atol + rtol * |numerical| (gradcheck's
    own test), or None."""
    return next((b for b in found
                 if not torch.allclose(b.analytical, b.numerical, rtol=rtol, atol=atol)), None)
