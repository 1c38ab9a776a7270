"""The parameters a DistributedDataParallel module averages across ranks: what reaches their
AccumulateGrad is this rank's own gradient, their .grad after backward the ranks' mean."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from ...compat.torch import compiling, never_compiled
from ...extract.tensors import Named
from .global_hooks import ModuleCalls

# absent from builds without torch.distributed
DDP: Any = getattr(torch.nn.parallel, "DistributedDataParallel", None)


class Reducers:
    """A global forward pre-hook that notes each DDP module's parameters and world size."""

    def __init__(self, calls: ModuleCalls) -> None:
        self._params: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        # id(parameter) -> the ranks that average it, and whether DDP waits for its gradient
        self._world: dict[int, tuple[int, bool]] = {}
        calls.subscribe(pre=self._pre)

    @never_compiled
    def _pre(self, module: Any, args: Any) -> None:
        if DDP is None or not isinstance(module, DDP) or compiling():
            return
        world = int(module.process_group.size()), not module.find_unused_parameters
        for parameter in module.module.parameters():
            if parameter.requires_grad:
                self._params[id(parameter)] = parameter
                self._world[id(parameter)] = world

    def named(self, named: Named) -> dict[str, tuple[int, bool]]:
        """Each named tensor a DDP module averages: over how many ranks, and whether it waits
        for its gradient (find_unused_parameters off: an unused one fails the next step)."""
        return {name: self._world[id(t)] for name, t in named if self._params.get(id(t)) is t}
