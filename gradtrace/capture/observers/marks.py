"""What the code's own calls marked on its graphs: tensor and module hooks, checkpointed
nodes, inputs handed to torch.autograd.functional."""

from __future__ import annotations

import functools
import threading
import weakref
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

import torch

from ...compat.torch import (
    NO_SEQUENCE,
    NodeKey,
    compiling,
    never_compiled,
    next_sequence_number,
    node_key,
    saved_hooks_pushed,
    sequence_number,
)
from ..naming.where import forwards


class Marks:
    """Noted by the wrappers on torch as the code runs; read by the pass's observers."""

    def __init__(self) -> None:
        self.hooked: set[NodeKey] = set()  # the nodes of tensors given a hook (node_key)
        # a node with a module's (non-full) backward hook -> what it sent before the hook
        self.unhooked: dict[int, tuple[Any, ...]] = {}
        # the inputs of torch.autograd.functional calls, while they live
        self.handed: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self.recomputed: dict[int, Any] = {}  # nodes made inside torch.utils.checkpoint
        # Per thread, the sequence numbers of the nodes made while saved_tensors_hooks were
        # pushed (a checkpoint's too): [start, end) intervals, in order, as two lists; and
        # where the outermost hooks still pushed began. Sequence numbers count per thread: a
        # node is taken as packed in any thread's interval (not reading is the safe side).
        self._packing: dict[int, tuple[list[int], list[int]]] = {}
        self._pushed: dict[int, list[int]] = {}

    def hooked_in(self, nodes: list[Any]) -> frozenset[int]:
        """The ids of the nodes of this walk that have a hook of the code's (ids are stable
        while the walk holds the nodes)."""
        if not self.hooked:
            return frozenset()
        return frozenset(id(n) for n in nodes if node_key(n) in self.hooked)

    def hooks_pushed(self) -> None:
        """saved_tensors_hooks were entered in this thread: the nodes made from now are packed."""
        self._pushed.setdefault(threading.get_ident(), []).append(next_sequence_number())

    def hooks_popped(self) -> None:
        """The hooks entered last in this thread were left."""
        pushed = self._pushed.get(threading.get_ident())
        if not pushed:
            return  # entered before the recording began, and left before it: no node's
        start = pushed.pop()
        if pushed:
            return  # inside other hooks, whose interval holds this one
        starts, ends = self._packing.setdefault(threading.get_ident(), ([], []))
        end = next_sequence_number()
        if ends and ends[-1] == start:  # one right after another: one interval
            ends[-1] = end
        elif end > start:
            starts.append(start)
            ends.append(end)
        if saved_hooks_pushed():  # hooks entered before the recording began are still on
            pushed.append(end)

    def packed(self, node: Any) -> bool:
        """Whether node was made while saved_tensors_hooks were pushed: what it saved is
        packed by a hook, and unpacking it would run the hook's code."""
        if not (self._packing or self._pushed):
            return False
        number = sequence_number(node)
        if number == NO_SEQUENCE:  # a leaf's (it saves nothing), or any without the probe
            return not hasattr(node, "variable")
        for starts, ends in self._packing.values():
            at = bisect_right(starts, number) - 1
            if at >= 0 and number < ends[at]:
                return True
        return any(pushed and number >= pushed[0] for pushed in self._pushed.values())

    def clear(self) -> None:
        self.hooked.clear()
        self.unhooked.clear()
        self.recomputed.clear()
        self._packing.clear()


def node_noting(into: set[NodeKey], original: Callable[..., Any]) -> Callable[..., Any]:
    """Tensor.register_hook or Tensor.retain_grad, noting the node of a non-leaf tensor in
    into: a hook may change its gradient on its way (the flow capture never reads it off a
    neighbour), and a replay of its graph would run the hook or set its .grad."""

    @functools.wraps(original)
    @never_compiled
    @forwards
    def noting(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if tensor.grad_fn is not None and not compiling():
            # its key, not the node: holding it would keep its graph (and what it saved)
            # alive; a key another node shares only costs that node a hook
            into.add(node_key(tensor.grad_fn))
        return original(tensor, *args, **kwargs)

    return noting
