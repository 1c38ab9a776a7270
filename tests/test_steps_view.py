"""The steps of a training loop in the terminal (`show`'s steps section), on hand-made traces."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
from rich.console import Console, RenderableType
from steps_fixtures import loop_trace, mlp_loop, steps_of

from gradtrace.render.report import Budget, module_report, report
from gradtrace.render.series import (
    Series,
    bucket_bounds,
    bucketed,
    chosen,
    grad_series,
    log_scale,
    module_norm,
)
from gradtrace.render.steps import BLOCKS, sparkline, steps_view


def printed(renderable: RenderableType | None, width: int = 120) -> str:
    assert renderable is not None
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    out = console.file.getvalue()
    assert isinstance(out, str)
    return out


# --- sparklines ---------------------------------------------------------------------------

def test_a_sparkline_spans_the_blocks_on_a_log_scale() -> None:
    # 1, 10, 100, 1000: evenly spaced on a log scale, so the lowest, two between, the highest
    assert sparkline([1.0, 10.0, 100.0, 1000.0]).plain == "▁▃▆█"
    # linear values 1…4 would not be evenly spaced in log: the scale is log, not linear
    assert sparkline([1.0, 2.0, 3.0, 4.0]).plain == "▁▅▇█"
    assert sparkline([1.0, 2.0, 3.0, 4.0], log=False).plain == "▁▃▆█"


def test_a_single_value_or_a_flat_line_is_the_middle_block() -> None:
    assert sparkline([0.5]).plain == BLOCKS[3]
    assert sparkline([2.0, 2.0, 2.0]).plain == BLOCKS[3] * 3


def test_zeros_none_and_non_finite_values_have_their_own_marks() -> None:
    line = sparkline([0.0, None, 1.0, math.nan, 100.0, math.inf])
    assert line.plain == "· ▁!█!"
    # the non-finite marks are red, the zero dim: rich styles, not characters
    styles = {line.plain[s.start:s.end]: str(s.style) for s in line.spans}
    assert styles["!"] == "bold red" and styles["·"] == "dim"


def test_only_nothing_to_scale_still_draws() -> None:
    assert sparkline([None, None]).plain == "  "
    assert sparkline([math.nan]).plain == "!"
    assert sparkline([0.0, 0.0]).plain == "··"


def test_a_loss_below_zero_is_on_a_linear_scale() -> None:
    assert log_scale([0.1, 0.0, 3.0]) and not log_scale([-1.0, 2.0]) and not log_scale([0.0])


# --- buckets -------------------------------------------------------------------------------

def test_a_thousand_passes_fit_forty_buckets_of_25() -> None:
    bounds = bucket_bounds(1_000, 40)
    assert len(bounds) == 40 and bounds[0] == (0, 25) and bounds[-1] == (975, 1_000)
    assert all(end - start == 25 for start, end in bounds)
    uneven = bucket_bounds(7, 3)
    assert uneven == [(0, 2), (2, 4), (4, 7)]  # consecutive, covering every pass once
    assert bucket_bounds(5, 40) == [(i, i + 1) for i in range(5)]


def test_a_bucket_keeps_its_spike_and_its_nan() -> None:
    values = [1.0] * 10 + [500.0] + [1.0] * 9 + [math.nan] + [1.0] * 19
    marks = bucketed(values, 4)  # 4 buckets of 10
    assert marks[0] == 1.0 and marks[1] == 500.0 and math.isnan(marks[2]) and marks[3] == 1.0  # type: ignore[arg-type]
    assert bucketed([None, None, 2.0, None], 2) == [None, 2.0]


# --- series: per leaf, per module ---------------------------------------------------------

def test_a_modules_norm_is_the_root_of_its_leaves_squares() -> None:
    steps = steps_of({"fc.weight": [3.0, None, 1.0], "fc.bias": [4.0, None, math.inf],
                      "scale": [2.0, 2.0, 2.0]},
                     modules={"fc.weight": "fc", "fc.bias": "fc", "scale": None})
    fc, scale = grad_series(steps, by_module=True)
    assert fc.name == "fc" and fc.leaves == ("fc.weight", "fc.bias")
    assert fc.values[:2] == (5.0, None) and fc.values[2] == math.inf
    assert scale.name == "scale" and scale.values == (2.0, 2.0, 2.0)  # no module: itself
    assert module_norm([1.0, math.nan, math.inf]) != module_norm([1.0, math.nan, math.inf])
    assert [s.name for s in grad_series(steps)] == ["fc.weight", "fc.bias", "scale"]


def test_rows_with_a_nan_are_never_left_out() -> None:
    steps = steps_of({f"p{i}": [1.0, 1.0 if i != 17 else math.nan] for i in range(20)})
    rows = chosen(grad_series(steps), 5)
    assert [r.name for r in rows] == ["p0", "p1", "p2", "p17"]  # 4 rows and "… more"


# --- the section ----------------------------------------------------------------------------

def test_a_long_mlp_loop_fits_15_lines_at_120_columns() -> None:
    trace = mlp_loop(1_000, layers=7)
    out = printed(steps_view(trace))
    lines = out.splitlines()
    assert len(lines) <= 15 and max(map(len, lines)) <= 120
    assert "1,000 passes, 1,000 optimizer steps" in lines[1]
    assert "max of ~25 passes" in lines[1]
    loss = next(line for line in lines if line.startswith("loss"))
    assert len(loss.split()[1]) == 40  # 1,000 passes in 40 characters
    assert loss.split()[2:] == ["2.4", "0.1156", "0.1156", "2.4"]  # first last min max
    assert "… 4 more parameters (--all)" in out


def test_everything_shows_every_parameter() -> None:
    trace = mlp_loop(100, layers=7)
    out = printed(steps_view(trace, max_rows=None))
    assert "more parameters" not in out
    assert all(f"model.{2 * k}.{kind}" in out for k in range(7) for kind in ("weight", "bias"))
    assert printed(report(trace, None, budget=Budget.everything())).count("model.12.bias") == 1


def test_a_nan_is_marked_in_its_row_and_named_with_its_first_pass() -> None:
    trace = mlp_loop(200, layers=7, nan_from=150)
    out = printed(steps_view(trace))
    row = next(line for line in out.splitlines() if line.startswith("model.2.bias"))
    assert row.split()[1].endswith("!" * 10)  # passes 150…200 of 40 buckets of 5
    assert row.split()[3] == "nan"  # last
    assert "! not finite: model.2.bias from pass 150" in out
    assert len(out.splitlines()) <= 15


def test_by_module_rows_are_modules() -> None:
    trace = mlp_loop(50, layers=3)
    out = printed(steps_view(trace, by_module=True))
    names = [line.split()[0] for line in out.splitlines()[3:]]
    assert names == ["loss", "model.0", "model.2", "model.4"]
    assert "grad norm per module" in out
    assert "model.4" in printed(module_report(trace, None))


def test_no_steps_section_for_fewer_than_three_passes_or_none() -> None:
    assert steps_view(loop_trace(None)) is None
    assert steps_view(mlp_loop(2)) is None
    assert steps_view(mlp_loop(2), min_passes=1) is not None
    assert "steps" not in printed(report(loop_trace(None), None))
    assert "\nsteps" in printed(report(mlp_loop(3), None))


def test_names_with_brackets_are_text_not_markup() -> None:
    trace = loop_trace(steps_of({"w[bold]": [1.0, 2.0, 3.0]}))
    assert "w[bold]" in printed(steps_view(trace))


@pytest.mark.parametrize("passes", [3, 41, 1_000])
def test_the_section_is_deterministic(passes: int) -> None:
    assert printed(steps_view(mlp_loop(passes))) == printed(steps_view(mlp_loop(passes)))


def test_a_brief_made_a_row_at_a_time_is_what_the_whole_series_says() -> None:
    """grad_briefs and loss_brief (the steps section's, reading a long run's rows once)
    against the plain reading of grad_series, loss_series and bucketed."""
    import random

    from gradtrace.model.records import LeafStep, Steps
    from gradtrace.model.spilled import SpilledRows
    from gradtrace.render.series import grad_briefs, loss_brief, loss_series, mean

    rng = random.Random(4)
    for _ in range(300):
        leaves = tuple(f"m{rng.randint(0, 3)}.p{i}" for i in range(rng.randint(1, 6)))
        n = rng.choice([1, 2, 39, 40, 41, 97, 400])
        values = rng.choice([[0.0, 1.0, 2.0], [1e-3, 5.0, 1e5, 0.0], [1.0, math.nan, math.inf]])
        rows = [tuple(None if rng.random() < 0.15 else LeafStep(
            rng.choice(values) * rng.random(), 1.0, rng.random() > 0.05, False)
            for _ in range(rng.randint(0, len(leaves)))) for _ in range(n)]
        spilled = SpilledRows()
        spilled.extend(rows)
        steps = Steps(leaves, tuple(rng.choice([None, leaf[:2]]) for leaf in leaves),
                      tuple(rng.choice([None, rng.uniform(-1, 3), math.nan]) for _ in range(n)),
                      (1,) * n, rng.choice([tuple(rows), spilled]))
        width = rng.choice([1, 5, 40])
        for by_module in (False, True):
            briefs = grad_briefs(steps, by_module, width)
            series = grad_series(steps, by_module)
            assert [(b.name, b.leaves) for b in briefs] == [(s.name, s.leaves) for s in series]
            for brief, whole in zip(briefs, series, strict=True):
                assert repr(brief) == repr(plain_brief(whole, width, max))  # NaN as NaN
        loss = loss_series(steps)
        assert repr(loss_brief(steps, width)) == repr(
            None if loss is None else plain_brief(loss, width, mean))


def plain_brief(series: Series, width: int, pick: Any) -> Any:
    from gradtrace.render.series import Brief, first_non_finite

    present = [x for x in series.values if x is not None]
    finite = [x for x in present if math.isfinite(x)]
    return Brief(series.name, series.leaves, bucketed(series.values, width, pick),
                 present[0] if present else None, present[-1] if present else None,
                 min(finite) if finite else None, max(finite) if finite else None,
                 log_scale(series.values), first_non_finite(series))
