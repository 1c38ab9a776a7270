"""The steps chart (SVG, PNG, JSON) and `gradtrace steps`, on hand-made traces saved as JSON."""

from __future__ import annotations

import json
import math
import struct
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import invoke
from steps_fixtures import loop_trace, mlp_loop, steps_of

from gradtrace.errors import ExportError
from gradtrace.model.records import Trace
from gradtrace.render.chart import log_axis, pass_ticks, steps_svg
from gradtrace.render.json import to_json

SVG = "{http://www.w3.org/2000/svg}"


def parsed(svg: bytes) -> ET.Element:
    return ET.fromstring(svg)  # valid XML, or this raises


def groups(root: ET.Element, css: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == css]


def saved(trace: Trace, folder: Path, name: str = "trace.json") -> Path:
    path = folder / name
    path.write_text(to_json(trace))
    return path


# --- the SVG --------------------------------------------------------------------------------

def test_one_polyline_per_module_and_the_loss_on_its_own_panel() -> None:
    root = parsed(steps_svg(mlp_loop(1_000, layers=4)))
    lines = groups(root, "series")
    assert [g.get("data-name") for g in lines] == ["model.0", "model.2", "model.4", "model.6"]
    assert lines[0].get("data-leaves") == "model.0.weight model.0.bias"
    for g in lines:
        (polyline,) = g.iter(f"{SVG}polyline")
        points = polyline.get("points", "").split()
        assert 2 <= len(points) <= 460  # 1,000 passes in at most a point per pixel column
    (loss,) = groups(root, "loss")
    assert len(list(loss.iter(f"{SVG}polyline"))) == 1
    assert [g.get("data-name") for g in groups(root, "legend")] == [
        "model.0", "model.2", "model.4", "model.6"]


