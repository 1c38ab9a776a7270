"""Gradient-flow capture: node hooks that summarise what each node received and sent."""

from __future__ import annotations

import gc
import math
from functools import partial
from typing import Any

import torch

from ...compat.torch import has_tensor_hooks, never_compiled, tensor_version
from ...extract.captured import FlowRecord
from ...extract.summary import RawStats, StatsRow, StatsTable, grad_stats, is_dense, shape_of
from ...extract.walk import RawEdge
from .base import Observer, PassState, Recording
from .flow_shortcuts import (
    Link,
    Relayout,
    chain_links,
    link_record,
    skipped_relayouts,
)

Key = tuple[Any, ...]  # what content_key returns: compared for equality only
Targets = tuple[tuple[int, int] | None, ...]  # by slot: (id of the input fed, output_nr)


def content_key(g: torch.Tensor) -> Key:
    """Equal keys mean equal elements while both tensors are alive: same memory and version.

    A tensor that fills one block of memory is keyed by the block, so its reshapes and
    transposes share one summary (norm, min and max ignore element order).
    """
    if g.layout != torch.strided or g.is_nested:
        # sparse: no block of memory to key it by, and its id may be a dead tensor's (the
        # engine's sum of two sparse gradients took the id of one); nested: no one shape. A
        # key equal to no other, so it is summarised from its own values
        return (object(),)
    if g.is_contiguous() or is_dense(g):  # the first test is the common, cheap one
        return g.data_ptr(), g.numel(), g.dtype, tensor_version(g)
    return g.data_ptr(), tuple(g.shape), g.stride(), g.dtype, tensor_version(g)


def _summary(memo: dict[Key, RawStats], g: torch.Tensor, key: Key,
             table: StatsTable) -> RawStats:
    raw = memo.get(key)
    if raw is None:
        raw = memo[key] = grad_stats(g, table)
    elif raw.shape != tuple(g.shape) or (raw.values is not None and g.dim() > 1):
        # the same memory through a reshape or transpose: same statistics, but small
        # values are copied again, in this tensor's order (one order for 0-d and 1-d)
        raw = raw._replace(shape=tuple(g.shape), values=None if raw.values is None
                           else grad_stats(g, table).values)
    return raw


def _is_number(g: torch.Tensor) -> bool:
    """Whether g is a plain 0-d floating CPU tensor: its summary is its number (the gradient
    of a scalar chain), made without a content key."""
    return not g.dim() and type(g) is torch.Tensor and g.is_floating_point() and g.is_cpu \
        and g.layout == torch.strided


def _number(g: torch.Tensor, known: RawStats | None) -> RawStats:
    """The summary of a 0-d gradient: known's when it holds the same number (what was sent
    along the edge, or passed on to another input), else a new one."""
    v = g.item()
    if known is not None and known.shape == () and isinstance(known.values, float) \
            and _same_number(known.values, v):
        return known
    return RawStats((), None, v)


def _same_number(a: float, b: float) -> bool:
    """Equal as JSON writes them: -0.0 is not 0.0, and every NaN is "nan"."""
    if a != b:
        return a != a and b != b
    return a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b)


def _targets(count: int, edges: list[RawEdge], skipped: list[bool], links: list[bool],
             children: list[list[tuple[int, int, int]]], nodes: list[Any]) -> list[Targets]:
    """Per node, where what it sends goes: (id(receiver), its output_nr) per input slot."""
    by_slot: dict[int, list[tuple[int, int] | None]] = {}  # per sender, while made
    for src, dst, slot, k in edges:
        while skipped[src]:  # send past skipped nodes, so the summary is still reused
            src, k, _ = children[src][0]
        if not links[src]:  # a link has no hook to take what is sent to it
            row = by_slot.setdefault(dst, [])
            row += [None] * (slot + 1 - len(row))
            row[slot] = (id(nodes[src]), k)
    # kept as tuples, and only for senders: a big graph has 100,000s (a dict each costs
    # ~200 B)
    targets: list[Targets] = [()] * count
    for dst, row in by_slot.items():
        targets[dst] = tuple(row)
    return targets


