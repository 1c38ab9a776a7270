"""Where a NaN or Inf was born in a forward: the first op whose output is not finite from
finite inputs, read off the values its graph saved for backward.

Only asked when a root is not finite, before backward frees those values: a healthy run never
comes here. The forward's values are known where some node saved them (a saved input carries
its producer as .grad_fn and its output_nr, a saved output is its own node's) and at the
leaves (AccumulateGrad's variable). A NaN reaches the root along values that are not finite,
so the search keeps to the nodes reached from the roots through values not read finite: among
them the earliest made (autograd numbers nodes in creation order) whose value is read not
finite while no input of its is, and a parameter or an input without grad read not finite
comes first of all. That node's own inputs may not have been saved: going up through values
nobody kept, the first op that makes NaN or Inf of finite numbers (log, division, exp…) is the
one to blame, else the node itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from ..compat.torch import NO_SEQUENCE, sequence_number
from ..findings.graph import FORWARD_CAUSES
from ..model.records import LEAF
from .walk import RawEdge, node_kind, node_type, saved_values

Origin = Literal["op", "parameter", "input"]
# a value of the forward: (position of the node that made it in the walk, its output number)
Value = tuple[int, int]
OWN_OUTPUT = -1  # the output number of a value a node saved of its own that needs no grad


@dataclass
class Birth:
    """What the search found: the op that made the first non-finite value (or the leaf or
    input that held it already), and every node whose saved values are not finite."""

    origin: Origin
    kind: Literal["NaN", "Inf"]
    position: int  # the op's place in the walk (a parameter's AccumulateGrad, an input's
    # user)
    leaf: torch.Tensor | None = None  # the parameter that holds it (origin "parameter")
    certain: bool = True  # every input of the op was read, and finite
    carriers: list[int] = field(default_factory=list)  # positions of nodes that saved one
    # the ops above the op reached through values nothing kept: any of them may have made it
    unread_above: int = 0


def plain(t: Any) -> bool:
    """A tensor whose values can be read here, cheaply and without another process: a plain
    tensor or parameter (not a DTensor, a functorch wrapper or a fake), floating, strided."""
    return type(t) in (torch.Tensor, torch.nn.Parameter) and t.layout == torch.strided \
        and (t.is_floating_point() or t.is_complex()) and not t.is_meta and t.numel() > 0


def not_finite(tensors: list[torch.Tensor]) -> list[bool]:
    """Whether each tensor holds a NaN or Inf, read in one batch per device: small ones of
    one shape stacked, a few ops for thousands, each big one on its own."""
    flags: list[bool] = [False] * len(tensors)
    by_device: dict[torch.device, list[int]] = {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    with torch.no_grad():
        for indices in by_device.values():
            big: list[int] = []
            alike: dict[torch.Size, list[int]] = {}  # small ones by shape
            for i in indices:
                t = tensors[i]
                if t.numel() > _SMALL:
                    big.append(i)
                else:
                    alike.setdefault(t.shape, []).append(i)
            groups: list[tuple[torch.Tensor, list[int]]] = []
            if big:
                groups.append((torch.stack([~torch.isfinite(tensors[i]).all() for i in big]),
                               big))
            for shape, same in alike.items():
                step = max(1, JOINED // max(1, shape.numel()))
                for k in range(0, len(same), step):
                    run = same[k:k + step]
                    stacked = torch.stack([tensors[i] for i in run])  # promoted to one dtype
                    groups.append((~torch.isfinite(stacked).reshape(len(run), -1).all(1), run))
            for read, which in groups:
                for i, bad in zip(which, read.tolist(), strict=True):
                    flags[i] = bad
    return flags


# A tensor of at most this many elements is read stacked with others of its shape, at most
# JOINED elements together: a graph of a million nodes saves a million small values (three
# ops each took 10 s).
_SMALL = 4096
JOINED = 1 << 22


def search(roots: list[torch.Tensor], order: list[Any], edges: list[RawEdge],
           skip: Callable[[Any], bool]) -> Birth | None:
    """Where the non-finite values of roots (tensors of the graph walked as order and edges)
    were born; skip(node) leaves a node's saved values unread (one that recomputes)."""
    index = {node: i for i, node in enumerate(order)}
    readings = _readings(roots, order, index, skip)
    bad = not_finite([t for _, _, t in readings])
    values: dict[Value, bool] = {}  # a value -> finite
    first_bad: dict[Value, torch.Tensor] = {}
    data_bad: dict[int, torch.Tensor] = {}  # a node -> an input without grad, not finite
    carriers: set[int] = set()
    for (value, user, t), is_bad in zip(readings, bad, strict=True):
        if is_bad and user is not None:
            carriers.add(user)
        if value is None:  # an input without grad, seen only by its user
            if is_bad and user is not None:
                data_bad.setdefault(user, t)
            continue
        values[value] = values.get(value, True) and not is_bad
        if is_bad:
            first_bad.setdefault(value, t)
    inputs: dict[int, list[Value]] = {}
    for src, dst, _, output in edges:
        inputs.setdefault(dst, []).append((src, output))
    starts = [index[r.grad_fn] for r in roots if r.grad_fn in index]
    reached = _reached(starts, inputs, values)
    found = _earliest(order, reached, inputs, values, data_bad)
    if found is None:
        return None
    at, origin = found
    shown = data_bad[at] if origin == "input" else next(
        t for (i, _), t in first_bad.items() if i == at)
    kind: Literal["NaN", "Inf"] = "NaN" if bool(torch.isnan(shown).any()) else "Inf"
    if origin == "parameter":
        return Birth(origin, kind, at, leaf=order[at].variable, carriers=sorted(carriers))
    if origin == "input":
        return Birth(origin, kind, at, carriers=sorted(carriers))
    op = _blamed(order, at, inputs, values)
    certain = all(values.get(v) is True for v in inputs.get(op, ()))
    unread = sum(node_kind(order[i]) != LEAF for i in _unread_above(op, inputs, values))
    return Birth("op", kind, op, certain=certain, carriers=sorted(carriers), unread_above=unread)


