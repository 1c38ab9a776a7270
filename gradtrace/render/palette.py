"""How each kind of box looks, in every picture format: one table, read by DOT and Mermaid."""

from __future__ import annotations

from typing import Literal, NamedTuple

BoxKind = Literal["output", "op", "leaf", "custom", "gradient", "folded", "more", "added",
                  "removed", "changed", "cut"]
MarkLevel = Literal["born", "carries"]  # a NaN or Inf was born at a node, or passed through


CUT_STROKE = "#c62828"  # a cut's box and its arrow


class Look(NamedTuple):
    """A box's fill and border colours, shape, and how its border stands out."""

    caption: str  # what the legend says it is
    fill: str
    stroke: str
    shape: str = "box"  # a Graphviz shape
    rounded: bool = True
    border: Literal["bold", "dashed"] | None = None  # DOT also draws the stroke colour then


# In the legend's order.
PALETTE: dict[BoxKind, Look] = {
    "output": Look("output tensor", "#c8e6c9", "#2e7d32"),
    "op": Look("backward node", "#eeeeee", "#616161"),
    "leaf": Look("leaf tensor (AccumulateGrad)", "#bbdefb", "#1565c0", rounded=False),
    "custom": Look("custom autograd.Function", "#f8bbd0", "#ad1457", border="bold"),
    "gradient": Look("node of a gradient's graph (create_graph=True)", "#fff3e0", "#e65100",
                     border="dashed"),
    "folded": Look("folded repeats (a chain, or branches)", "#e1f5fe", "#0277bd", shape="box3d",
                   rounded=False),
    "more": Look("nodes left out", "#fffde7", "#f9a825", shape="note", rounded=False),
    # a graph-cut finding's line: a dashed red arrow to the node where the cut value is used
    "cut": Look("graph cut (.detach(), no_grad, .item() …)", "#ffebee", CUT_STROKE,
                shape="note", rounded=False, border="dashed"),
    # gradtrace diff's union graph
    "added": Look("only in B (added)", "#a5d6a7", "#1b5e20", border="bold"),
    "removed": Look("only in A (removed)", "#ef9a9a", "#b71c1c", border="dashed"),
    "changed": Look("in both, changed", "#ffe082", "#ff6f00", border="bold"),
}


class MarkLook(NamedTuple):
    """The border of a box where a NaN or Inf was born or passed (over its kind's look)."""

    caption: str
    stroke: str
    width: float  # Graphviz penwidth; CSS pixels in Mermaid and the page


# In the legend's order.
MARK_LOOKS: dict[MarkLevel, MarkLook] = {
    "born": MarkLook("first NaN/Inf born here", "#c62828", 3.0),
    "carries": MarkLook("NaN/Inf passed through", "#e53935", 1.8),
}
