"""`gradtrace check`: gradcheck and gradgradcheck of the scenarios' custom Functions."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import SCENARIOS, invoke

GALLERY = sorted(str(p) for p in SCENARIOS.glob("*.py"))  # what `scenarios/*.py` expands to


def check_json(*args: str) -> tuple[int, dict]:
    result = invoke("check", *args, "--json")
    return result.exit_code, json.loads(result.stdout)


def by_function(report: dict) -> dict[str, dict]:
    return {r["function"]: r for r in report["results"]}


def test_the_gallery_passes() -> None:
    code, report = check_json(*GALLERY)
    assert code == 0, [r for r in report["results"] if not r["ok"]]
    functions = {r["function"] for r in report["results"]}
    assert {"MyPow", "Square", "Exp", "Sinh", "Cube", "CubeBackward", "Custom", "Add",
            "_SyntheticGradientUpdater"} <= functions
    assert all(r["gradgradcheck"] in ("pass", "skipped") for r in report["results"])
    dni = by_function(report)["_SyntheticGradientUpdater"]
    assert dni["gradcheck"] == "skipped" and "synthetic-gradient" in dni["message"]


def test_the_broken_ones_fail_each_for_its_reason() -> None:
    code, report = check_json(str(SCENARIOS / "broken"))
    assert code == 1
    results = by_function(report)
    assert not any(r["ok"] for r in report["results"])
    assert results["MyPow"]["gradcheck"] == "fail"  # seed 003 Code 21
    assert results["Mul"]["gradcheck"] == "fail"  # backward ignores grad_output
    assert results["SinhBad"]["gradcheck"] == "pass"  # first derivatives are right …
    assert results["SinhBad"]["smells"] and "ctx.expx" in results["SinhBad"]["smells"][0]
    undefined = [r for r in report["results"] if r["gradcheck"] == "error"]
    assert undefined and "NameError" in undefined[0]["message"]
    assert "custom_function_undefined_ctx.py:17" in undefined[0]["message"]


def test_code_21_numbers() -> None:
    _, report = check_json(str(SCENARIOS / "broken" / "gradcheck_pow_wrong_backward.py"))
    mismatch = by_function(report)["MyPow"]["mismatch"]
    assert (mismatch["output"], mismatch["input"]) == (0, 1)
    assert mismatch["numerical"][0][0] == pytest.approx(201.18, abs=0.01)
    assert mismatch["analytical"][0][0] == pytest.approx(223.97, abs=0.01)
    out = invoke("check", SCENARIOS / "broken" / "gradcheck_pow_wrong_backward.py").stdout
    assert "201.18 / 223.97" in out


def test_float32_scenarios_are_checked_in_float64() -> None:
    _, report = check_json(str(SCENARIOS / "custom_pow_function.py"))
    mypow = by_function(report)["MyPow"]
    assert mypow["ok"] and mypow["from_float32"]


def test_junit_xml(tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    result = invoke("check", SCENARIOS / "broken", SCENARIOS / "chain_rule.py",
                    "--junit", junit)
    assert result.exit_code == 1
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and int(suite.get("tests")) == 5
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert len(failed) == 5 and any(name.startswith("SinhBad(") for name in failed)


def test_a_scenario_that_cannot_run_is_exit_2(tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    result = invoke("check", SCENARIOS / "no_graph" / "forward_only.py",
                    SCENARIOS / "double_backward_exp.py", "--junit", junit)
    assert result.exit_code == 2
    assert "no tensor requires grad" in result.stderr
    assert "1 of 1 passed" in result.stdout
    assert ET.parse(junit).getroot().get("errors") == "1"


def test_options_reach_gradcheck() -> None:
    code, report = check_json(str(SCENARIOS / "double_backward_cube.py"), "--fast",
                              "--no-gradgrad")
    assert code == 0
    assert {r["gradgradcheck"] for r in report["results"]} == {"skipped"}
    # an absurd tolerance makes a right backward fail: the options are really used
    code, _ = check_json(str(SCENARIOS / "double_backward_cube.py"), "--atol", "0",
                         "--rtol", "0", "--eps", "0.5")
    assert code == 1


def test_no_functions_is_not_a_failure() -> None:
    result = invoke("check", SCENARIOS / "chain_rule.py")
    assert result.exit_code == 0 and "no custom autograd.Function calls" in result.stdout


BAD_BACKWARDS = {  # backward body -> the start of the message gradtrace gives
    "return g": "backward returns the wrong number of gradients",
    "return torch.ones(3), None": "backward returns a gradient of the wrong shape",
    "return g * 2, g": "backward returns a gradient for an input that needs none",
}


@pytest.mark.parametrize("body", list(BAD_BACKWARDS))
def test_plain_messages_for_bad_backwards(tmp_path: Path, body: str) -> None:
    path = tmp_path / "bad.py"
    path.write_text(
        "import torch\n\n\nclass Bad(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, a, k):\n        return a * k\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n"
        f"        {body}\n\n\n"
        "x = torch.ones(2, requires_grad=True)\ny = Bad.apply(x, 2)\n")
    code, report = check_json(str(path))
    assert code == 1
    (result,) = report["results"]
    assert result["gradcheck"] == "error"
    assert result["message"].startswith(BAD_BACKWARDS[body]), result["message"]