def _readings(roots: list[torch.Tensor], order: list[Any], index: dict[Any, int],
              skip: Callable[[Any], bool]
              ) -> list[tuple[Value | None, int | None, torch.Tensor]]:
    """(the value, the node that saved it, the tensor) for each value that can be read:
    the roots, each leaf's variable, and what every node saved (a value is None for an
    input without grad: it is no node's)."""
    leaves = {id(node.variable): i for i, node in enumerate(order) if node_kind(node) == LEAF}
    out: list[tuple[Value | None, int | None, torch.Tensor]] = [
        ((index[r.grad_fn], r.output_nr), None, r.detach()) for r in roots
        if r.grad_fn in index]
    for i, node in enumerate(order):
        if node_kind(node) == LEAF:
            if plain(node.variable):
                out.append(((i, 0), None, node.variable.detach()))
            continue
        if skip(node):
            continue
        for t, output in saved_values(node):
            if not plain(t):
                continue
            producer = t.grad_fn
            if producer is not None:
                at = index.get(producer)
                value = None if at is None else (at, t.output_nr)
                if value is None:
                    continue  # made outside this graph's walk: not one of its values
            elif t.requires_grad:
                leaf = leaves.get(id(t))
                value = None if leaf is None else (leaf, 0)
            elif output:  # an output of the node's own that needs no grad: its value, on
                value = (i, OWN_OUTPUT)  # no edge (LayerNorm's mean and rstd)
            else:
                value = None
            out.append((value, i, t))  # unpacked: a tensor of its own already
    return out


def _reached(starts: list[int], inputs: dict[int, list[Value]], values: dict[Value, bool]
             ) -> list[int]:
    """The nodes reached from starts through values not read finite, in the order met (each
    once): a NaN on its way to a root goes through none that is finite."""
    seen = set(starts)
    order = list(starts)
    for node in order:  # the list is the queue
        for value in inputs.get(node, ()):
            if values.get(value) is not True and value[0] not in seen:
                seen.add(value[0])
                order.append(value[0])
    return order


def _earliest(order: list[Any], reached: list[int], inputs: dict[int, list[Value]],
              values: dict[Value, bool], data_bad: dict[int, torch.Tensor]
              ) -> tuple[int, Origin] | None:
    """The earliest made of the reached nodes whose value is read not finite and none of
    whose inputs is (a leaf, or a node given an input without grad not finite, comes first)."""
    bad_nodes = {i for (i, _), finite in values.items() if not finite}
    best: tuple[tuple[int, int], int, Origin] | None = None
    for i in reached:
        if i in data_bad:
            candidate: tuple[tuple[int, int], int, Origin] = ((-1, i), i, "input")
        elif i not in bad_nodes or any(values.get(v) is False for v in inputs.get(i, ())):
            continue
        elif node_kind(order[i]) == LEAF:
            candidate = ((-1, i), i, "parameter")
        else:
            number = sequence_number(order[i])
            candidate = ((number if number != NO_SEQUENCE else -1, i), i, "op")
        if best is None or candidate[0] < best[0]:
            best = candidate
    return None if best is None else (best[1], best[2])


def _blamed(order: list[Any], at: int, inputs: dict[int, list[Value]],
            values: dict[Value, bool]) -> int:
    """The op to blame for the value at `at`: itself, when it is an op that makes NaN or Inf
    of finite numbers or all its inputs were read; else the first such op met going up
    through values nobody saved; else itself."""
    if node_type(order[at]) in FORWARD_CAUSES:
        return at
    for i in _unread_above(at, inputs, values):
        if node_type(order[i]) in FORWARD_CAUSES:
            return i
    return at


def _unread_above(at: int, inputs: dict[int, list[Value]], values: dict[Value, bool]
                  ) -> Iterable[int]:
    """The nodes above `at` reached through values no node saved, nearest first."""
    seen = {at}
    todo = [at]
    for node in todo:
        for value in inputs.get(node, ()):
            if value not in values and value[0] not in seen:
                seen.add(value[0])
                todo.append(value[0])
                yield value[0]
