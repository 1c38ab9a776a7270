"""The parameters a DistributedDataParallel module averages across ranks: what reaches their
AccumulateGrad is this rank's own gradient, their .grad after backward the ranks' mean."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch

from ..extract.tensors import Named
from ..torch_compat import compiling, never_compiled

# absent from builds without torch.distributed
DDP: type | None = getattr(torch.nn.parallel, "DistributedDataParallel", None)


class Reducers:
    """A global forward pre-hook that notes each DDP module's parameters and world size."""

    def __init__(self) -> None:
        self._params: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self._world: dict[int, int] = {}  # id(parameter) -> the ranks that average it

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        hook = torch.nn.modules.module.register_module_forward_pre_hook(self._pre)
        try:
            yield
        finally:
            hook.remove()

    @never_compiled
    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        if DDP is None or compiling() or not isinstance(module, DDP):
            return
        world = module.process_group.size()
        for parameter in module.module.parameters():
            if parameter.requires_grad:
                self._params[id(parameter)] = parameter
                self._world[id(parameter)] = world

    def named(self, named: Named) -> dict[str, int]:
        """Each named tensor a DDP module averages, and over how many ranks."""
        return {name: self._world[id(t)] for name, t in named if self._params.get(id(t)) is t}