class FlowCapture:
    """Hooks on the nodes of a pass; `records` maps id(node) to its FlowRecord.

    The hooks return None, so no gradient changes; they keep summaries, never gradients.
    Most gradients appear several times (sent along an edge, then received; passed on by Add
    to both inputs; reshaped or transposed by a view op), so a summary is reused when the
    content key matches (for a 0-d gradient, when its number does). Keys are compared only
    while both tensors are surely alive: within one hook call, or along an edge while the
    engine holds the gradient in between (so its memory cannot be reused); a hook's new
    tensor or an in-place change gets a new summary.
    watched: ids of nodes that always get a hook (the grad_fns of named tensors, which may
    carry the user's own hooks).
    """

    def __init__(self, nodes: list[Any], edges: list[RawEdge],
                 leaves_run: bool = True, watched: frozenset[int] = frozenset(),
                 unhooked: dict[int, tuple[Any, ...]] | None = None,
                 skip_relayout: bool = True) -> None:
        # The hooks make many small objects and no cycles: the cyclic collector would only
        # scan the whole heap again and again (tens of ms a time). remove() restores it.
        self._collecting = gc.isenabled()
        gc.disable()
        self.records: dict[int, FlowRecord] = {}
        self._sent: dict[tuple[int, int], tuple[Key | None, RawStats]] = {}  # None: a number
        self._table = StatsTable()
        self.failures: list[str] = []  # nodes whose gradients could not be summarised
        # by id(node): what a node with a module's backward hook sent before the hook ran
        # (filled by that node's earlier hook, module_hooks.py; emptied here)
        self._unhooked = {} if unhooked is None else unhooked
        self._unhooked.clear()
        ways_in = [0] * len(nodes)
        parent: list[tuple[int, int]] = [(-1, -1)] * len(nodes)  # (consumer, its slot)
        # (input, its output_nr, the slot it feeds)
        children: list[list[tuple[int, int, int]]] = [[] for _ in nodes]
        for src, dst, slot, k in edges:
            ways_in[src] += 1
            parent[src] = (dst, slot)
            children[dst].append((src, k, slot))
        skipped, sends = skipped_relayouts(nodes, ways_in, children, watched) \
            if skip_relayout else ([False] * len(nodes), {})
        links = chain_links(nodes, ways_in, parent, children, skipped, watched) \
            if skip_relayout and leaves_run else [False] * len(nodes)
        targets = _targets(len(nodes), edges, skipped, links, children, nodes)
        self._links = [Link(node, nodes[parent[i][0]], parent[i][1], len(node.next_functions),
                            [(nodes[c], slot, k) for c, k, slot in children[i]])
                       for i, node in enumerate(nodes) if links[i]]
        self._relayout = [Relayout(node, i, nodes[parent[i][0]], parent[i][0], parent[i][1],
                                   skipped[parent[i][0]], sends[i])
                          for i, node in enumerate(nodes) if skipped[i]]  # in walk order
        # A leaf fed by one edge, with no hook of its own, receives exactly what was sent to
        # it; when every leaf runs (a full backward), its record is read off the sender's and
        # it needs no hook. (After autograd.grad or backward(inputs=...), leaves may not run.)
        self._quiet = [node for i, node in enumerate(nodes)
                       if leaves_run and ways_in[i] == 1 and hasattr(node, "variable")
                       and not has_tensor_hooks(node.variable)]
        quiet = {id(node) for node in self._quiet} | {id(r.node) for r in self._relayout} \
            | {id(link.node) for link in self._links}
        self._handles = [node.register_hook(partial(self._on_grads, node, targets[i]))
                         for i, node in enumerate(nodes) if id(node) not in quiet]

    @never_compiled  # a backward called in compiled code runs its hooks in it
    def _on_grads(self, node: Any, targets: Targets,
                  grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        """The hook. It never raises: a failure to summarise must not fail the user's pass."""
        try:
            self._summarise(node, targets, grad_inputs, grad_outputs)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the backward goes on
            self.failures.append(f"{type(node).__name__}: {type(exc).__name__}: {exc}")

    def _summarise(self, node: Any, targets: Targets,
                   grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        """Summarise what node received (grad_outputs) and sent (grad_inputs)."""
        sent, me = self._sent, id(node)
        memo: dict[Key, RawStats] = {}
        last: RawStats | None = None  # the latest number summarised in this call
        outs: list[RawStats | None] = []
        for k, g in enumerate(grad_outputs):
            came = sent.pop((me, k), None)
            if g is None:
                outs.append(None)
                continue
            if _is_number(g):
                last = _number(g, None if came is None else came[1])
                outs.append(last)
                continue
            key = content_key(g)
            if came is not None and came[0] == key:
                # the very tensor that was sent, unchanged: its summary serves. (Another key
                # may be stale: what was sent was copied on its way, by a view without a hook,
                # and freed, so one of this node's new gradients may take its memory.)
                memo.setdefault(key, came[1])
            outs.append(_summary(memo, g, key, self._table))
        ins: list[RawStats | None] = []
        for slot, g in enumerate(grad_inputs):
            if g is None:
                ins.append(None)
                continue
            sent_key: Key | None = None
            if _is_number(g):
                raw = last = _number(g, last)
            else:
                sent_key = content_key(g)
                raw = _summary(memo, g, sent_key, self._table)
            ins.append(raw)
            target = targets[slot] if slot < len(targets) else None
            if target is not None:
                sent[target] = (sent_key, raw)
        own = self._unhooked.pop(me, None)
        before: list[RawStats | None] | None = None
        if own is not None and any(a is not b for a, b in zip(own, grad_inputs, strict=False)):
            # the module's hook returned other gradients: what the node itself sent
            before = [None if g is None else _summary(memo, g, content_key(g), self._table)
                      for g in own]
        self.records[me] = FlowRecord(node, len(self.records), outs, ins, before)

    def remove(self) -> None:
        """Remove every hook, leaving the graph as the scenario made it."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for link in self._links:  # before the leaves and re-layouts that may read them
            record = link_record(self.records, link)
            if record is not None:
                self.records[id(link.node)] = record
        self._links.clear()
        for leaf in self._quiet:
            came = self._sent.get((id(leaf), 0))
            if came is not None:  # its sender ran: the leaf accumulated exactly that
                raw = came[1]
                own = shape_of(leaf.variable)  # a skipped transpose may lie in between
                got = raw if raw.shape == own else raw._replace(shape=own, values=None)
                self.records[id(leaf)] = FlowRecord(leaf, len(self.records), [got], [])
        self._quiet.clear()
        sent_by: dict[int, tuple[RawStats, int]] = {}  # skipped node index -> (sent, order)
        for r in self._relayout:
            received: RawStats | None = None
            if r.consumer_skipped:  # walk order: a consumer comes before what it consumes
                received, position = sent_by.get(r.consumer_index, (None, 0))
            else:
                record = self.records.get(id(r.consumer))
                if record is not None and r.slot < len(record.sent):
                    received, position = record.sent[r.slot], record.position
            if received is None:
                continue  # it did not run in this pass
            place = received.place
            if place is not None and math.prod(r.shape) != math.prod(received.shape):
                # a select or slice: zeros added
                place = StatsRow(place.table, place.table.with_zeros(place.row))
            # the same elements, in its input's shape
            sent = received._replace(shape=r.shape, place=place, values=None)
            self.records[id(r.node)] = FlowRecord(r.node, position, [received], [sent])
            sent_by[r.walk_index] = (sent, position)
        self._relayout.clear()
        self._sent.clear()
        self._unhooked.clear()
        if self._collecting:
            gc.enable()


class GradientFlow(Observer):
    """What every node of a pass in detail received and sent (hooks on its nodes)."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self._capture: FlowCapture | None = None

    def start(self, p: PassState) -> None:
        if not (self.recorder.options.flow and p.detailed) or p.plain:
            return
        marks = self.recorder.marks
        watched = frozenset(id(t.grad_fn) for _, t in p.named if t.grad_fn is not None) \
            | marks.hooked_in(p.nodes)
        self._capture = FlowCapture(p.nodes, p.edges, p.every_leaf, watched, marks.unhooked)

    def finish(self, p: PassState) -> None:
        if self._capture is not None:
            self._capture.remove()
            p.record.flow = self._capture.records
            p.record.flow_failures = self._capture.failures
            self._capture = None
