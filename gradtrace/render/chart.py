"""The steps chart: gradient norm per module (or leaf) over the passes on a log axis, and the
loss on its own panel below, as a small deterministic SVG written by hand (no plotting
library: the same input gives the same bytes, and text is escaped like every other export).

A long run is cut into at most PLOT_WIDTH buckets (one per pixel column), a norm's point is
the largest of its bucket and the loss's the mean, as in the terminal's steps view. A NaN or
inf is a red × on the band above the plot; a zero norm sits on the "0" band below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import ExportError
from ..model.records import Steps, Trace
from .escape import visible
from .series import (
    Series,
    bucket_bounds,
    bucketed,
    chosen,
    finite_positive,
    first_non_finite,
    grad_series,
    log_scale,
    loss_series,
    mean,
)

WIDTH = 780
LEFT, PLOT_WIDTH = 64, 460  # the plots' left edge and width
LEGEND_X = LEFT + PLOT_WIDTH + 24
TOP, PLOT_HEIGHT = 44, 250  # the norm plot
BAND = 18  # the "nan/inf" band above a plot and the "0" band below it
LOSS_GAP, LOSS_HEIGHT = 36, 90
LINES = 12  # lines drawn by default: more would be a tangle
# ten distinct colours (no red: red marks NaN and inf), then two more
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31")
BAD_COLOUR = "#d62728"
FONT = "Helvetica, Arial, sans-serif"


def xml_text(text: str) -> str:
    """text as XML character data or an attribute value: no markup, no control characters."""
    return (visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def require_steps(trace: Trace) -> Steps:
    """trace's steps, or an error saying why there are none."""
    if trace.steps is not None and trace.steps.grads:
        return trace.steps
    if trace.passes and trace.steps is None:  # saved by a gradtrace that kept no steps
        raise ExportError(f"the trace has {len(trace.passes)} backward pass(es) but no steps "
                          "recorded for them",
                          "record it again with this gradtrace: gradtrace show SCENARIO --json")
    raise ExportError("no backward passes were recorded, so there are no steps to chart",
                      "the steps are the passes of a script that calls backward(), such as "
                      "a training loop")


