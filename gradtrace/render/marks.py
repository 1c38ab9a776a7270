"""The nodes a picture marks as carrying NaN or Inf: where one was born (the node a
`nan-gradient` or `nan-value` finding names) and where one passed (a non-finite gradient
received in the pass drawn, a named tensor whose value or .grad is not finite).

One decision for every picture: DOT and SVG draw a red border and a note in the box, Mermaid
a red class, the page the same border and the note in its details.
"""

from __future__ import annotations

from typing import NamedTuple

from ..model.records import Pass, Trace
from .palette import MarkLevel

BORN_CODES = {"nan-gradient": "gradient", "nan-value": "value"}


class Mark(NamedTuple):
    """Why a node is marked: born (a finding names it) or carries, and the note to show."""

    level: MarkLevel
    note: str


def non_finite_nodes(trace: Trace, shown: Pass | None) -> dict[str, Mark]:
    """node id -> its mark, for every node where a NaN or Inf was born or passed; shown is
    the pass whose gradients count (None: the one the graph shows, Trace.shown_pass)."""
    born: dict[str, list[str]] = {}
    for f in trace.findings:
        what = BORN_CODES.get(f.code)
        node = f.node or _node_of(trace, f.tensor)
        if what is not None and node is not None and what not in born.setdefault(node, []):
            born[node].append(what)
    carries: dict[str, list[str]] = {}

    def carry(node: str | None, what: str) -> None:
        if node is not None and what not in carries.setdefault(node, []):
            carries[node].append(what)

    for t in trace.tensors:
        if t.value is not None and not t.value.finite:
            carry(t.node, "value")
        if t.grad is not None and not t.grad.finite:
            carry(t.node, "gradient")
    if shown is None:
        shown = trace.shown_pass()
    if shown is not None:
        for node_id, flow in shown.flow.items():
            if any(g is not None and not g.finite for g in flow.grad_outputs):
                carry(node_id, "gradient")
    marks = {node: Mark("carries", "NaN/Inf " + " and ".join(sorted(whats, reverse=True)))
             for node, whats in carries.items() if whats}
    marks.update({node: Mark("born", "⚠ first NaN/Inf " + " and ".join(sorted(whats))
                             + " here") for node, whats in born.items() if whats})
    return marks


def _node_of(trace: Trace, tensor: str | None) -> str | None:
    if tensor is None:
        return None
    return next((t.node for t in trace.tensors if t.name == tensor), None)
