"""A scenario that stops part-way (an exception, sys.exit, a time limit) still shows what it
recorded, then exits 2; threads it starts are waited for as under `python`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import as_read, invoke, write_script

from gradtrace.api import load_scenario
from gradtrace.errors import ScenarioStopped

TWO_PASSES_THEN_RAISE = (
    "import torch\n"
    "x = torch.randn(3, requires_grad=True)\n"
    "y = (x * 2).sum()\n"
    "y.backward(retain_graph=True)\n"
    "y.backward()\n"
    "x.grad = 1.5\n"
)


def _stopped(trace: dict) -> list[dict]:
    return [f for f in trace["findings"] if f["code"] == "scenario-stopped"]


def test_passes_before_an_error_are_shown_then_exit_2(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, TWO_PASSES_THEN_RAISE)
    result = invoke("show", scenario, "--json")
    assert result.exit_code == 2
    assert f"{scenario}:6: the scenario raised TypeError" in result.stderr
    trace = as_read(result.stdout)
    assert len(trace["passes"]) == 2
    # both passes reached x: its .grad is 2 + 2 before the failing assignment
    assert [t["grad"]["values"] for t in trace["tensors"] if t["name"] == "x"] == [[4.0] * 3]
    (finding,) = _stopped(trace)
    assert finding["severity"] == "error" and "raised TypeError" in finding["message"]


def test_the_report_and_the_picture_come_before_the_error(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, TWO_PASSES_THEN_RAISE)
    shown = invoke("show", scenario)
    assert shown.exit_code == 2 and "SumBackward0" in shown.stdout
    assert "scenario-stopped" in shown.stdout and "error:" in shown.stderr
    drawn = invoke("dot", scenario)
    assert drawn.exit_code == 2 and drawn.stdout.startswith("digraph")
    assert "raised TypeError" in drawn.stderr


def test_sys_exit_after_a_pass_keeps_the_pass(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, "import sys, torch\nx = torch.ones(2, requires_grad=True)\n"
                                "(x * 3).sum().backward()\nsys.exit(4)\n")
    result = invoke("show", scenario, "--json")
    assert result.exit_code == 2 and "sys.exit(4)" in result.stderr
    assert len(json.loads(result.stdout)["passes"]) == 1


def test_nothing_recorded_gives_the_error_alone(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, "import torch\nx = torch.ones(2)\nraise ValueError('no')\n")
    result = invoke("show", scenario, "--json")
    assert result.exit_code == 2 and result.stdout == ""
    assert "raised ValueError: no" in result.stderr


def test_the_api_hands_over_the_partial_trace(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, TWO_PASSES_THEN_RAISE)
    with pytest.raises(ScenarioStopped) as stopped:
        load_scenario(str(scenario))
    assert len(stopped.value.trace.passes) == 2


TRAINING_FOREVER = (
    "import torch\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "while True:\n"
    "    loss = (w * w).sum()\n"
    "    loss.backward()\n"
)


def _gradtrace(*args: str | Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """The real console entry point in a child process (its exit path is under test too)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gradtrace", *map(str, args)],
                          capture_output=True, text=True, timeout=180)
    return proc, time.perf_counter() - start


@pytest.mark.slow  # waits out a time limit in a real process: ~4 s
def test_a_time_limit_shows_the_passes_made_so_far(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, TRAINING_FOREVER)
    proc, took = _gradtrace("show", scenario, "--timeout", "2", "--passes", "all", "--json")
    assert proc.returncode == 2, proc.stderr
    assert "did not finish within 2 s: it was at" in proc.stderr
    trace = as_read(proc.stdout)
    assert len(trace["passes"]) >= 1
    assert "did not finish within 2 s" in _stopped(trace)[0]["message"]
    assert took < 60


@pytest.mark.slow  # waits out a time limit and its grace: ~6 s
def test_a_line_stuck_in_c_is_left_behind_after_the_grace(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, "import time, torch\nx = torch.ones(2, requires_grad=True)\n"
                                "(x * 3).sum().backward()\ntime.sleep(120)\n")
    proc, took = _gradtrace("show", scenario, "--timeout", "1")
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"it was at {scenario}:4 `time.sleep(120)`" in proc.stderr
    assert took < 60  # not the 120 s of the sleep: the stuck thread is not waited for


def test_threads_the_scenario_starts_are_waited_for(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, (
        "import threading, time, torch\n"
        "w = torch.ones(2, requires_grad=True)\n"
        "def later():\n"
        "    time.sleep(0.5)\n"
        "    (w * 5).sum().backward()\n"
        "threading.Thread(target=later).start()\n"))
    trace = as_read(invoke("show", scenario, "--json").stdout)
    assert len(trace["passes"]) == 1
    assert [t["grad"]["values"] for t in trace["tensors"] if t["name"] == "w"] == [[5.0, 5.0]]


def test_a_thread_pool_left_open_is_waited_for_as_python_exits(tmp_path: Path) -> None:
    """Python's exit shuts thread pools down before it waits for threads: queued work runs,
    then their idle workers end (torch.compile's inductor leaves such a pool; under gradtrace
    the run hung, waiting for its idle workers)."""
    scenario = write_script(tmp_path, (
        "import time, torch\nfrom concurrent.futures import ThreadPoolExecutor\n"
        "w = torch.ones(2, requires_grad=True)\n"
        "def later():\n"
        "    time.sleep(0.5)\n"
        "    (w * 5).sum().backward()\n"
        "pool = ThreadPoolExecutor(2)\n"
        "pool.submit(later)\n"))
    proc, took = _gradtrace("show", scenario, "--json", "--timeout", "60")
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(proc.stdout)
    assert len(trace["passes"]) == 1  # the queued work ran before the script was done
    assert [t["grad"]["values"] for t in trace["tensors"] if t["name"] == "w"] == [[5.0, 5.0]]
    assert took < 30


def test_restoring_torch_state_does_not_import_the_compiler(tmp_path: Path) -> None:
    """torch.use_deterministic_algorithms imports torch._inductor (seconds): it is called
    only when a scenario changed the flag."""
    scenario = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                "y = (x * 2).sum()\n")
    code = ("import sys; from gradtrace.api import load_scenario\n"
            f"load_scenario({str(scenario)!r})\n"
            "print('torch._inductor' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def test_an_error_of_gradtraces_own_is_not_blamed_on_the_script(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.capture.passes import recorder
    from gradtrace.extract.walk import dtype_name

    monkeypatch.setattr(recorder, "indexed_walk", dtype_name)  # gradtrace's pass recording fails
    scenario = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                "(x * 3).sum().backward()\n")
    result = invoke("show", scenario)
    assert result.exit_code == 2
    assert f"{scenario}:3: gradtrace failed while running this line" in result.stderr
    assert "bug in gradtrace, not in your script" in result.stderr
    assert "fix the scenario" not in result.stderr
