"""The steps of a training loop in the terminal: a sparkline of each parameter's (or module's)
gradient norm over the passes, its first, last, smallest and largest value, and the loss.

A long run is cut into at most WIDTH buckets of consecutive passes; a gradient's mark is the
largest norm of its bucket (a spike is never averaged away), the loss's the mean of its bucket
(the trend). A bucket holding a NaN or inf is a red `!`; a zero norm (nothing on a log scale)
is a `·`; a pass with no .grad is blank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model.records import Trace
from .series import Brief, Value, chosen, grad_briefs, loss_brief
from .table import compact

BLOCKS = "▁▂▃▄▅▆▇█"
WIDTH = 40  # characters of a sparkline at most
ROWS = 11  # rows of leaves or modules by default: the section stays within 15 lines
MIN_PASSES = 3  # fewer passes are not a loop: `show` lists them in its passes section
BAD, ZERO, NONE = "!", "·", " "


def sparkline(values: Sequence[Value], log: bool = True) -> Text:
    """A character per value: ▁ for the smallest, █ for the largest (log10 when log; all ▄ when
    they are all the same); `!` (red) for NaN or inf, `·` for zero on a log scale, blank for
    None."""
    def position(x: float) -> float:
        return math.log10(x) if log else x

    drawn = [position(x) for x in values
             if x is not None and math.isfinite(x) and (x > 0 or not log)]
    low, high = (min(drawn), max(drawn)) if drawn else (0.0, 0.0)
    span = high - low
    text = Text(no_wrap=True)
    for x in values:
        if x is None:
            text.append(NONE)
        elif not math.isfinite(x):
            text.append(BAD, style="bold red")
        elif log and x <= 0:
            text.append(ZERO, style="dim")
        elif span <= 1e-12 * max(abs(high), 1.0):
            text.append(BLOCKS[3])
        else:
            text.append(BLOCKS[round((position(x) - low) / span * (len(BLOCKS) - 1))])
    return text


def _value(x: Value) -> Text:
    if x is None:
        return Text("-", style="dim")
    if not math.isfinite(x):
        return Text(str(x), style="bold red")  # nan, inf, -inf
    return Text(compact(x))


def _row(table: Table, series: Brief, style: str = "cyan") -> None:
    table.add_row(Text(series.name, style=style), sparkline(series.marks, series.log),
                  _value(series.first), _value(series.last), _value(series.low),
                  _value(series.high))


def steps_view(trace: Trace, by_module: bool = False, max_rows: int | None = ROWS,
               min_passes: int = MIN_PASSES, width: int = WIDTH) -> RenderableType | None:
    """The steps section: None unless the trace recorded steps of at least min_passes passes.

    max_rows counts the rows of leaves (or modules) with the lines that say what was left out
    and where a gradient stopped being finite; None shows every row."""
    steps = trace.steps
    if steps is None or len(steps.grads) < max(min_passes, 1):
        return None
    passes = len(steps.grads)
    rows = grad_briefs(steps, by_module, width)
    bad = [(s, s.first_bad) for s in rows if s.first_bad is not None]
    shown = chosen(rows, None if max_rows is None else max(max_rows - bool(bad), 2))
    title = Text("\nsteps", style="bold", no_wrap=True, overflow="ellipsis")
    optimizer = steps.optimizer_steps_taken
    title.append(f"  ·  {passes:,} passes, {optimizer:,} optimizer step"
                 f"{'' if optimizer == 1 else 's'}  ·  grad norm per "
                 f"{'module' if by_module else 'parameter'}", style="dim")
    scaled = sum(scale is not None for scale in steps.loss_scale)
    if scaled:
        title.append(f" (divided by GradScaler's scale in {scaled:,} "
                     f"pass{'' if scaled == 1 else 'es'})",
                     style="dim")
    divisors = sorted({f"{k:g}" for k in steps.loss_divisor if k is not None})
    if divisors:  # accumulation: the loss row is what the code computed, backward got less
        title.append(f"; loss as computed, backward got loss / {' or '.join(divisors)}",
                     style="dim")
    if passes > width:
        title.append(f"; a mark: max of ~{passes / width:.3g} passes (loss: mean)", style="dim")
    table = Table(box=None, header_style="dim", pad_edge=False, show_edge=False)
    table.add_column("module" if by_module else "parameter", no_wrap=True,
                     overflow="ellipsis", max_width=36, min_width=8)
    table.add_column(f"passes 1…{passes:,}, log scale", no_wrap=True, min_width=min(width, passes))
    for heading in ("first", "last", "min", "max"):
        table.add_column(heading, justify="right", no_wrap=True)
    loss = loss_brief(steps, width)
    if loss is not None:
        _row(table, loss, style="bold")
    for s in shown:
        _row(table, s)
    parts: list[RenderableType] = [title, table]
    if len(shown) < len(rows):
        kind = "modules" if by_module else "parameters"
        parts.append(Text(f"… {len(rows) - len(shown)} more {kind} (--all)", style="yellow"))
    if bad:
        text = Text("! not finite: ", style="bold red", no_wrap=True, overflow="ellipsis")
        text.append(", ".join(f"{s.name} from pass {first:,}" for s, first in bad))
        parts.append(text)
    return Group(*parts)
