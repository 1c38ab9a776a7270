"""Exit codes that match what happened (issue 27, item 1): a scenario that raises — in
backward() too — or exits non-zero stops there as under python, is shown, then exits 2 with
its own words; no graph is the same exit 2 in every command, and dot draws no empty picture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT, SCENARIOS, as_read, invoke, write_script
from plain_python import run_gradtrace

from gradtrace.cli.core import ExitCode
from gradtrace.errors import ScenarioStopped

INPLACE = (
    "import torch\n"
    "a = torch.tensor([1.0, 2.0], requires_grad=True)\n"
    "b = torch.sigmoid(a)\n"
    "b.add_(1)\n"
    "loss = b.sum()\n"
    "loss.backward()\n"
    "print('after the backward')\n"
)
FREED = (
    "import torch\n"
    "x = torch.ones(3, requires_grad=True)\n"
    "y = (x.exp() * 2).sum()\n"
    "y.backward()\n"
    "y.backward()\n"
    "print('after the backward')\n"
)
ARGPARSE = (
    "import argparse\n"
    "import torch\n"
    "parser = argparse.ArgumentParser(description='trains with a learning rate')\n"
    "parser.add_argument('--lr', type=float, required=True)\n"
    "args = parser.parse_args()\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "(w * args.lr).sum().backward()\n"
)
# The forward runs under no_grad; the script catches its backward's error, so python ends
# well, but there is no graph.
NO_GRAPH_CAUGHT = (
    "import torch\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "with torch.no_grad():\n"
    "    loss = (w * 2).sum()\n"
    "try:\n"
    "    loss.backward()\n"
    "except RuntimeError as error:\n"
    "    print('caught', error)\n"
)


def _stopped(trace: dict) -> dict:
    (found,) = [f for f in trace["findings"] if f["code"] == "scenario-stopped"]
    return found


@pytest.mark.parametrize("text, line, words", [
    (INPLACE, 6, "modified by an inplace operation"),
    (FREED, 5, "backward through the graph a second time"),
])
def test_a_backward_that_raises_stops_the_script_is_shown_and_exits_2(
        tmp_path: Path, text: str, line: int, words: str) -> None:
    scenario = write_script(tmp_path, text)
    result = invoke("show", scenario, "--json")
    assert result.exit_code == ExitCode.USAGE
    assert f"{scenario}:{line}: the scenario raised RuntimeError" in result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr
    trace = as_read(result.stdout)  # what was recorded, shown first
    assert trace["passes"][-1]["error"] and words in trace["passes"][-1]["error"]
    stop = _stopped(trace)
    assert (stop["severity"], stop["line"]) == ("error", line)
    assert "gradtrace stopped the script there, as python would have" in stop["hint"]
    assert "after the backward" not in trace["stdout"]  # the line after it never ran


def test_the_gallery_backward_twice_shows_its_report_then_exits_2() -> None:
    result = invoke("show", SCENARIOS / "backward_twice_error.py")
    assert result.exit_code == ExitCode.USAGE
    assert "graph-freed" in result.stdout and "scenario-stopped" in result.stdout
    assert "backward_twice_error.py:10: the scenario raised RuntimeError" in result.stderr


def test_a_backward_whose_error_the_script_catches_does_not_stop_it(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                "y = (x * 2).sum()\ny.backward()\ntry:\n    y.backward()\n"
                                "except RuntimeError:\n    pass\nz = (x * 3).sum()\n")
    result = invoke("show", scenario, "--json")
    assert result.exit_code == 0, result.stderr  # python ends well too
    trace = as_read(result.stdout)
    assert "pass-failed" in {f["code"] for f in trace["findings"]}
    assert "scenario-stopped" not in {f["code"] for f in trace["findings"]}


def test_the_api_raises_the_stop_with_what_was_recorded(tmp_path: Path) -> None:
    from gradtrace.api import load_scenario

    with pytest.raises(ScenarioStopped) as stopped:
        load_scenario(str(write_script(tmp_path, FREED)))
    assert len(stopped.value.trace.passes) == 2 and stopped.value.failed_call


def test_an_argparse_failure_exits_2_with_its_own_message(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, ARGPARSE, "train_args.py")
    result = invoke("show", scenario)
    assert result.exit_code == ExitCode.USAGE
    assert "the following arguments are required: --lr" in result.stderr
    assert "usage: train_args.py [-h] --lr LR" in result.stderr
    assert f"{scenario}:5: the scenario called sys.exit(2)" in result.stderr
    # python prints the script's words before its error: so does gradtrace
    assert result.stderr.index("required: --lr") < result.stderr.index("\nerror: ")
    assert invoke("show", scenario, "--", "--lr", "0.1").exit_code == 0


def test_the_scripts_help_is_shown_not_names_no_tensors(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, ARGPARSE, "train_args.py")
    result = invoke("show", scenario, "--", "--help")
    assert result.exit_code == ExitCode.USAGE
    assert "trains with a learning rate" in result.stderr and "--lr LR" in result.stderr
    assert "names no tensors" not in result.stderr
    assert "called sys.exit(0) before it made any tensor" in result.stderr


def test_a_sys_exit_after_a_pass_shows_the_script_output_with_the_json(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, "import sys, torch\nx = torch.ones(2, requires_grad=True)\n"
                                "(x * 3).sum().backward()\nprint('giving up now')\n"
                                "sys.exit(3)\n")
    result = invoke("show", scenario, "--json")
    assert result.exit_code == ExitCode.USAGE
    assert "giving up now" in as_read(result.stdout)["stdout"]
    assert "giving up now" in result.stderr  # JSON is for machines: the words go to stderr
    assert _stopped(as_read(result.stdout))["line"] == 5
    report = invoke("show", scenario)  # the report's panel shows them: not twice
    assert report.exit_code == ExitCode.USAGE and "giving up now" in report.stdout
    assert "giving up now" not in report.stderr


@pytest.mark.parametrize(("patch", "statement"), [
    ("", "(x * 3).sum()"),
    ("torch.Tensor.backward = lambda self: None\n", "(x * 3).sum().backward()")],
    ids=["never-called", "replaced-by-a-no-op"])
def test_a_result_bound_to_no_name_is_said_so_not_blamed_on_no_grad(
        patch: str, statement: str, tmp_path: Path) -> None:
    """`(x * 3).sum()` on a line of its own (or its .backward() made a no-op): it was computed
    with gradients enabled; the message said no_grad or detach had cut it. In a process of
    its own: the patch stays in the process, as under python."""
    scenario = write_script(tmp_path, f"import torch\n{patch}"
                                      "x = torch.ones(2, requires_grad=True)\n"
                                      f"print(x)\nx.retain_grad()\n{statement}\n")
    result = run_gradtrace("show", scenario)
    line = 5 + bool(patch)  # not print(x) nor x.retain_grad(): they compute nothing
    assert result.returncode == ExitCode.USAGE
    assert f"x require grad, and line {line} `{statement}` computed from them, but its " \
           "result was bound to no name and no backward ran on it" in result.stderr
    assert "no_grad" not in result.stderr


def test_no_graph_is_exit_2_with_the_same_message_in_every_command(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, NO_GRAPH_CAUGHT)
    message = f"{scenario}: no output to trace: w require grad, but nothing was computed"
    shown = invoke("show", scenario)
    assert shown.exit_code == ExitCode.USAGE and message in shown.stderr
    assert "no-graph" in shown.stdout  # what was recorded is shown first
    picture = tmp_path / "empty.svg"
    drawn = invoke("dot", scenario, "-o", picture)
    assert drawn.exit_code == ExitCode.USAGE and message in drawn.stderr
    assert not picture.exists()  # never an empty picture
    on_stdout = invoke("dot", scenario)
    assert on_stdout.exit_code == ExitCode.USAGE and on_stdout.stdout == ""
    compared = invoke("diff", scenario, SCENARIOS / "chain_rule.py")
    assert compared.exit_code == ExitCode.USAGE and message in compared.stderr
    charted = invoke("steps", scenario)
    assert charted.exit_code == ExitCode.USAGE and message in charted.stderr
    saved = tmp_path / "saved.json"
    saved.write_text(invoke("show", scenario, "--json").stdout)
    again = invoke("show", saved)  # a saved trace without a graph: the same answer
    assert again.exit_code == ExitCode.USAGE and "no output to trace: w require grad" in \
        again.stderr


def test_the_no_graph_gallery_says_the_same_in_dot() -> None:
    for command in ("show", "dot"):
        result = invoke(command, SCENARIOS / "no_graph" / "forward_only.py")
        assert result.exit_code == ExitCode.USAGE
        assert "no output to trace: no tensor requires grad" in result.stderr


def test_a_gradcheck_only_scenario_is_reported_by_show_but_not_drawn(tmp_path: Path) -> None:
    scenario = SCENARIOS / "gradcheck_pow.py"
    assert invoke("show", scenario).exit_code == 0  # its gradcheck verdict is the report
    picture = tmp_path / "empty.svg"
    drawn = invoke("dot", scenario, "-o", picture)
    assert drawn.exit_code == ExitCode.USAGE and "no output to trace" in drawn.stderr
    assert not picture.exists()


def test_no_backward_pass_says_why(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                "y = (x * 2).sum()\nraise ValueError('stop')\n")
    stopped = invoke("show", scenario)
    assert stopped.exit_code == ExitCode.USAGE
    assert "no backward pass: the scenario stopped before any" in stopped.stdout
    assert "--no-backward" not in stopped.stdout
    forward = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                               "y = (x * 2).sum()\n", "forward.py")
    asked = invoke("show", forward, "--no-backward")
    assert asked.exit_code == 0 and "no backward pass (--no-backward)" in asked.stdout


def test_a_scenario_stopped_by_its_time_limit_is_not_said_to_be_no_backward(
        tmp_path: Path) -> None:
    scenario = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                "y = (x * 2).sum()\nwhile True:\n    pass\n")
    result = invoke("show", scenario, "--timeout", "0.5")
    assert result.exit_code == ExitCode.USAGE and "did not finish within 0.5 s" in result.stderr
    assert "--no-backward" not in result.stdout
    assert "the scenario stopped before any" in result.stdout


def test_the_readme_exit_code_table_is_the_one_in_the_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Exit codes"):readme.index("### JSON")]
    rows = re.findall(r"^\| `(\d+)` \|", section, re.MULTILINE)
    assert [int(r) for r in rows] == [int(c) for c in ExitCode]
