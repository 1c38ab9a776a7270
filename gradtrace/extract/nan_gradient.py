"""A pass's nan-gradient judged from its graph made plain data, as the trace's is: what a
watched run tells as soon as the pass's row reads a .grad not finite."""

from __future__ import annotations

from collections.abc import Callable

from ..findings.graph import after_light, first_not_finite, pass_nan_origin
from ..model.records import Finding, Pass, Trace
from .captured import RawPass
from .frozen import FrozenGraph


def nan_gradient_of(p: RawPass, graph: FrozenGraph, number: int, script: str | None,
                    finite: Callable[[int], bool | None]) -> Finding | None:
    """Where pass `number`'s (p's, its graph frozen) first non-finite gradient was born,
    said to follow the light pass where a .grad first turned non-finite, if one did
    (finite: a 0-based row's verdict, True for a pass in detail: it tells its own)."""
    shown = Pass(p.kind, graph.roots, p.retain_graph, p.create_graph, p.error, graph.flow,
                 p.by, line=p.line, code=p.code)
    alone = Trace(script, "", "", graph.roots, (), "", graph.nodes, graph.edges,
                  graph.tensors, (shown,), ())
    found = pass_nan_origin(number, shown, alone, graph.carried)
    return None if found is None else \
        after_light(found, number, first_not_finite(finite, number - 1))
