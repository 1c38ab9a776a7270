"""`gradtrace check`: gradcheck and gradgradcheck of the scenarios' custom Functions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import SCENARIOS, check_json, invoke, read_terminal
from plain_python import start_gradtrace

GALLERY = sorted(str(p) for p in SCENARIOS.glob("*.py"))  # the top-level examples


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
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nx = torch.ones(2)\nraise RuntimeError('no data here')\n")
    result = invoke("check", broken, SCENARIOS / "double_backward_exp.py", "--junit", junit)
    assert result.exit_code == 2
    assert "RuntimeError: no data here" in result.stderr
    assert "1 of 1 passed" in result.stdout
    assert ET.parse(junit).getroot().get("errors") == "1"


def test_a_scenario_without_a_graph_has_nothing_to_check_and_is_no_error() -> None:
    """check needs the Function calls, not a graph: no root is not a reason to fail."""
    result = invoke("check", SCENARIOS / "no_graph" / "forward_only.py",
                    SCENARIOS / "double_backward_exp.py")
    assert result.exit_code == 0, result.stderr
    assert "1 of 1 passed" in result.stdout


def test_options_reach_gradcheck() -> None:
    code, report = check_json(str(SCENARIOS / "double_backward_cube.py"), "--fast",
                              "--no-gradgrad")
    assert code == 0
    assert {r["gradgradcheck"] for r in report["results"]} == {"skipped"}
    # an absurd tolerance makes a right backward fail: the options are really used
    code, _ = check_json(str(SCENARIOS / "double_backward_cube.py"), "--atol", "0",
                         "--rtol", "0", "--eps", "0.5")
    assert code == 1


def test_a_file_without_functions_among_others_is_not_a_failure() -> None:
    result = invoke("check", SCENARIOS / "chain_rule.py", SCENARIOS / "custom_add.py")
    assert result.exit_code == 0 and "1 of 1 passed" in result.stdout


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


SQUARE = """import torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return {factor} * x * grad


x = torch.rand({n}, {n}, requires_grad=True)
Square.apply(x).sum().backward()
"""

PEAK = ("import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(done.stdout)\n")


def test_a_big_jacobian_is_sampled_within_the_memory_budget(tmp_path: Path) -> None:
    """Regression: a 100x100 Square took 9.36 GB (gradcheck's dense 1e8-entry Jacobians)."""
    path = tmp_path / "square.py"
    path.write_text(SQUARE.format(factor=2, n=100))
    done = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "gradtrace",
                           "check", str(path), "--json"], capture_output=True, text=True,
                          timeout=300, check=True)
    head, _, report = done.stdout.partition("\n")
    code, peak_kib = map(int, head.split())
    assert code == 0
    assert peak_kib < 1.5 * 1024 * 1024, f"peak {peak_kib / 1024:.0f} MiB"
    (result,) = json.loads(report)["results"]
    assert (result["gradcheck"], result["gradgradcheck"]) == ("pass", "pass")
    assert result["sampled"].startswith("sampled at random (the Jacobian has 100,000,000 "
                                        "entries, over --max-jacobian 1,000,000): gradcheck "
                                        "32/10,000 inputs × 32/10,000 outputs")


def test_a_wrong_backward_fails_on_sampled_coordinates_too(tmp_path: Path) -> None:
    path = tmp_path / "square.py"
    path.write_text(SQUARE.format(factor=3, n=100))  # d(x*x)/dx is 2x, not 3x
    code, report = check_json(str(path))
    assert code == 1
    (result,) = report["results"]
    assert result["gradcheck"] == "fail" and result["sampled"]
    mismatch = result["mismatch"]
    row, col = mismatch["worst"]
    assert row == col  # an elementwise Function: the diagonal is checked
    assert mismatch["max_rel"] == pytest.approx(0.5, rel=1e-3)
    # in full when the Jacobian is within --max-jacobian
    path.write_text(SQUARE.format(factor=3, n=20))  # 400 x 400 entries
    code, report = check_json(str(path))
    assert code == 1 and report["results"][0]["sampled"] is None
    code, report = check_json(str(path), "--max-jacobian", "1000")
    assert code == 1 and report["results"][0]["sampled"].startswith("sampled")


