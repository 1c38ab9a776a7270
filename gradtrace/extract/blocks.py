"""float64 reductions without a float64 copy: on the CPU, torch casts a whole tensor before
it reduces it in another dtype (a 256 MB float32 leaf cost 512 MB more for its norm), so a
big one is reduced a block at a time."""

from __future__ import annotations

import torch

from ..compat.torch import foreach_norms
from .summary import dense_flat

BLOCK = 1 << 22  # elements: a block's float64 copy is 32 MB


def blocks(t: torch.Tensor) -> list[torch.Tensor] | None:
    """A big dense CPU tensor (not float64) as 1-D blocks of its memory; else None."""
    if t.device.type != "cpu" or t.numel() <= BLOCK or t.dtype == torch.float64 \
            or type(t) is not torch.Tensor or t.layout != torch.strided:
        return None
    flat = dense_flat(t.detach())
    return None if flat is None else list(flat.split(BLOCK))


def norms64(tensors: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """The float64 2-norm of each tensor in one foreach call, a big CPU tensor's over its
    blocks; None without the foreach probe."""
    parts: list[torch.Tensor] = []
    owners: list[int] = []
    for i, t in enumerate(tensors):
        split = blocks(t) or [t]
        parts.extend(split)
        owners.extend([i] * len(split))
    norms = foreach_norms(parts, 2.0, torch.float64)
    if norms is None or len(parts) == len(tensors):
        return norms
    squares = torch.zeros(len(tensors), dtype=torch.float64)
    squares.index_add_(0, torch.tensor(owners), torch.stack(norms).square())
    return list(squares.sqrt().unbind())


def norm64(flat: torch.Tensor) -> torch.Tensor:
    """vector_norm(flat, dtype=float64), a big CPU tensor's a block at a time."""
    split = blocks(flat)
    if split is None:
        return torch.linalg.vector_norm(flat, dtype=torch.float64)
    return torch.linalg.vector_norm(torch.stack(
        [torch.linalg.vector_norm(b, dtype=torch.float64) for b in split]))


def sum64(t: torch.Tensor) -> torch.Tensor:
    """t.sum(dtype=float64), a big CPU tensor's a block at a time."""
    split = blocks(t)
    if split is None:
        return t.sum(dtype=torch.float64)
    return torch.stack([b.sum(dtype=torch.float64) for b in split]).sum()
