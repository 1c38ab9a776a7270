"""What the code's own calls marked on its graphs: tensor and module hooks, checkpointed
nodes, inputs handed to torch.autograd.functional."""

from __future__ import annotations

import weakref
from typing import Any

from ...compat.torch import NodeKey, node_key


class Marks:
    """Noted by the wrappers on torch as the code runs; read by the pass's observers."""

    def __init__(self) -> None:
        self.hooked: set[NodeKey] = set()  # the nodes of tensors given a hook (node_key)
        # a node with a module's (non-full) backward hook -> what it sent before the hook
        self.unhooked: dict[int, tuple[Any, ...]] = {}
        # the inputs of torch.autograd.functional calls, while they live
        self.handed: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self.recomputed: dict[int, Any] = {}  # nodes made inside torch.utils.checkpoint

    def hooked_in(self, nodes: list[Any]) -> frozenset[int]:
        """The ids of the nodes of this walk that have a hook of the code's (ids are stable
        while the walk holds the nodes)."""
        if not self.hooked:
            return frozenset()
        return frozenset(id(n) for n in nodes if node_key(n) in self.hooked)

    def clear(self) -> None:
        self.hooked.clear()
        self.unhooked.clear()
        self.recomputed.clear()
