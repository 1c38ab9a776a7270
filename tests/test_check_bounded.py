"""`gradtrace check` bounded and talkative (issue 27, item 2): a time limit on every script
and call, progress when piped, nothing to check is an error, test files run their tests, and
numbers that say what they mean."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from helpers import SCENARIOS, check_json, invoke
from plain_python import run_gradtrace

BROKEN = SCENARIOS / "broken"

TWICE = (
    "import torch\n\n\nclass Twice(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return x * 2\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        return g * 2\n\n\n"
)


def gradtrace(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m gradtrace ARGS` as CI runs it: stdout and stderr are pipes."""
    return run_gradtrace(*args, timeout=timeout)


@pytest.mark.slow  # waits out a time limit in a real process: ~4 s
def test_timeout_bounds_the_script_run_too(tmp_path: Path) -> None:
    """Regression: --timeout bounded only the gradcheck calls; this never returned."""
    path = tmp_path / "loop_forever.py"
    path.write_text("import torch\nx = torch.ones(2, requires_grad=True)\nwhile True:\n"
                    "    y = x * 2\n")
    start = time.perf_counter()
    done = gradtrace("check", path, "--timeout", "2", timeout=60)
    assert time.perf_counter() - start < 30
    assert done.returncode == 2, done.stderr
    assert f"the scenario did not finish within 2 s: it was at {path}:" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_call_that_times_out_says_which_check(tmp_path: Path) -> None:
    path = tmp_path / "slow.py"
    # only double backward (a backward with a graph of its own) is slow
    path.write_text(TWICE.replace("return g * 2", "if torch.is_grad_enabled():\n"
                                  "            import time\n            time.sleep(8)\n"
                                  "        return g * 2")
                    + "x = torch.ones(2, requires_grad=True)\ny = Twice.apply(x)\n")
    code, report = check_json(path, "--timeout", "3", process=True)  # gradcheck: within it
    (result,) = report["results"]
    assert code == 2 and (result["gradcheck"], result["gradgradcheck"]) == ("pass", "timed out")
    assert result["outcome"] == "timed out"
    assert result["message"].startswith("gradgradcheck did not finish within 3 s")


@pytest.mark.slow  # a real process checking real Functions: ~9 s
def test_progress_lines_on_stderr_when_piped(tmp_path: Path) -> None:
    """Regression: `check .` ran silently for minutes when stderr was not a terminal."""
    path = tmp_path / "two.py"
    path.write_text(TWICE + "x = torch.ones(2, requires_grad=True)\ny = Twice.apply(x)\n"
                    "z = Twice.apply(torch.ones(3, 4, requires_grad=True))\n")
    done = gradtrace("check", path, "--no-gradgrad")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines == [f"running {path}",
                     "checking two.py:15 Twice(tensor float32[2])",
                     "checking two.py:16 Twice(tensor float32[3, 4])"]
    for quiet in ("--quiet", "-q"):
        silent = gradtrace("check", path, "--no-gradgrad", quiet)
        assert silent.returncode == 0 and silent.stderr == ""


def test_nothing_to_check_is_exit_2(tmp_path: Path) -> None:
    """Regression: "0 of 0 passed" exited 0, so a glob typo passed CI."""
    result = invoke("check", SCENARIOS / "chain_rule.py")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: no custom autograd.Function call in {SCENARIOS / 'chain_rule.py'}")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = invoke("check", empty)
    assert result.exit_code == 2
    assert f"no custom autograd.Function call in {empty}" in result.stderr
    assert "no .py file" in result.stderr
    code, report = check_json(empty)
    assert code == 2 and report["summary"]["checked"] == 0


def test_a_test_file_runs_its_test_functions(tmp_path: Path) -> None:
    """Regression: a pytest-style file exited 2 with "names no tensors"."""
    path = tmp_path / "test_model.py"
    path.write_text(TWICE + "def test_vector():\n    x = torch.ones(3, requires_grad=True)\n"
                    "    Twice.apply(x).sum().backward()\n"
                    "    assert x.grad.tolist() == [2] * 3\n\n\n"
                    "class TestMatrix:\n    def test_matrix(self):\n"
                    "        Twice.apply(torch.ones(2, 2, requires_grad=True))\n\n\n"
                    "def test_no_tensors():\n    assert 1 + 1 == 2\n\n\n"
                    "def test_with_a_fixture(tmp_path):\n    Twice.apply(torch.ones(5))\n")
    code, report = check_json(path)
    assert code == 0, report
    assert [r["scenario"] for r in report["results"]] == [
        f"{path}::test_vector", f"{path}::TestMatrix::test_matrix"]
    assert all(r["ok"] for r in report["results"])
    assert report["notes"] == [f"{path}::test_with_a_fixture takes arguments (tmp_path), "
                               "pytest fixtures: not run"]