def test_the_norm_axis_has_log_ticks_by_decade() -> None:
    root = parsed(steps_svg(mlp_loop(300, layers=2)))
    norm_axis = next(g for g in groups(root, "axis") if g.get("data-scale") == "log")
    ticks = [t.text for t in norm_axis.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert ticks == ["0.1", "1", "10"]
    axis, decades = log_axis([0.003, 42.0], 0, 100)
    assert decades == [0.001, 0.01, 0.1, 1, 10, 100] and axis.y(0.001) == 100
    assert axis.y(100) == 0
    assert log_axis([5.0], 0, 100)[1] == [1, 10]  # one value: its decade
    assert pass_ticks(1_000) == [1, 200, 400, 600, 800, 1_000] and pass_ticks(3) == [1, 2, 3]


def test_a_nan_is_a_red_cross_and_the_legend_says_from_when() -> None:
    svg = steps_svg(mlp_loop(200, layers=3, nan_from=150), by_module=False)
    root = parsed(svg)
    bias = next(g for g in groups(root, "series") if g.get("data-name") == "model.2.bias")
    (cross,) = bias.iter(f"{SVG}path")
    assert cross.get("class") == "nonfinite" and cross.get("d", "").count("M") == 2 * 51
    assert "! from pass 150" in "".join(root.itertext())
    assert "nan/inf" in "".join(root.itertext())


def test_zeros_sit_on_their_own_band_and_single_points_are_dots() -> None:
    trace = loop_trace(steps_of({"w": [0.0, 1.0, 2.0], "b": [None, 3.0, None]}))
    root = parsed(steps_svg(trace, by_module=False))
    w, b = groups(root, "series")
    assert [c.get("class") for c in w.iter(f"{SVG}circle")] == ["zero"]
    assert len(list(b.iter(f"{SVG}circle"))) == 1  # one point: a dot, as a line shows nothing
    assert "0" in [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "band"]


def test_twelve_lines_at_most_unless_all() -> None:
    trace = loop_trace(steps_of({f"p{i}": [1.0 + i, 2.0, 3.0] for i in range(20)}))
    root = parsed(steps_svg(trace, by_module=False))
    assert len(groups(root, "series")) == 11 and "… 9 more (--all)" in "".join(root.itertext())
    assert len(groups(parsed(steps_svg(trace, by_module=False, max_lines=None)),
                      "series")) == 20


def test_names_are_escaped_and_the_bytes_are_the_same_each_time() -> None:
    evil = '</text><script>alert(1)</script>&"\x1b'
    trace = loop_trace(steps_of({evil: [1.0, 2.0, 3.0]}), scenario="<b>x</b>")
    svg = steps_svg(trace, by_module=False)
    root = parsed(svg)
    assert not list(root.iter(f"{SVG}script")) and b"\x1b" not in svg
    assert groups(root, "series")[0].get("data-name") == evil.replace("\x1b", "\\x1b")
    assert steps_svg(trace) == steps_svg(trace)
    assert steps_svg(mlp_loop(1_000)) == steps_svg(mlp_loop(1_000))


def test_no_steps_no_chart() -> None:
    with pytest.raises(ExportError, match="no backward passes were recorded"):
        steps_svg(loop_trace(None))


# --- the command ---------------------------------------------------------------------------

def test_steps_prints_the_view_and_writes_svg_and_json(tmp_path: Path) -> None:
    trace = saved(mlp_loop(1_000, layers=4, nan_from=700), tmp_path)
    result = invoke("steps", trace, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 15 and "model.2.bias" in result.stdout and "from pass 700" in lines[-1]
    assert "model.0 " in invoke("steps", trace, "--by-module").stdout
    out = tmp_path / "steps.svg"
    assert invoke("steps", trace, "-o", out).exit_code == 0
    assert [g.get("data-name") for g in groups(parsed(out.read_bytes()), "series")] == [
        "model.0", "model.2", "model.4", "model.6"]  # a chart is per module by default
    assert invoke("steps", trace, "--by-leaf", "-o", out).exit_code == 0
    assert len(groups(parsed(out.read_bytes()), "series")) == 8
    numbers = tmp_path / "steps.json"
    flat = saved(mlp_loop(1_000, layers=4, nan_from=700, wobble=lambda p, i: 1.0), tmp_path,
                 "flat.json")
    assert invoke("steps", flat, "-o", numbers).exit_code == 0
    data = json.loads(numbers.read_text())
    assert data["passes"] == 1_000 and data["by"] == "module"
    model2 = next(s for s in data["series"] if s["name"] == "model.2")
    assert model2["norm"][699] == "nan" and math.isclose(model2["norm"][0], math.hypot(3, 4))


def test_steps_png_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("cairosvg", reason="CairoSVG: the plot extra (the test extra has it)")
    out = tmp_path / "steps.png"
    result = invoke("steps", saved(mlp_loop(500), tmp_path), "-o", out)
    assert result.exit_code == 0, result.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk: twice the SVG's size
    assert width == 2 * 780 and height > 600


def test_png_without_cairosvg_names_the_extra(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cairosvg", None)  # `import cairosvg` raises ImportError
    out = tmp_path / "steps.png"
    result = invoke("steps", saved(mlp_loop(5), tmp_path), "-o", out)
    assert result.exit_code == 2 and not out.exists()
    assert "error: a PNG chart needs CairoSVG" in result.stderr
    assert "pip install 'gradtrace[plot]'" in result.stderr


@pytest.mark.parametrize("trace", [loop_trace(None), loop_trace(steps_of({"w": []}))],
                         ids=["no-steps", "no-passes"])
def test_steps_without_passes_is_an_error(tmp_path: Path, trace: Trace) -> None:
    for args in ((), ("-o", tmp_path / "s.svg")):
        result = invoke("steps", saved(trace, tmp_path), *args)
        assert result.exit_code == 2
        assert "error: no backward passes were recorded, so there are no steps to chart" \
            in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "s.svg").exists()


def test_a_trace_saved_without_steps_says_so(tmp_path: Path) -> None:
    old = replace(mlp_loop(5), steps=None)  # passes, but saved before steps were recorded
    result = invoke("steps", saved(old, tmp_path))
    assert result.exit_code == 2
    assert "error: the trace has 5 backward pass(es) but no steps" in result.stderr


def test_steps_refuses_a_suffix_it_cannot_write(tmp_path: Path) -> None:
    result = invoke("steps", saved(mlp_loop(5), tmp_path), "-o", tmp_path / "steps.gif")
    assert result.exit_code == 2
    assert "error: cannot tell what to write" in result.stderr
    assert "gradtrace dot" in result.stderr  # the graph's own pictures are dot's


def test_steps_help_has_examples() -> None:
    result = invoke("steps", "--help", env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "gradtrace steps trace.json -o steps.json" in result.stdout
    assert "extra named plot" in result.stdout
