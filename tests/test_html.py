"""The interactive page (`dot -o graph.html`): its data, its safety, and its behaviour in a
real browser (Debian's Chromium, driven by Playwright; no browser download)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from helpers import ROOT, SCENARIOS, invoke, needs_dot, show_json

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = ROOT / "out" / "test-artifacts"
UPDATE = os.environ.get("GRADTRACE_UPDATE_GOLDEN") == "1"  # also refresh the README's picture

pytestmark = needs_dot


def page(scenario: Path | str, folder: Path, *args: str, name: str = "g.html") -> Path:
    out = folder / name
    result = invoke("dot", scenario, *args, "-o", out)
    assert result.exit_code == 0, result.stderr
    return out


def parts(html: str) -> tuple[dict[str, Any], str]:
    """The page's embedded data and its SVG."""
    found = re.search(r'<script type="application/json" id="gt-data">(.*?)</script>', html,
                      re.DOTALL)
    assert found is not None
    svg = html[html.index("<svg"):html.index("</svg>")]
    return json.loads(found[1]), svg


def test_every_svg_box_has_its_record_and_every_record_its_box(tmp_path: Path) -> None:
    html = page(SCENARIOS / "mlp_modules.py", tmp_path, "--grads").read_text()
    data, svg = parts(html)
    drawn = set(re.findall(r'<g id="([^"]+)" class="node"', svg))
    assert {i for i in drawn if not i.startswith("legend_")} == set(data["boxes"])
    relu = data["boxes"]["n4"]
    assert relu["kind"] == "op" and relu["cluster"] == "model.1"
    (node,) = relu["nodes"]
    assert node["type"] == "ReluBackward0" and node["source"]["line"] == 8
    assert node["saved"] == [["result", "float32[2, 4]", "32 B"]]
    received, sent = node["grads"][0]
    assert received.startswith("[") and len(sent) == 1
    # module clusters and arrows carry ids the script reads
    assert 'id="cluster_model.1" class="cluster"' in svg
    assert re.search(r'<g id="n4&#45;&gt;n2" class="edge">', svg)