def test_a_function_that_returns_its_input_itself_has_finite_differences_of_one(
        tmp_path: Path) -> None:
    """A gradient reversal layer (tadeephuy/GradientReversal) returns x itself: each nudge of
    x moved the output already taken, so finite differences read 0 instead of torch's 1."""
    path = tmp_path / "grl.py"
    path.write_text(
        "import torch\n\n\nclass GradientReversalFn(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x, alpha):\n"
        "        ctx.save_for_backward(x, alpha)\n        return x\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        _, alpha = ctx.saved_tensors\n        return -alpha * grad_output, None\n\n\n"
        "a = torch.randn(3, requires_grad=True)\n"
        "y = GradientReversalFn.apply(a, torch.tensor(1.0)).sum()\n")
    code, report = check_json(str(path))
    (result,) = report["results"]
    assert code == 1 and result["gradcheck"] == "fail"
    mismatch = result["mismatch"]
    identity = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]  # as torch's gradcheck has it
    assert mismatch["numerical"] == [[pytest.approx(v, abs=1e-6) for v in r] for r in identity]
    assert mismatch["analytical"] == [[-v for v in r] for r in identity]


def test_once_differentiable_has_no_double_backward_to_check(tmp_path: Path) -> None:
    path = tmp_path / "unit.py"
    path.write_text(
        "import torch\nfrom torch.autograd.function import once_differentiable\n\n\n"
        "class Unit(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        ctx.norm = x.norm()  # ctx tensors: fine for a backward that runs once\n"
        "        ctx.y = x / ctx.norm\n        return ctx.y\n\n"
        "    @staticmethod\n    @once_differentiable\n    def backward(ctx, g):\n"
        "        return (g - ctx.y * (ctx.y * g).sum()) / ctx.norm\n\n\n"
        "x = torch.rand(3, requires_grad=True)\ny = Unit.apply(x)\n")
    code, report = check_json(str(path))
    (result,) = report["results"]
    assert (result["gradcheck"], result["gradgradcheck"]) == ("pass", "not applicable"), result
    assert result["smells"] == [] and result["ok"] and code == 0
    assert "@once_differentiable" in result["message"]
    assert invoke("check", path).stdout.rstrip().endswith("1 of 1 passed")


def test_straight_through_estimators_are_told_as_such() -> None:
    code, report = check_json(str(SCENARIOS / "real" / "straight_through.py"))
    assert code == 1
    results = by_function(report)
    assert {r["gradcheck"] for r in results.values()} == {"straight-through"}
    for r in results.values():
        assert r["message"].startswith("looks like a straight-through estimator")
        assert 'gradtrace_skip = "straight-through estimator"' in r["message"]
    assert "clipped" in results["BinarizeClipped"]["message"]
    assert "clipped" not in results["SignSTE"]["message"]
    text = invoke("check", SCENARIOS / "real" / "straight_through.py").stdout
    assert ",;" not in text and "1e+12" not in text  # the old wording's stray text
    assert "0 of 3 ok: 3 look(s) like a straight-through estimator" in text


def test_a_backward_that_sleeps_past_the_timeout_is_timed_out_and_the_rest_run(
        tmp_path: Path) -> None:
    path = tmp_path / "slow.py"
    path.write_text(
        "import time\nimport torch\n\n\nclass Slow(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        time.sleep(5)\n"
        "        return g * 2\n\n\nclass Fast(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 3\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return g * 3\n\n\n"
        "x = torch.rand(2, requires_grad=True)\nSlow.apply(x)\nFast.apply(x)\n")
    code, report = check_json(path, "--timeout", "0.5", process=True)
    results = by_function(report)
    assert results["Slow"]["gradcheck"] == "timed out"
    assert results["Fast"]["ok"] and code == 2


def test_counts_agree_with_the_cells() -> None:
    result = invoke("check", *GALLERY)
    assert result.exit_code == 0
    assert result.stdout.rstrip().endswith("12 of 12 ok: 11 passed, 1 skipped by "
                                           "gradtrace_skip")


def test_junit_and_json_escape_a_hostile_function_name(tmp_path: Path) -> None:
    path = tmp_path / "evil.py"
    path.write_text(
        "import torch\n\n\ndef forward(ctx, x):\n    return x * 2\n\n\n"
        "def backward(ctx, g):\n    return g * 3\n\n\n"
        "Evil = type('Evil\\x1b[2J\\x07<&\">', (torch.autograd.Function,),\n"
        "            {'forward': staticmethod(forward), 'backward': staticmethod(backward)})\n"
        "x = torch.rand(2, requires_grad=True)\nEvil.apply(x)\n")
    junit = tmp_path / "r.xml"
    result = invoke("check", path, "--junit", junit, "--json")
    assert result.exit_code == 1
    (case,) = ET.parse(junit).getroot().iter("testcase")  # parses
    assert "\\x1b[2J" in case.get("name") and "<&\"" in case.get("name")
    assert "\x1b" not in junit.read_text() and "\x07" not in junit.read_text()
    assert json.loads(result.stdout)["results"][0]["function"].startswith("Evil\x1b")


