"""Gradient-flow capture: node hooks that summarise what each node received and sent."""

from __future__ import annotations

import gc
from functools import partial
from typing import Any

import torch

from .summary import RawStats, grad_stats, is_dense

Key = tuple[Any, ...]


def content_key(g: torch.Tensor) -> Key:
    """Equal keys mean equal elements while both tensors are alive: same memory and version.

    A tensor that fills one block of memory is keyed by the block, so its reshapes and
    transposes share one summary (norm, min and max ignore element order).
    """
    if g.is_contiguous() or is_dense(g):  # the first test is the common, cheap one
        return g.data_ptr(), g.numel(), g.dtype, g._version
    return g.data_ptr(), tuple(g.shape), g.stride(), g.dtype, g._version


def _summary(memo: dict[Key, RawStats], g: torch.Tensor, key: Key) -> RawStats:
    raw = memo.get(key)
    if raw is None:
        raw = memo[key] = grad_stats(g)
    elif raw[2] is not None or raw[0] != tuple(g.shape):
        # the same memory through a reshape or transpose: same statistics, but small
        # values are copied again, in this tensor's order
        raw = (tuple(g.shape), raw[1], None if raw[2] is None else g.detach().clone())
    return raw


class FlowCapture:
    """Hooks on every node of a pass; `records` maps id(node) to (node, order, outs, ins).

    The hooks return None, so no gradient changes; they keep summaries, never gradients.
    Most gradients appear several times (sent along an edge, then received; passed on by Add
    to both inputs; reshaped or transposed by a view op), so a summary is reused when the
    content key matches. Keys are compared only while both tensors are surely alive: within
    one hook call, or along an edge while the engine holds the gradient in between (so its
    memory cannot be reused); a hook's new tensor or an in-place change gets a new summary.
    """

    def __init__(self, nodes: list[Any], edges: list[tuple[int, int, int, int]],
                 leaves_run: bool = True) -> None:
        # The hooks make many small objects and no cycles: the cyclic collector would only
        # scan the whole heap again and again (tens of ms a time). remove() restores it.
        self._collecting = gc.isenabled()
        gc.disable()
        self.records: dict[int, tuple[Any, int, list[Any], list[Any]]] = {}
        self._sent: dict[tuple[int, int], tuple[Key, RawStats]] = {}
        targets: list[dict[int, tuple[int, int]]] = [{} for _ in nodes]
        ways_in = [0] * len(nodes)
        for src, dst, slot, k in edges:
            targets[dst][slot] = (id(nodes[src]), k)
            ways_in[src] += 1
        # A leaf fed by one edge, with no hook of its own, receives exactly what was sent to
        # it; when every leaf runs (a full backward), its record is read off the sender's and
        # it needs no hook. (After autograd.grad or backward(inputs=...), leaves may not run.)
        self._quiet = [node for i, node in enumerate(nodes)
                       if leaves_run and ways_in[i] == 1 and hasattr(node, "variable")
                       and not node.variable._backward_hooks]
        quiet = {id(node) for node in self._quiet}
        self._handles = [node.register_hook(partial(self._on_grads, node, targets[i]))
                         for i, node in enumerate(nodes) if id(node) not in quiet]

    def _on_grads(self, node: Any, targets: dict[int, tuple[int, int]],
                  grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        """The hook: summarise what node received (grad_outputs) and sent (grad_inputs)."""
        sent, me = self._sent, id(node)
        memo: dict[Key, RawStats] = {}
        outs: list[RawStats | None] = []
        for k, g in enumerate(grad_outputs):
            came = sent.pop((me, k), None)
            if g is None:
                outs.append(None)
            else:
                if came is not None:
                    memo.setdefault(*came)  # unchanged since it was sent: its summary serves
                outs.append(_summary(memo, g, content_key(g)))
        ins: list[RawStats | None] = []
        for slot, g in enumerate(grad_inputs):
            if g is None:
                ins.append(None)
                continue
            key = content_key(g)
            raw = _summary(memo, g, key)
            ins.append(raw)
            target = targets.get(slot)
            if target is not None:
                sent[target] = (key, raw)
        self.records[me] = (node, len(self.records), outs, ins)

    def remove(self) -> None:
        """Remove every hook, leaving the graph as the scenario made it."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for leaf in self._quiet:
            came = self._sent.get((id(leaf), 0))
            if came is not None:  # its sender ran: the leaf accumulated exactly that
                self.records[id(leaf)] = (leaf, len(self.records), [came[1]], [])
        self._quiet.clear()
        self._sent.clear()
        if self._collecting:
            gc.enable()
