"""Backward through a freed graph: which earlier pass freed the buffers, which nodes both
passes share, and the tensor through which the second pass reaches them."""

from __future__ import annotations

import ast
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from ...compat.torch import NO_SEQUENCE, sequence_number
from ...extract.tensors import Named
from ...extract.walk import node_type
from ...model.facts import GraphFreed
from ...model.records import Source
from .base import Observer, PassState, Recording


class FreedPass(NamedTuple):
    """A pass that freed its graph's saved tensors: where it ran, its roots and its nodes,
    by autograd sequence number (unique in a run; holds no graph alive)."""

    number: int
    line: int | None
    code: str | None
    roots: set[int]
    nodes: array[int]  # machine integers: a set of a 100,000-node pass's held 7 MB


class FreedGraphs(Observer):
    """The latest passes without retain_graph, and the nodes each freed. A backward through
    a freed graph meets a recent pass's (the step before, in a loop that carries a tensor
    over): the last REMEMBERED passes are kept, so a long loop costs no more."""

    REMEMBERED = 16

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self._passes: deque[FreedPass] = deque(maxlen=self.REMEMBERED)

    def finish(self, p: PassState) -> None:
        record = p.record
        if record.error_kind == "graph-freed":
            fact = self.fact(p.nodes, p.number, record.roots, p.named,
                             self.recorder.host.source_of)
            if fact is not None:
                self.recorder.tell(fact)
        elif not record.retain_graph and record.error is None:  # its saved tensors are gone
            self.note(p.nodes, p.number, record.line, record.code, record.roots)

    def note(self, nodes: list[Any], number: int, line: int | None, code: str | None,
             roots: list[Any]) -> None:
        """Pass `number` (at line, code, from root nodes) ran nodes and freed what they
        saved."""
        ran = array("q", filter(NO_SEQUENCE.__ne__, map(sequence_number, nodes)))
        self._passes.append(FreedPass(number, line, code,
                                      {sequence_number(r) for r in roots if r is not None}, ran))

    def fact(self, nodes: list[Any], number: int, roots: list[Any], named: Named,
             source_of: Callable[[Any], Source | None]) -> GraphFreed | None:
        """Why pass `number` found its graph freed; nodes are in breadth-first order from
        its roots, so the first shared one is where it entered the freed part."""
        freed = set().union(*(p.nodes for p in self._passes))
        shared = [n for n in nodes if sequence_number(n) in freed]
        if not shared:
            return None
        entry = shared[0]
        # the earliest remembered pass to free it (a scan of its numbers: once, for a fact)
        earlier = next(p for p in self._passes if sequence_number(entry) in p.nodes)
        made = source_of(entry)
        name = next((n for n, t in named if t.grad_fn is entry), None) \
            or (None if made is None else carried_over(made.code))
        # the same root again: a repeat, not a link
        same_root = bool(roots) and all(r is not None and sequence_number(r) in earlier.roots
                                        for r in roots)
        return GraphFreed(number, len(shared), earlier.number, earlier.line, earlier.code,
                          name, node_type(entry), made, same_root)


def carried_over(code: str) -> str | None:
    """The one name a line both reads and binds (`out, hidden = rnn(x, hidden)`): the
    tensor a loop carries from one step to the next, whose old value links their graphs."""
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, (ast.Assign, ast.AugAssign)):
        return None
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    read = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
    if isinstance(node, ast.AugAssign):
        read |= bound
    both = sorted(bound & read)
    return both[0] if len(both) == 1 else None
