"""Reductions in a wider dtype without a wide copy: torch casts a whole tensor before it
reduces it in another dtype (a 512 MiB float32 leaf cost 1 GiB more for its float64 sum, on
the CPU and on CUDA; a float16 gradient its float32 copy), so a big one is reduced a block
at a time."""

from __future__ import annotations

import torch

from ..compat.torch import foreach_norms

# Elements in a block. On the CPU a block's float32 copy is 32 MiB, so that glibc maps and
# unmaps it (smaller copies come from the heap, where the small results kept between them
# split the freed space: 64 copies of 8 MiB held 500 MiB); CUDA's caching allocator reuses.
BLOCK = {"cpu": 1 << 23}
CUDA_BLOCK = 1 << 20


def blocks(t: torch.Tensor, everywhere: bool = True) -> list[torch.Tensor] | None:
    """A big contiguous tensor (not float64) as 1-D blocks of its memory (on the CPU only,
    unless everywhere); else None."""
    size = BLOCK.get(t.device.type, CUDA_BLOCK)
    if not everywhere and t.device.type != "cpu" or t.numel() <= size \
            or t.dtype == torch.float64 or type(t) is not torch.Tensor \
            or t.layout != torch.strided or not t.is_contiguous():
        return None
    return list(t.detach().view(-1).split(size))


def norms64(tensors: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """The float64 2-norm of each tensor in one foreach call; a big CPU tensor's a block at
    a time (CUDA's foreach kernel widens as it reads); None without the foreach probe."""
    if all(t.numel() <= BLOCK["cpu"] for t in tensors):  # hot: a loop's every step
        return foreach_norms(tensors, 2.0, torch.float64)
    big = [blocks(t, everywhere=False) is not None for t in tensors]
    norms = foreach_norms([t for t, b in zip(tensors, big, strict=True) if not b], 2.0,
                          torch.float64) if not all(big) else []
    if norms is None or not any(big):
        return norms
    small = iter(norms)
    return [norm64(t) if b else next(small) for t, b in zip(tensors, big, strict=True)]


def norm64(flat: torch.Tensor) -> torch.Tensor:
    """vector_norm(flat, dtype=float64), a big tensor's a block at a time."""
    split = blocks(flat)
    if split is None:
        return torch.linalg.vector_norm(flat, dtype=torch.float64)
    return torch.linalg.vector_norm(torch.stack(
        [torch.linalg.vector_norm(b, dtype=torch.float64) for b in split]))


def sum64(t: torch.Tensor) -> torch.Tensor:
    """t.sum(dtype=float64), a big tensor's a block at a time."""
    split = blocks(t)
    if split is None:
        return t.sum(dtype=torch.float64)
    return torch.stack([b.sum(dtype=torch.float64) for b in split]).sum()


def widened_stats(d: torch.Tensor, wide: torch.dtype
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(squared norm, min, max) of a big tensor, each block widened to dtype wide in turn
    (None: not big, or not one block of memory)."""
    split = blocks(d)
    if split is None:
        return None
    squares: list[torch.Tensor] = []
    ends: list[torch.Tensor] = []
    for b in split:
        w = b.to(wide)
        squares.append(torch.dot(w, w))
        ends.extend(torch.aminmax(w))
    stacked = torch.stack(ends)
    return torch.stack(squares).sum(), stacked.min(), stacked.max()
