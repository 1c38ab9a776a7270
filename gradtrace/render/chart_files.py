"""The files `gradtrace steps -o FILE` writes, by suffix: the chart as SVG or PNG, or the
series as JSON. One table, read by the command's dispatch, help and error hints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ExportError
from ..model.records import Trace
from ..model.values import json_float
from .chart import LINES, require_steps, steps_svg
from .json import json_text
from .series import grad_series, loss_series

PLOT_EXTRA = "pip install 'gradtrace[plot]'"


class ChartFormat(NamedTuple):
    """One output of `gradtrace steps`: its suffix, what it is, and how it is made from the
    trace, per module or not, every line or not."""

    suffix: str
    description: str
    make: Callable[[Trace, bool, bool], bytes]
    binary: bool = False


def _svg(trace: Trace, by_module: bool, every: bool) -> bytes:
    return steps_svg(trace, by_module, None if every else LINES)


def svg_to_png(svg: bytes, scale: float = 2.0) -> bytes:
    """svg rasterised by CairoSVG (the optional extra `plot`), scale times its size."""
    try:
        import cairosvg  # type: ignore[import-untyped]
    except ImportError:  # also OSError below: CairoSVG without the cairo library
        raise ExportError("a PNG chart needs CairoSVG, which is not installed",
                          f"{PLOT_EXTRA}, or write an .svg") from None
    except OSError as exc:
        raise ExportError(f"CairoSVG cannot load the cairo library: {exc}",
                          "install cairo (apt-get install libcairo2), or write an .svg") from None
    png = cairosvg.svg2png(bytestring=svg, scale=scale)
    assert isinstance(png, bytes)
    return png


def _png(trace: Trace, by_module: bool, every: bool) -> bytes:
    return svg_to_png(_svg(trace, by_module, every))


def steps_data(trace: Trace, by_module: bool) -> dict[str, Any]:
    """Every pass's value of every series, NaN and inf as the strings JSON allows."""
    steps = require_steps(trace)
    loss = loss_series(steps)
    return {
        "scenario": trace.scenario,
        "passes": len(steps.grads),
        "optimizer_steps": list(steps.optimizer_steps),
        "optimizer_steps_after": steps.optimizer_steps_after,
        "loss_scale": [json_float(x) for x in steps.loss_scale],
        "loss_divisor": [json_float(x) for x in steps.loss_divisor],
        "by": "module" if by_module else "leaf",
        "loss": None if loss is None else [json_float(x) for x in loss.values],
        "series": [{"name": s.name, "leaves": list(s.leaves),
                    "norm": [json_float(x) for x in s.values]}
                   for s in grad_series(steps, by_module)],
    }


def _json(trace: Trace, by_module: bool, every: bool) -> bytes:
    text = json_text(steps_data(trace, by_module))
    return (text + "\n").encode("utf-8")


CHART_FORMATS: tuple[ChartFormat, ...] = (
    ChartFormat(".svg", "the chart as SVG", _svg),
    ChartFormat(".png", "the chart as PNG (needs CairoSVG: the extra named plot)", _png,
                binary=True),
    ChartFormat(".json", "every pass's gradient norm per series, and the loss", _json),
)


def chart_format(path: Path) -> ChartFormat:
    """The format of path, by its suffix."""
    for f in CHART_FORMATS:
        if path.suffix.lower() == f.suffix:
            return f
    raise ExportError(f"cannot tell what to write to {path} from its suffix "
                      f"{path.suffix or '(none)'!r}",
                      "use " + ", ".join(f.suffix for f in CHART_FORMATS)
                      + " (the graph itself: gradtrace dot)")
