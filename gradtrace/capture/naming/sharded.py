"""The nn.Modules a scenario names, part by part; FSDP2's sharded parameters, which hold the
.grad of the unsharded ones its modules use from forward to the end of backward."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from ...compat.torch import fsdp_loaded, fsdp_parameters
from .reach import is_module


def submodules(named: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, torch.nn.Module]]:
    """Every submodule of the named nn.Modules, once, under its first dotted path."""
    seen: set[int] = set()
    for name, value in list(named):
        if is_module(value) and not name.startswith("__"):
            for sub, module in value.named_modules():
                if id(module) not in seen:
                    seen.add(id(module))
                    yield (f"{name}.{sub}" if sub else name), module


def sharded_of(named: Iterable[tuple[str, Any]]) -> dict[int, torch.Tensor]:
    """id(unsharded parameter) -> its sharded parameter, for the FSDP2 (fully_shard) parts
    of the named nn.Modules: the graph's leaves are the unsharded parameters, the module's
    between passes (and the optimizer's, and the .grad's) the sharded DTensors."""
    if not fsdp_loaded():
        return {}
    return {id(unsharded): sharded for _, module in submodules(named)
            for sharded, unsharded in fsdp_parameters(module)}
