"""A picture's bound: past MAX_BOXES boxes, the first ones are drawn and one box says how
many nodes were left out.

Folding keeps a chain or a fan of 1,000,000 nodes to a few boxes, but a graph with no repeats
to fold (a chain whose pattern is longer than folding looks for, a model's distinct layers)
stays one box a node. Graphviz fails on such a picture past ~100,000 boxes ("out of memory",
or an empty error) and its SVG is ~1 KB a box, so every picture stops at MAX_BOXES.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from .marks import Mark


class Drawing(Protocol):
    """The parts of drawing.Drawing a cap changes (drawing imports this module: no import
    back)."""

    boxes: list[tuple[str, tuple[str, ...], Any, str | None]]
    arrows: list[tuple[str, str, str | None]]
    cuts: list[tuple[str, str, str | None]]
    tooltips: dict[str, str]
    members: dict[str, list[str]]
    marks: dict[str, Mark]


# Graphviz's layout grows faster than the boxes: the union of two 100,000-node chains that
# differ throughout (`diff -o`) takes 0.6 s at 1,000 boxes, 2.4 s at 2,000, 17 s at 5,000;
# a plain chain of 5,000 takes ~1 s. A picture this size is a map to search, not to read.
MAX_BOXES = 2_000
# Mermaid refuses a flowchart past 500 edges or 50,000 characters by default (GitHub's and
# mermaid.live's renderers), a 2,000-box one is ~90 KB: 300 boxes keep a DAG's edges in bound
MERMAID_BOXES = 300
EXTRA_KINDS = ("output", "cut", "more")  # boxes that stand for no node: never counted


class Capped(NamedTuple):
    """What a cap left out: nodes (counting each folded box's members) and boxes, the kept
    boxes that lost an input to it (the "more" box points to each), and the strongest NaN/Inf
    mark among the boxes left out (the "more" box takes it: a mark is never dropped unsaid)."""

    nodes: int
    boxes: int
    fed: list[str]
    mark: Mark | None = None


def cap_boxes(out: Drawing, limit: int) -> Capped:
    """Keep the first limit node boxes of out (discovery order: nearest the outputs), their
    arrows, and the output and cut boxes that point at them; drop the rest in place."""
    node_boxes = [box[0] for box in out.boxes if box[2] not in EXTRA_KINDS]
    if len(node_boxes) <= limit:
        return Capped(0, 0, [])
    dropped = set(node_boxes[limit:])
    nodes = sum(len(out.members.get(box_id, ())) or 1 for box_id in dropped)
    lost = [mark for box_id, mark in out.marks.items() if box_id in dropped]
    mark = min(lost, key=lambda m: m.level != "born", default=None)  # born over carries
    fed = list(dict.fromkeys(dst for src, dst, _ in out.arrows
                             if src in dropped and dst not in dropped))
    out.arrows = [a for a in out.arrows if a[0] not in dropped and a[1] not in dropped]
    out.cuts = [a for a in out.cuts if a[1] not in dropped]
    # an output or cut box whose node was dropped goes with it
    ends = {a[1] for a in out.arrows} | {a[0] for a in out.cuts}
    out.boxes = [box for box in out.boxes if box[0] not in dropped
                 and (box[2] not in ("output", "cut") or box[0] in ends)]
    kept = {box[0] for box in out.boxes}
    out.tooltips = {k: v for k, v in out.tooltips.items() if k in kept}
    out.members = {k: v for k, v in out.members.items() if k in kept}
    out.marks = {k: v for k, v in out.marks.items() if k in kept}
    return Capped(nodes, len(dropped), fed, mark)
