"""`dot --heat time|memory`: each costed box filled on a heat scale, with the scale's legend
(the same in DOT, SVG, PNG, PDF and the page, which draws the SVG)."""

from __future__ import annotations

from typing import NamedTuple

from ..model.profile import CostMeasure, heat_values
from ..model.records import Trace
from ..model.texts import duration_text, size_text

# light to dark, each with the text colour that reads on it (ColorBrewer's Oranges)
SCALE: tuple[tuple[str, str], ...] = (
    ("#fff5eb", "#000000"), ("#fdd0a2", "#000000"), ("#fd8d3c", "#000000"),
    ("#d94801", "#ffffff"), ("#7f2704", "#ffffff"))


class Heat(NamedTuple):
    """Each heated box's fill and text colour and its cost's text; the legend's rows."""

    boxes: dict[str, tuple[str, str, str]]  # box id -> (fill, font colour, "412 µs")
    legend: list[tuple[str, str]]  # (fill, caption), light to dark


def value_text(value: float, measure: CostMeasure) -> str:
    return duration_text(value) if measure == "time" else size_text(int(value))


def heat(trace: Trace, measure: CostMeasure, members: dict[str, list[str]],
         box_ids: list[str]) -> Heat:
    """The heat of each drawn box: its node's cost, or the sum of the nodes a folded box
    stands for; the scale runs from 0 to the largest box's cost in SCALE's steps."""
    values = heat_values(trace, measure)
    by_box: dict[str, float] = {}
    for box_id in box_ids:
        nodes = members.get(box_id, [box_id])
        costed = [values[n] for n in nodes if n in values]
        if costed:
            by_box[box_id] = sum(costed)
    top = max(by_box.values(), default=0.0)
    if top <= 0:
        return Heat({}, [])
    steps = len(SCALE)
    boxes = {}
    for box_id, value in by_box.items():
        level = min(int(value / top * steps), steps - 1)
        fill, font = SCALE[level]
        boxes[box_id] = (fill, font, value_text(value, measure))
    what = "backward time" if measure == "time" else "memory allocated in backward"
    legend = [(fill, f"{what} ≤ {value_text(top * (i + 1) / steps, measure)}")
              for i, (fill, _) in enumerate(SCALE)]
    return Heat(boxes, legend)
