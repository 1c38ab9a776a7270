"""A pass's nan-gradient judged from its graph made plain data, as the trace's is: what a
watched run tells as soon as the pass's row reads a .grad not finite."""

from __future__ import annotations

from collections.abc import Callable

from ..findings.graph import light_run, pass_nan_origin
from ..model.records import Finding, Pass, Trace
from .captured import RawPass
from .frozen import FrozenGraph


def nan_gradient_of(p: RawPass, graph: FrozenGraph, number: int, script: str | None,
                    light_not_finite: Callable[[int], bool]) -> Finding | None:
    """Where pass `number`'s (p's, its graph frozen) first non-finite gradient was born
    (light_not_finite: whether a 0-based row's pass was light and read a .grad not finite)."""
    shown = Pass(p.kind, graph.roots, p.retain_graph, p.create_graph, p.error, graph.flow,
                 p.by, line=p.line, code=p.code)
    alone = Trace(script, "", "", graph.roots, (), "", graph.nodes, graph.edges,
                  graph.tensors, (shown,), ())
    return pass_nan_origin(number, shown, alone, graph.carried,
                           light_run(light_not_finite, number - 1))