def test_zero_against_a_number_is_a_mismatch_not_rounding() -> None:
    """Regression: "max abs error 3.4105, max rel error 2.23e-10" for a backward that is
    completely wrong (the worst entry is 0 against 3.4105)."""
    path = BROKEN / "mul_ignores_grad_output.py"
    out = invoke("check", path).stdout
    assert "max rel error" not in out and "e-10" not in out
    assert "mismatch: finite differences give 0 where backward gives 3.4105" in out
    _, report = check_json(path)
    mismatch = report["results"][0]["mismatch"]
    assert mismatch["max_rel"] is None and mismatch["worst_values"] == [0.0,
                                                                       pytest.approx(3.4105,
                                                                                     abs=1e-4)]
    # where the numerical value is not 0 the relative error is told
    pow_out = invoke("check", BROKEN / "gradcheck_pow_wrong_backward.py").stdout
    assert "max relative error 0.113" in " ".join(pow_out.split())


def test_gradgradcheck_failures_are_titled_as_such() -> None:
    out = invoke("check", BROKEN / "sinh_saved_on_ctx.py").stdout
    assert "SinhBad: gradgradcheck:" in out
    assert "Jacobian of output 0 with respect to input 0" not in out
    _, report = check_json(BROKEN / "sinh_saved_on_ctx.py")
    assert report["results"][0]["mismatch"]["check"] == "gradgradcheck"


def test_numbers_are_never_cut_at_80_columns() -> None:
    """Regression: cells were cut to `-0.00805…`."""
    for path in (BROKEN / "mul_ignores_grad_output.py",
                 BROKEN / "custom_function_global_operand.py"):
        out = invoke("check", path, env={"COLUMNS": "80"}).stdout
        assert "…" not in out, out
        assert all(len(line) <= 80 for line in out.splitlines())
    out = invoke("check", BROKEN / "mul_ignores_grad_output.py",
                 env={"COLUMNS": "80"}).stdout
    assert "0 / 3.4105" in out and "numerical / analytical" in out


def test_two_calls_at_one_line_are_told_apart(tmp_path: Path) -> None:
    path = tmp_path / "loop.py"
    path.write_text(TWICE + "for n in (2, 3):\n"
                    "    Twice.apply(torch.ones(n, requires_grad=True))\n")
    out = invoke("check", path).stdout
    rows = [line for line in out.splitlines() if line.startswith("│ Twice")]
    assert len(rows) == 2 and rows[0] != rows[1]
    assert "float32[2]" in rows[0] and "float32[3]" in rows[1]
    _, report = check_json(path)
    assert [r["call"] for r in report["results"]] == [1, 2]


def test_json_has_a_schema_and_counts() -> None:
    code, report = check_json(BROKEN, SCENARIOS / "custom_add.py")
    assert code == 1
    assert report["schema"] == "gradtrace.check/1"
    assert report["summary"] == {"checked": 6, "ok": 1, "passed": 1, "failed": 5, "smell": 0,
                                 "straight_through": 0, "skipped": 0, "timed_out": 0,
                                 "cannot_run": 0}


@pytest.mark.parametrize("option", ["--rtol", "--atol", "--eps"])
def test_negative_tolerances_are_refused(option: str) -> None:
    result = invoke("check", SCENARIOS / "custom_add.py", option, "-1")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert option in result.stderr


@pytest.mark.parametrize("left_behind", [True, False])
def test_a_thread_gradtrace_left_behind_adds_no_pass_to_a_later_run(left_behind: bool) -> None:
    """A check past its --timeout, or a scenario past its grace, runs on in the process (a
    notebook, the test suite): its backward calls are no later run's passes. Another thread's
    are (a control: the filter is what keeps them out)."""
    import threading

    import torch

    import gradtrace
    from gradtrace.capture.script.scenario_thread import LEFT_BEHIND

    stop, ran = threading.Event(), threading.Event()

    def backward_forever() -> None:
        w = torch.ones(2, requires_grad=True)
        while not stop.is_set():
            (w * 3).sum().backward()
            ran.set()
            time.sleep(0.01)

    worker = threading.Thread(target=backward_forever, daemon=True)
    if left_behind:
        LEFT_BEHIND.add(worker)
    worker.start()
    try:
        with gradtrace.record(all_threads=True) as rec:  # the worker's passes too
            x = torch.ones(2, requires_grad=True)
            (x * 2).sum().backward()
            ran.clear()
            assert ran.wait(10)
            ran.clear()
            assert ran.wait(10)  # the worker ran backward twice while the block recorded
    finally:
        stop.set()
        worker.join()
    assert (len(rec.trace.passes) == 1) is left_behind
