"""Backward through a freed graph: which earlier pass freed the buffers, which nodes both
passes share, and the tensor through which the second pass reaches them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..extract.tensors import Named
from ..extract.walk import node_type
from ..findings.registry import GRAPH_FREED
from ..model.records import Finding, Source
from ..torch_compat import NO_SEQUENCE, sequence_number


class FreedGraphs:
    """The nodes each pass without retain_graph ran (by autograd sequence number, which is
    unique in a run and holds no graph alive), and which pass freed them."""

    def __init__(self) -> None:
        self._freed_by: dict[int, tuple[int, int | None, str | None]] = {}
        self._roots: dict[int, set[int]] = {}  # the root nodes each pass started from

    def note(self, nodes: list[Any], number: int, line: int | None, code: str | None,
             roots: list[Any]) -> None:
        """Pass `number` (at line, code, from root nodes) ran nodes and freed what they
        saved."""
        self._roots[number] = {sequence_number(r) for r in roots if r is not None}
        # in bulk (a 100,000-node pass): the earliest pass to free a node keeps it
        freed = dict.fromkeys(map(sequence_number, nodes), (number, line, code))
        freed.pop(NO_SEQUENCE, None)
        freed.update(self._freed_by)
        self._freed_by = freed

    def finding(self, nodes: list[Any], number: int, roots: list[Any], named: Named,
                source_of: Callable[[Any], Source | None]) -> Finding | None:
        """Why pass `number` found its graph freed; nodes are in breadth-first order from
        its roots, so the first shared one is where it entered the freed part."""
        shared = [n for n in nodes if sequence_number(n) in self._freed_by]
        if not shared:
            return None
        entry = shared[0]
        earlier, line, code = self._freed_by[sequence_number(entry)]
        name = next((n for n, t in named if t.grad_fn is entry), None)
        made = source_of(entry)
        where = f", line {made.line}" if made is not None else ""
        through = (f"{name} (output of {node_type(entry)}{where})" if name
                   else f"{node_type(entry)}{where}")
        at = f" (line {line} `{code}`)" if line else ""
        before = self._roots.get(earlier, set())  # the same root again: a repeat, not a link
        same_root = bool(roots) and all(r is not None and sequence_number(r) in before
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
            f"pass {number} reached {len(shared)} node(s) whose saved tensors pass {earlier}"
            f"{at} already freed; it entered them through {through}",
            tensor=name, hint=hint, line=None if made is None else made.line,
            file=None if made is None else made.file)