class Axis(NamedTuple):
    """A value axis: where low and high sit on the page (y grows downwards) and its scale."""

    low: float
    high: float
    top: float
    bottom: float
    log: bool

    def y(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.bottom - (v - self.low) / (self.high - self.low) * (self.bottom - self.top)


def _f(x: float) -> str:
    """A coordinate: one decimal, no "-0.0"."""
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def number_label(x: float) -> str:
    """A tick label: 0.001, 0.5, 20, 1e+06 …"""
    return f"{x:g}"


def log_axis(values: Sequence[float], top: float, bottom: float) -> tuple[Axis, list[float]]:
    """A log axis from the decade below the smallest value to the one above the largest, and
    its ticks (every decade, or every few when there are many)."""
    low = math.floor(math.log10(min(values)))
    high = math.ceil(math.log10(max(values)))
    if high == low:
        high += 1
    step = max(1, math.ceil((high - low) / 6))
    ticks = [10.0 ** k for k in range(low, high + 1, step)]
    return Axis(low, high, top, bottom, log=True), ticks


def nice_step(span: float, count: int = 5) -> float:
    """1, 2 or 5 times a power of ten, near span / count."""
    raw = span / count if span > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def linear_axis(values: Sequence[float], top: float, bottom: float) -> tuple[Axis, list[float]]:
    low, high = min(values), max(values)
    if high - low <= 1e-12 * max(abs(high), 1.0):
        low, high = low - 1, high + 1
    step = nice_step(high - low)
    low, high = math.floor(low / step) * step, math.ceil(high / step) * step
    ticks = [low + i * step for i in range(round((high - low) / step) + 1)]
    return Axis(low, high, top, bottom, log=False), ticks


def pass_ticks(passes: int) -> list[int]:
    """Pass numbers to label on the x axis: 1, then round numbers."""
    if passes <= 1:
        return [1]
    step = max(1, int(nice_step(passes, 6)))
    return [1, *range(step, passes + 1, step)] if step > 1 else list(range(1, passes + 1))


class Chart:
    """The SVG's elements, appended in drawing order."""

    def __init__(self, passes: int) -> None:
        self.passes = passes
        self.parts: list[str] = []

    def x(self, pass_number: float) -> float:
        if self.passes <= 1:
            return LEFT + PLOT_WIDTH / 2
        return LEFT + (pass_number - 1) / (self.passes - 1) * PLOT_WIDTH

    def add(self, text: str) -> None:
        self.parts.append(text)

    def text(self, x: float, y: float, words: str, anchor: str = "start",
             extra: str = "") -> None:
        self.add(f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"{extra}>'
                 f"{xml_text(words)}</text>")

    def frame(self, axis: Axis, ticks: list[float], title: str, bad: bool, zero: bool) -> None:
        """A plot's grid, y ticks, frame and title, and the labels of the band above it (bad:
        a value is NaN or inf) and below it (zero: a value is 0 on a log scale)."""
        bottom, top = axis.bottom + BAND, axis.top - BAND
        self.add(f'<g class="axis" data-scale="{"log" if axis.log else "linear"}">')
        for tick in ticks:
            y = axis.y(tick)
            self.add(f'<line class="grid" x1="{_f(LEFT)}" x2="{_f(LEFT + PLOT_WIDTH)}" '
                     f'y1="{_f(y)}" y2="{_f(y)}" stroke="#eceff1"/>')
            self.text(LEFT - 6, y + 4, number_label(tick), "end", ' class="tick"')
        if bad:
            self.text(LEFT - 6, top + BAND / 2 + 4, "nan/inf", "end",
                      f' fill="{BAD_COLOUR}" class="band"')
        if zero and axis.log:  # a zero has no place on a log scale: its own band
            self.text(LEFT - 6, bottom - BAND / 2 + 4, "0", "end", ' class="band"')
        for pass_number in pass_ticks(self.passes):
            x = self.x(pass_number)
            self.add(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{_f(bottom)}" y2="{_f(bottom + 4)}" '
                     'stroke="#90a4ae"/>')
        self.add(f'<rect x="{_f(LEFT)}" y="{_f(top)}" width="{_f(PLOT_WIDTH)}" '
                 f'height="{_f(bottom - top)}" fill="none" stroke="#90a4ae"/>')
        self.text(LEFT, top - 6, title, extra=' font-weight="bold"')
        self.add("</g>")

    def x_labels(self, y: float) -> None:
        for pass_number in pass_ticks(self.passes):
            self.text(self.x(pass_number), y, f"{pass_number:,}", "middle", ' class="tick"')
        self.text(LEFT + PLOT_WIDTH, y + 16, "pass", "end")

    def series(self, s: Series, axis: Axis, colour: str, width: int, pick_mean: bool = False,
               css: str = "series") -> None:
        """One polyline of s's drawable points, a red × per non-finite bucket, a dot per zero."""
        marks = bucketed(s.values, width, mean if pick_mean else max)
        bounds = bucket_bounds(len(s.values), width)
        points: list[tuple[float, float]] = []
        bad: list[float] = []
        zeros: list[float] = []
        for value, (start, end) in zip(marks, bounds, strict=True):
            x = self.x((start + end - 1) / 2 + 1)
            if value is None:
                continue
            if not math.isfinite(value):
                bad.append(x)
            elif axis.log and value <= 0:
                zeros.append(x)
            else:
                points.append((x, axis.y(value)))
        name = xml_text(s.name)
        leaves = xml_text(" ".join(s.leaves))
        self.add(f'<g class="{css}" data-name="{name}" data-leaves="{leaves}">'
                 f"<title>{name}</title>")
        line = " ".join(f"{_f(x)},{_f(y)}" for x, y in points)
        self.add(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                 f'stroke-linejoin="round" points="{line}"/>')
        if len(points) == 1:  # a line of one point shows nothing
            self.add(f'<circle cx="{_f(points[0][0])}" cy="{_f(points[0][1])}" r="2.5" '
                     f'fill="{colour}"/>')
        for x in zeros:
            self.add(f'<circle class="zero" cx="{_f(x)}" cy="{_f(axis.bottom + BAND / 2)}" '
                     f'r="2" fill="{colour}"/>')
        if bad:
            mid = axis.top - BAND / 2
            cross = " ".join(f"M{_f(x - 3)},{_f(mid - 3)} l6,6 M{_f(x - 3)},{_f(mid + 3)} l6,-6"
                             for x in bad)
            self.add(f'<path class="nonfinite" d="{cross}" stroke="{BAD_COLOUR}" '
                     'stroke-width="1.5"/>')
        self.add("</g>")

    def legend(self, rows: list[Series], more: int, top: float) -> None:
        for i, s in enumerate(rows):
            y = top + i * 18
            shown = s.name if len(s.name) <= 30 else s.name[:29] + "…"
            self.add(f'<g class="legend" data-name="{xml_text(s.name)}">'
                     f"<title>{xml_text(s.name)}</title>")
            self.add(f'<line x1="{_f(LEGEND_X)}" x2="{_f(LEGEND_X + 18)}" y1="{_f(y)}" '
                     f'y2="{_f(y)}" stroke="{COLOURS[i % len(COLOURS)]}" stroke-width="3"/>')
            first = first_non_finite(s)
            self.add(f'<text x="{_f(LEGEND_X + 24)}" y="{_f(y + 4)}">{xml_text(shown)}'
                     + ("" if first is None else f'<tspan fill="{BAD_COLOUR}"> ! from pass '
                        f"{first:,}</tspan>") + "</text>")
            self.add("</g>")
        if more:
            self.text(LEGEND_X, top + len(rows) * 18 + 4, f"… {more} more (--all)",
                      extra=' fill="#78909c"')


def _bands(rows: list[Series]) -> tuple[bool, bool]:
    """Whether any of rows is NaN or inf somewhere, and whether any is zero somewhere."""
    values = [x for s in rows for x in s.values if x is not None]
    return (any(not math.isfinite(x) for x in values),
            any(x == 0 for x in values))


def steps_svg(trace: Trace, by_module: bool = True, max_lines: int | None = LINES) -> bytes:
    """The chart of trace's steps as an SVG document."""
    steps = require_steps(trace)
    passes = len(steps.grads)
    every = grad_series(steps, by_module)
    rows = chosen(every, max_lines)
    loss = loss_series(steps)
    drawn = [x for s in rows for x in s.values if x is not None and finite_positive(x)]
    axis, ticks = log_axis(drawn or [1.0], TOP + BAND, TOP + BAND + PLOT_HEIGHT)
    bottom = axis.bottom + BAND
    loss_top = bottom + LOSS_GAP + BAND
    height = (loss_top + LOSS_HEIGHT + BAND if loss is not None else bottom) + 44
    chart = Chart(passes)
    chart.add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{_f(height)}" '
              f'viewBox="0 0 {WIDTH} {_f(height)}" font-family="{FONT}" font-size="11" '
              'fill="#263238">')
    chart.add(f'<rect width="{WIDTH}" height="{_f(height)}" fill="#ffffff"/>')
    optimizer = steps.optimizer_steps_taken
    chart.text(LEFT, 18, f"{trace.scenario or 'trace'}  ·  {passes:,} passes, "
               f"{optimizer:,} optimizer steps", extra=' font-size="13" font-weight="bold"')
    kind = "module" if by_module else "parameter"
    chart.frame(axis, ticks, f"gradient norm per {kind} (log)", *_bands(rows))
    for i, s in enumerate(rows):
        chart.series(s, axis, COLOURS[i % len(COLOURS)], PLOT_WIDTH)
    chart.legend(rows, len(every) - len(rows), TOP + BAND)
    if loss is not None:
        numbers = [x for x in loss.values if x is not None and math.isfinite(x)]
        log = log_scale(loss.values) and bool(numbers) and max(numbers) >= 10 * min(
            x for x in numbers if x > 0)
        positive = [x for x in numbers if x > 0] if log else numbers
        loss_axis, loss_ticks = (log_axis if log else linear_axis)(
            positive or [0.0], loss_top, loss_top + LOSS_HEIGHT)
        chart.frame(loss_axis, loss_ticks, "loss" + (" (log)" if log else ""), *_bands([loss]))
        chart.series(loss, loss_axis, "#263238", PLOT_WIDTH, pick_mean=True, css="loss")
    chart.x_labels(height - 28)
    chart.add("</svg>")
    return ("\n".join(chart.parts) + "\n").encode("utf-8")