def test_the_page_fetches_nothing(tmp_path: Path) -> None:
    html = page(SCENARIOS / "mlp_modules.py", tmp_path).read_text()
    assert "default-src 'none'" in html  # the browser itself refuses any fetch
    for fetch in ("<script src", "<link", "url(", "@import", "<iframe", "<img"):
        assert fetch not in html
    # the only addresses are the SVG's XML namespaces, which are names, not fetches
    assert set(re.findall(r"https?://[^\s\"']+", html)) <= {
        "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


def test_a_hostile_trace_cannot_write_into_the_page(tmp_path: Path) -> None:
    data = show_json(SCENARIOS / "chain_rule.py")
    evil = '</script><script>document.title="owned"</script><img src=x onerror=alert(1)>'
    data["nodes"][0]["type"] = evil
    data["tensors"][0]["name"] = evil
    trace = tmp_path / "evil.json"
    trace.write_text(json.dumps(data))
    html = page(trace, tmp_path).read_text()
    assert "<img" not in html and html.count("</script>") == 2
    embedded, svg = parts(html)
    assert any(b["label"][0] == evil for b in embedded["boxes"].values())  # shown as text
    assert evil not in svg


def test_dot_help_lists_the_page() -> None:
    assert ".html" in invoke("dot", "--help", env={"COLUMNS": "200"}).stdout


# --- in a real browser ------------------------------------------------------------------

def _missing(reason: str) -> NoReturn:
    if os.environ.get("GRADTRACE_REQUIRE_BROWSER") == "1":  # set by .ci/run: no skipping
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        _missing("no Chromium: apt-get install -y chromium (python3 dev.py test installs it)")
    try:
        from playwright import sync_api
    except ImportError:
        _missing("no Playwright for Python: pip install playwright (a test extra)")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM,
                                     args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


def opened(browser: Any, path: Path) -> tuple[Any, float, list[str]]:
    """A tab showing path from disk, the seconds until it was interactive, and its errors
    (any request that is not the file itself is an error too)."""
    tab = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("request", lambda r: None if r.url == path.as_uri() else errors.append(r.url))
    start = time.perf_counter()
    tab.goto(path.as_uri())
    tab.wait_for_selector("body[data-ready]", timeout=30_000)
    return tab, time.perf_counter() - start, errors


def view_width(tab: Any) -> float:
    return float(tab.get_attribute("#gt-view > svg", "viewBox").split()[2])


def test_click_search_zoom_modules_keyboard_in_chromium(browser: Any, tmp_path: Path) -> None:
    path = page(SCENARIOS / "mlp_modules.py", tmp_path, "--grads")
    tab, _, errors = opened(browser, path)
    # click a node: its details
    tab.click("g.node#n4")
    panel = tab.inner_text("#gt-details")
    assert "ReluBackward0" in panel and "module\tmodel.1" in panel
    assert "saved result\tfloat32[2, 4] 32 B" in panel and "received\t[" in panel
    assert "mlp_modules.py:8" in panel
    assert tab.inner_text("#gt-pass") == "pass 1: backward (by gradtrace)"
    # search: matches highlighted and counted; Enter goes to the first
    tab.fill("#gt-search", "weight")
    assert tab.inner_text("#gt-count") == "2 matches"
    assert tab.locator("g.node.gt-hit").count() == 2
    tab.press("#gt-search", "Enter")
    assert "weight" in tab.inner_text("#gt-details h2")
    tab.fill("#gt-search", "line 8")
    assert tab.inner_text("#gt-count") == "7 matches"
    tab.press("#gt-search", "Escape")
    # zoom: +, the wheel, then fit
    start = view_width(tab)
    tab.keyboard.press("+")
    assert view_width(tab) < start
    tab.mouse.move(400, 400)
    tab.mouse.wheel(0, 500)
    assert view_width(tab) > start / 1.5
    tab.keyboard.press("0")
    assert view_width(tab) == start
    # drag pans
    before = tab.get_attribute("#gt-view > svg", "viewBox")
    tab.mouse.move(300, 300)
    tab.mouse.down()
    tab.mouse.move(200, 250, steps=4)
    tab.mouse.up()
    assert tab.get_attribute("#gt-view > svg", "viewBox") != before
    # a module folds and unfolds from its name
    weight = tab.locator("g.node#n6")  # model.0.weight
    assert weight.is_visible()
    tab.click("g#cluster_model\\.0 > text")
    assert not weight.is_visible()
    tab.click("g#cluster_model\\.0 > text")
    assert weight.is_visible()
    # the keyboard alone: a box takes focus, Enter opens it, Escape closes
    tab.keyboard.press("Escape")
    tab.focus("g.node#n0")
    tab.keyboard.press("Enter")
    assert "MeanBackward0" in tab.inner_text("#gt-details h2")
    tab.keyboard.press("Escape")
    assert tab.locator("#gt-panel").is_hidden()
    tab.keyboard.press("0")  # the whole graph again, for the picture
    tab.click("g.node#n4")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "html-page.png"))
    if UPDATE:
        shutil.copy(ARTIFACTS / "html-page.png", ROOT / "docs" / "html-page.png")
    assert errors == []


@pytest.mark.slow
def test_big_graphs_become_interactive_and_a_folded_box_expands(browser: Any,
                                                                 tmp_path: Path) -> None:
    chain = tmp_path / "chain.py"
    chain.write_text("import torch\nx = torch.tensor(1.0, requires_grad=True)\ny = x\n"
                     "for _ in range(100_000):\n    y = y * 1.0001\ny.backward()\n")
    timings = []
    for scenario in (SCENARIOS / "real" / "transformer_encoder.py", chain):
        path = page(scenario, tmp_path, name=f"{Path(scenario).stem}.html")
        tab, seconds, errors = opened(browser, path)
        timings.append(f"{Path(scenario).name}: {path.stat().st_size / 1e6:.1f} MB, "
                       f"interactive after {seconds:.2f} s")
        assert errors == []
        if scenario == chain:
            tab.click("g.node:has-text('MulBackward0 ×')")
            assert "99999 nodes folded into this box" in tab.inner_text("#gt-details")
            tab.click("#gt-details .gt-expand")
            members = tab.locator(".gt-member")
            assert members.count() == 200
            assert "… and 99799 more nodes" in tab.inner_text("#gt-details")
            tab.click("#gt-details .gt-expand")  # collapses again
            assert members.count() == 0
        else:
            tab.fill("#gt-search", "layers.5.self_attn")
            assert int(tab.inner_text("#gt-count").split()[0]) > 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "page-timings.txt").write_text("\n".join(timings) + "\n")
    print("\n".join(timings))


