"""The steps panel of the interactive page, and the steps chart, in a real browser (Debian's
Chromium through Playwright, as tests/test_html.py drives it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import SCENARIOS, invoke, needs_dot, show_json
from steps_fixtures import mlp_loop
from test_html import ARTIFACTS, browser, opened, page, parts  # noqa: F401  (browser: a fixture)

from gradtrace.render.json import to_json

pytestmark = needs_dot
PASSES = 400
LEAVES = ("model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias")


@pytest.fixture(scope="module")
def mlp_loop_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mlp_modules.py's real graph, as if its backward had run PASSES times in a loop whose
    model.2.bias gradient turns NaN at pass 300 (the steps made by hand: the JSON contract)."""
    data = show_json(SCENARIOS / "mlp_modules.py")
    data["passes"] = data["passes"] * PASSES
    data["steps"] = {
        "leaves": list(LEAVES), "modules": ["model.0", "model.0", "model.2", "model.2"],
        "loss": [1.5 * math.exp(-p / 80) + 0.05 for p in range(PASSES)],
        "optimizer_steps": [1] * PASSES,
        "grads": [[["nan", "nan", False, False] if leaf == "model.2.bias" and p >= 299 else
                   [(i + 1) * math.exp(-p / 150), (i + 1) * math.exp(-p / 150), True, False]
                   for i, leaf in enumerate(LEAVES)] for p in range(PASSES)],
    }
    path = tmp_path_factory.mktemp("steps") / "loop.json"
    path.write_text(json.dumps(data))
    return path


def test_the_page_embeds_the_steps_per_module(mlp_loop_json: Path, tmp_path: Path) -> None:
    data, _ = parts(page(mlp_loop_json, tmp_path).read_text())
    steps = data["steps"]
    assert steps["passes"] == PASSES and len(steps["x"]) == 300
    assert [s["name"] for s in steps["series"]] == ["model.0", "model.2"]
    model2 = steps["series"][1]
    assert model2["leaves"] == ["model.2.weight", "model.2.bias"] and model2["first_bad"] == 300
    assert "nan" in model2["values"] and len(steps["loss"]) == 300
    # a graph without a loop: no panel
    plain, _ = parts(page(SCENARIOS / "mlp_modules.py", tmp_path, name="plain.html").read_text())
    assert plain["steps"] is None


def line_point(tab: Any, name: str) -> tuple[float, float]:
    """Where on the screen the middle point of a module's line in the steps chart is."""
    found = tab.evaluate("""name => {
      const g = [...document.querySelectorAll('#gt-steps-chart g.gt-series')]
        .find(e => e.getAttribute('data-name') === name);
      const line = g.querySelector('polyline.gt-line-hit');
      const p = line.points.getItem(Math.floor(line.points.numberOfItems / 3));
      const s = p.matrixTransform(line.getScreenCTM());
      return [s.x, s.y];
    }""", name)
    return float(found[0]), float(found[1])


def test_clicking_a_module_in_the_steps_selects_its_nodes(browser: Any,  # noqa: F811
                                                          mlp_loop_json: Path,
                                                          tmp_path: Path) -> None:
    tab, _, errors = opened(browser, page(mlp_loop_json, tmp_path))
    assert tab.locator("#gt-steps").is_visible()
    assert "400 passes, 400 optimizer steps" in tab.inner_text("#gt-steps-title")
    assert tab.locator("#gt-steps-chart g.gt-series").count() == 2
    assert tab.locator("#gt-steps-loss g.gt-series").count() == 1
    assert tab.locator("#gt-steps-chart path.gt-nonfinite").count() > 0
    assert "! not finite from pass 300" in tab.inner_text("#gt-steps-legend")
    # the legend: model.2's boxes marked and counted, the first one's details open
    tab.click("#gt-steps-legend button[data-name='model.2']")
    assert tab.inner_text("#gt-count") == "4 boxes in model.2"
    hit_labels = [tab.get_attribute(f"#{i}", "aria-label") for i in
                  tab.eval_on_selector_all("g.node.gt-hit", "els => els.map(e => e.id)")]
    assert any("model.2.bias" in label for label in hit_labels)
    assert all("model.0" not in label for label in hit_labels)
    assert tab.locator("#gt-panel").is_visible()
    # the line itself, clicked where it is drawn
    tab.mouse.click(*line_point(tab, "model.0"))
    assert tab.inner_text("#gt-count").endswith("in model.0")
    assert tab.get_attribute("#gt-steps-legend button[data-name='model.0']",
                             "aria-pressed") == "true"
    assert "gt-active" in (tab.get_attribute("#gt-steps-chart g.gt-series[data-name='model.0']",
                                             "class") or "")
    # a search replaces the module's marks
    tab.fill("#gt-search", "relu")
    assert tab.inner_text("#gt-count") == "1 match"
    tab.fill("#gt-search", "")
    tab.click("#gt-steps-legend button[data-name='model.2']")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "steps-page.png"))
    tab.click("#gt-steps-toggle")  # the panel folds away and comes back
    assert tab.locator("#gt-steps").is_hidden()
    tab.click("#gt-steps-toggle")
    assert tab.locator("#gt-steps").is_visible()
    assert errors == []


def test_the_page_of_a_graph_without_steps_has_no_panel(browser: Any,  # noqa: F811
                                                        tmp_path: Path) -> None:
    tab, _, errors = opened(browser, page(SCENARIOS / "mlp_modules.py", tmp_path))
    assert tab.locator("#gt-steps").is_hidden() and tab.locator("#gt-steps-toggle").is_hidden()
    assert errors == []


def test_the_steps_svg_opens_in_chromium(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    trace = tmp_path / "loop.json"
    trace.write_text(to_json(mlp_loop(1_000, layers=4, nan_from=700)))
    out = tmp_path / "steps.svg"
    assert invoke("steps", trace, "-o", out).exit_code == 0
    tab = browser.new_page(viewport={"width": 900, "height": 700})
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.goto(out.as_uri())
    assert tab.evaluate("document.documentElement.localName") == "svg"  # parsed as SVG, not an
    assert tab.locator("g.series polyline").count() == 4  # error page
    box = tab.evaluate("(() => { const b = document.documentElement.getBBox(); "
                       "return [b.width, b.height]; })()")
    assert box[0] > 700 and box[1] > 400  # drawn, at its size
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "steps-chart-chromium.png"))
    assert errors == []


def test_a_real_loops_page_shows_one_step_and_its_steps(browser: Any,  # noqa: F811
                                                        tmp_path: Path) -> None:
    """A captured 30-step loop (not a hand-made trace): one step's graph, and the panel."""
    path = page(SCENARIOS / "loops" / "mlp_30_steps.py", tmp_path)
    data, svg = parts(path.read_text())
    assert [s["name"] for s in data["steps"]["series"]] == ["model.0", "model.2", "model.4"]
    tab, _, errors = opened(browser, path)
    assert not errors
    assert not tab.eval_on_selector("#gt-steps", "e => e.hidden")
    assert tab.inner_text("#gt-steps-title") == "steps · 30 passes, 30 optimizer steps"
    assert tab.eval_on_selector_all("#gt-steps-chart polyline", "l => l.length") >= 3
    tab.close()