def test_torch_state_a_file_changes_does_not_reach_the_next(tmp_path: Path) -> None:
    first = tmp_path / "a.py"
    first.write_text("import torch\ntorch.set_default_dtype(torch.float64)\n"
                     "torch.set_grad_enabled(False)\n"
                     "torch.set_anomaly_enabled(True)\nx = torch.ones(2)\n")
    second = tmp_path / "b.py"
    second.write_text(SQUARE.format(factor=2, n=3) + "assert torch.get_default_dtype() == "
                      "torch.float32 and torch.is_grad_enabled()\n"
                      "assert not torch.is_anomaly_enabled()\n")
    code, report = check_json(str(first), str(second))
    assert report["results"][0]["ok"]
    assert str(second) not in report["cannot_run"]
    assert code == 0  # a.py calls no Function: nothing to check there, and no error


def test_a_terminal_sees_which_call_is_being_checked(tmp_path: Path) -> None:
    path = tmp_path / "slow.py"
    path.write_text(
        "import time\nimport torch\n\n\nclass Slow(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        time.sleep(0.15)\n"
        "        return g * 2\n\n\nx = torch.rand(2, 3, requires_grad=True)\nSlow.apply(x)\n")
    leader, follower = os.openpty()
    done = start_gradtrace("check", path, "--no-gradgrad", stdout=subprocess.DEVNULL,
                           stderr=follower, env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(follower)
    done.wait(120)
    seen = read_terminal(leader)
    assert done.returncode == 0
    assert "checking slow.py:17 Slow(tensor float32[2, 3])" in seen.decode(errors="replace")


@pytest.mark.slow  # gradgradcheck of a convolution in float64: ~11 s
def test_the_fused_conv_bn_tutorial_gets_every_verdict_by_default(
        shared_check: Callable[..., tuple[int, dict]]) -> None:
    """Regression: the conv+BN pair printed nothing for over 5 minutes (4x32x26x26 input).
    The run is `check --help`'s example (with --json), shared with test_docs: well within its
    --timeout 60, nothing is timed out, so its verdicts are the default run's."""
    code, report = shared_check("example:real/fused_conv_bn", "--timeout", "60")
    results = report["results"]
    assert code == 1 and len(results) == 5
    assert all(r["gradcheck"] == "pass" for r in results)
    for r in results:
        if r["function"] in ("Conv2D", "BatchNorm"):  # @once_differentiable
            assert r["gradgradcheck"] == "not applicable" and r["ok"] and not r["smells"]
        else:  # statistics kept on ctx: second derivatives really are wrong
            assert r["gradgradcheck"] == "fail" and "ctx.sqrt_var" in r["smells"][0]
    big = [r for r in results if r["inputs"][0] == "tensor float32[4, 32, 26, 26]"]
    assert big and "104,960 inputs" in big[0]["sampled"]


def test_sampling_skips_arguments_and_outputs_that_have_no_gradient(tmp_path: Path) -> None:
    path = tmp_path / "scale.py"
    path.write_text(
        "import torch\n\n\nclass Scale(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x, k, flag):\n        ctx.k = k\n"
        "        return x * k, (x > 0).long()\n\n    @staticmethod\n"
        "    def backward(ctx, g, _):\n        return g * ctx.k, None, None\n\n\n"
        "x = torch.randn(40, 40, requires_grad=True)\ny, mask = Scale.apply(x, 3, True)\n")
    code, report = check_json(str(path))
    (result,) = report["results"]
    assert code == 0 and result["ok"]
    assert "gradcheck 32/1,600 inputs × 32/1,600 outputs" in result["sampled"]


FIRST_ORDER_ONLY = """import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x.detach() ** 2  # right, but no graph for a second derivative


x = torch.randn(3, dtype=torch.float64, requires_grad=True)
Cube.apply(x).sum().backward()
"""


def test_a_double_backward_failure_says_how_a_first_order_function_is_marked(
        tmp_path: Path) -> None:
    script = tmp_path / "cube.py"
    script.write_text(FIRST_ORDER_ONLY)
    code, report = check_json(str(script))
    (result,) = report["results"]
    assert code == 1 and (result["gradcheck"], result["gradgradcheck"]) == ("pass", "fail")
    assert "@once_differentiable, or skip the second-order check" in result["message"]
