"""Backward through a freed graph: which earlier pass freed the buffers, which nodes both
passes share, and the tensor through which the second pass reaches them."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from ..compat.torch import NO_SEQUENCE, sequence_number
from ..extract.tensors import Named
from ..extract.walk import node_type
from ..findings.registry import GRAPH_FREED
from ..model.records import Finding, Source


class FreedPass(NamedTuple):
    """A pass that freed its graph's saved tensors: where it ran, its roots and its nodes,
    by autograd sequence number (unique in a run; holds no graph alive)."""

    number: int
    line: int | None
    code: str | None
    roots: set[int]
    nodes: set[int]


class FreedGraphs:
    """The latest passes without retain_graph, and the nodes each freed. A backward through
    a freed graph meets a recent pass's (the step before, in a loop that carries a tensor
    over): the last REMEMBERED passes are kept, so a long loop costs no more."""

    REMEMBERED = 16

    def __init__(self) -> None:
        self._passes: deque[FreedPass] = deque(maxlen=self.REMEMBERED)

    def note(self, nodes: list[Any], number: int, line: int | None, code: str | None,
             roots: list[Any]) -> None:
        """Pass `number` (at line, code, from root nodes) ran nodes and freed what they
        saved."""
        ran = set(map(sequence_number, nodes))  # in bulk: a 100,000-node pass
        ran.discard(NO_SEQUENCE)
        self._passes.append(FreedPass(number, line, code,
                                      {sequence_number(r) for r in roots if r is not None}, ran))

    def finding(self, nodes: list[Any], number: int, roots: list[Any], named: Named,
                source_of: Callable[[Any], Source | None]) -> Finding | None:
        """Why pass `number` found its graph freed; nodes are in breadth-first order from
        its roots, so the first shared one is where it entered the freed part."""
        freed = set().union(*(p.nodes for p in self._passes))
        shared = [n for n in nodes if sequence_number(n) in freed]
        if not shared:
            return None
        entry = shared[0]
        # the earliest remembered pass to free it
        earlier = next(p for p in self._passes if sequence_number(entry) in p.nodes)
        line, code = earlier.line, earlier.code
        name = next((n for n, t in named if t.grad_fn is entry), None)
        made = source_of(entry)
        where = f", line {made.line}" if made is not None else ""
        through = (f"{name} (output of {node_type(entry)}{where})" if name
                   else f"{node_type(entry)}{where}")
        at = f" (line {line} `{code}`)" if line else ""
        # the same root again: a repeat, not a link
        same_root = bool(roots) and all(r is not None and sequence_number(r) in earlier.roots
                                        for r in roots)
        if same_root:
            hint = ("pass retain_graph=True to the first backward() if the same graph is meant "
                    "to be differentiated twice; else recompute the forward before each one")
        else:
            carried = name or "the shared tensor"
            hint = (f"{carried} links the two passes: detach it where the first pass uses it "
                    f"or where it is carried over (`{carried}.detach()`), or recompute it; "
                    "retain_graph=True on the first backward only if both passes are meant "
                    "to go through it")
        return GRAPH_FREED.finding(
            f"pass {number} reached {len(shared)} node(s) whose saved tensors pass "
            f"{earlier.number}"
            f"{at} already freed; it entered them through {through}",
            tensor=name, hint=hint, line=None if made is None else made.line,
            file=None if made is None else made.file)
