"""The nodes of a pass that need no flow hook: re-layout nodes (views, transposes, selects)
and every other node of a chain, whose records are read off their hooked neighbours'."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ...compat.torch import input_shapes, is_function_node
from ...extract.captured import FlowRecord
from ...extract.summary import VALUES_LIMIT, RawStats, plain_size
from ...model.records import Shape

# Backward nodes that only re-lay out the gradient they receive: what they send has the same
# elements (the same norm, min and max), in another shape (or the same: clone passes it on).
RELAYOUT = frozenset({
    "CloneBackward0",
    "ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "TransposeBackward0",
    "TBackward0", "PermuteBackward0", "SqueezeBackward0", "SqueezeBackward1",
    "SqueezeBackward2", "UnsqueezeBackward0", "AliasBackward0",
})


# Backward nodes that send the gradient they receive embedded in zeros (the input's shape).
EMBED = frozenset({"SelectBackward0", "SliceBackward0"})


def passes_on(node: Any, shape: Shape, sent_shape: Shape) -> bool:
    """Whether node sends the elements it receives, perhaps with zeros around them: a
    re-layout, a select or slice, or an expand to the same shape (its backward, a sum over no
    dimension, hands the gradient on)."""
    name = type(node).__name__
    return name in RELAYOUT or name in EMBED or (name == "ExpandBackward0"
                                                 and shape == sent_shape)


def received_shape(node: Any, k: int = 0) -> Shape:
    """The shape of the gradient arriving at node's input k (from autograd's metadata: only
    asked for when it can be read)."""
    shapes = input_shapes(node)
    assert shapes is not None
    return tuple(d if isinstance(d, int) else plain_size(d) for d in shapes[k])


def _elements(shape: Shape) -> int:
    """How many elements a shape holds; 0 for a ragged one (a nested tensor's: never skipped)."""
    return math.prod(d if isinstance(d, int) else 0 for d in shape)


MAY_PASS_ON = RELAYOUT | EMBED | {"ExpandBackward0"}


class Relayout(NamedTuple):
    """A node without a hook whose record is read off its consumer's after the pass."""

    node: Any
    walk_index: int  # its place in the walk
    consumer: Any
    consumer_index: int
    slot: int  # the consumer's input this node feeds
    consumer_skipped: bool  # the consumer is such a node too
    shape: Shape  # what it sends


class Link(NamedTuple):
    """A node without a hook in a run of single edges: what it received is what its consumer
    sent, and what it sent is what each of its inputs received."""

    node: Any
    consumer: Any
    slot: int  # the consumer's input this node feeds
    slots: int  # how many gradients it sends (one per next_functions entry)
    inputs: list[tuple[Any, int, int]]  # (input node, the slot it is fed from, output_nr)


def skipped_relayouts(nodes: list[Any], ways_in: list[int],
                      children: list[list[tuple[int, int, int]]], watched: frozenset[int]
                      ) -> tuple[list[bool], dict[int, Shape]]:
    """Which nodes need no hook, and the shape each sends. A re-layout node (view,
    transpose, select …) with one way in and one input needs none: its record is what its
    consumer sent, re-shaped (or embedded in zeros). Only large gradients (whose values are
    not kept) and only unnamed tensors (a named one may carry the user's hook)."""
    skipped = [False] * len(nodes)
    received: dict[int, Shape] = {}  # the shapes candidates receive, send
    sends: dict[int, Shape] = {}
    if nodes and input_shapes(nodes[0]) is None:  # no metadata: every node keeps its hook
        return skipped, sends
    for i in reversed(range(len(nodes))):  # inputs mostly before their consumers
        node = nodes[i]
        if ways_in[i] == 1 and len(children[i]) == 1 \
                and type(node).__name__ in MAY_PASS_ON and id(node) not in watched:
            c, k, _ = children[i][0]
            shape = received[i] = received_shape(node)
            if _elements(shape) > VALUES_LIMIT:
                # metadata is slow to read: in a chain of views, what one sends is what
                # the next receives
                sent = received.get(c) if k == 0 else None
                sends[i] = sent if sent is not None else received_shape(nodes[c], k)
                skipped[i] = passes_on(node, shape, sends[i])
    return skipped, sends


def chain_links(nodes: list[Any], ways_in: list[int], parent: list[tuple[int, int]],
           children: list[list[tuple[int, int, int]]], skipped: list[bool],
           watched: frozenset[int]) -> list[bool]:
    """Which nodes can go without a hook, their records read off hooked neighbours: every
    other node of a chain. Only between edges nothing else feeds (no sum), away from leaves
    and named tensors (whose own hooks may change a gradient on its way), for built-in ops
    with one output; only in a full backward (every node that is reached runs)."""
    links = [False] * len(nodes)
    hooked = [False] * len(nodes)  # an input of a link: it must keep its hook
    for i, node in enumerate(nodes):  # walk order: a node's one consumer comes before it
        if hooked[i] or skipped[i] or ways_in[i] != 1 or not children[i] \
                or id(node) in watched:
            continue
        consumer = parent[i][0]
        if links[consumer] or skipped[consumer]:
            continue
        if any(skipped[c] or ways_in[c] != 1 or id(nodes[c]) in watched
               or hasattr(nodes[c], "variable") for c, _, _ in children[i]):
            continue
        shapes = input_shapes(node)
        if is_function_node(node) or shapes is None or len(shapes) != 1:
            continue  # a custom Function's node, an op with several outputs (or not known)
        links[i] = True
        for c, _, _ in children[i]:
            hooked[c] = True
    return links


def link_record(records: dict[int, FlowRecord], link: Link) -> FlowRecord | None:
    """A link's record from its neighbours' (None when it did not run: they did not)."""
    consumer = records.get(id(link.consumer))
    if consumer is None or link.slot >= len(consumer.sent):
        return None
    sent: list[RawStats | None] = [None] * link.slots  # a slot without an edge sends None
    for node, slot, k in link.inputs:
        record = records.get(id(node))
        if record is None or k >= len(record.received):
            return None
        sent[slot] = record.received[k]
    return FlowRecord(link.node, consumer.position, [consumer.sent[link.slot]], sent)