# --- findings and NaN/Inf marks ---------------------------------------------------------

LOG_OF_ZERO = SCENARIOS / "explained" / "log_of_zero.py"


def test_the_page_carries_the_findings_and_the_marks(tmp_path: Path) -> None:
    data, svg = parts(page(LOG_OF_ZERO, tmp_path, "--grads").read_text())
    codes = [(f["severity"], f["code"], f["box"], f["where"]) for f in data["findings"]]
    assert codes == [("error", "nan-value", "n1", "log_of_zero.py:8"),
                     ("error", "nan-gradient", "n1", "log_of_zero.py:8")]
    assert data["findings"][1]["hint"].startswith("log has an infinite derivative")
    assert data["boxes"]["n1"]["mark"] == {"level": "born",
                                           "note": "⚠ first NaN/Inf gradient and value here"}
    assert data["boxes"]["n2"]["mark"]["level"] == "carries"
    assert data["boxes"]["out0"]["mark"] is None
    born = svg[svg.index('<g id="n1" class="node">'):]
    assert 'stroke="#c62828" stroke-width="3"' in born[:born.index("</g>")]
    # a finding about a node not drawn (--focus elsewhere) selects nothing
    data, _ = parts(page(LOG_OF_ZERO, tmp_path, "--focus", "x", "--radius", "0",
                         name="far.html").read_text())
    assert [f["box"] for f in data["findings"]] == [None, None]


def test_a_page_without_findings_has_an_empty_list(tmp_path: Path) -> None:
    data, _ = parts(page(SCENARIOS / "chain_rule.py", tmp_path).read_text())
    assert data["findings"] == []


def test_clicking_a_finding_selects_its_node_in_chromium(browser: Any, tmp_path: Path) -> None:
    path = page(LOG_OF_ZERO, tmp_path, "--grads")
    tab, _, errors = opened(browser, path)
    assert tab.locator("#gt-findings").is_visible()
    assert tab.inner_text("#gt-findings-title") == "findings (2)"
    first = tab.locator("#gt-findings-list button").first
    assert "[nan-value]" in first.inner_text() and "hint: log(0) is" in first.inner_text()
    assert tab.locator("#gt-panel").is_hidden()
    first.click()
    assert tab.get_attribute("g.node#n1", "class") == "node gt-selected"
    assert first.get_attribute("aria-pressed") == "true"
    details = tab.inner_text("#gt-details")
    assert "⚠ first NaN/Inf gradient and value here" in details
    assert tab.inner_text("#gt-details h2") == "LogBackward0 · (y)"  # the note not twice
    # the non-finite numbers the node sent are red
    assert tab.inner_text("#gt-details .gt-nonfinite-text") == "inf"
    colour = tab.eval_on_selector("#gt-details .gt-nonfinite-text",
                                  "e => getComputedStyle(e).color")
    assert colour == "rgb(198, 40, 40)"
    # the marked box is drawn with a red border
    stroke = tab.eval_on_selector("g.node#n2 path", "e => e.getAttribute('stroke')")
    assert stroke == "#e53935"
    # the toggle hides and shows the list
    tab.click("#gt-findings-toggle")
    assert tab.locator("#gt-findings").is_hidden()
    tab.click("#gt-findings-toggle")
    assert tab.locator("#gt-findings").is_visible()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "html-page-findings.png"))
    assert errors == []
