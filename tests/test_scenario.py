"""The scenario runner: named tensors, outputs, own backward, recorded passes and calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SCENARIOS, as_read, grad, invoke, show_json, tensor

import gradtrace


def write(tmp_path: Path, body: str, name: str = "s.py") -> Path:
    path = tmp_path / name
    path.write_text("import torch\n" + body)
    return path


def test_module_parameters_are_named_with_dots(tmp_path: Path) -> None:
    path = write(tmp_path, "torch.manual_seed(0)\n"
                           "model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())\n"
                           "x = torch.randn(4, 3)\nloss = model(x).sum()\n")
    t = show_json(path)
    names = [row["name"] for row in t["tensors"]]
    assert names == ["model.0.weight", "model.0.bias", "x", "loss"]  # binding order
    weight = tensor(t, "model.0.weight")
    assert weight["grad"]["shape"] == [2, 3] and weight["node"] is not None
    leaf_names = {n["tensor"] for n in t["nodes"] if n["kind"] == "leaf"}
    assert leaf_names == {"model.0.weight", "model.0.bias"}


@pytest.mark.parametrize("output", ["'b'", "b", "['b']", "[a, 'b']"])
def test_output_variable_forms(tmp_path: Path, output: str) -> None:
    path = write(tmp_path, "x = torch.tensor(2.0, requires_grad=True)\n"
                           f"a = x * 3\nb = x ** 2\nc = a + b\nOUTPUT = {output}\n")
    t = show_json(path)
    assert "b" in t["output_names"] and "c" not in t["output_names"]
    assert t["root_reason"] == "the scenario's OUTPUT"


def test_output_option_wins_and_repeats(tmp_path: Path) -> None:
    path = write(tmp_path, "x = torch.tensor(2.0, requires_grad=True)\n"
                           "a = x * 3\nb = x ** 2\nOUTPUT = 'b'\n")
    t = show_json(path, "--root", "a", "--root", "b")
    assert t["output_names"] == ["a", "b"] and len(t["outputs"]) == 2
    assert grad(t, "x") == pytest.approx(3.0 + 4.0)  # own backward from both roots


def test_non_scalar_root_gets_ones(tmp_path: Path) -> None:
    t = show_json(write(tmp_path, "x = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                                  "y = x ** 2\n"))
    assert grad(t, "x") == pytest.approx([2.0, 4.0])
    assert t["passes"][0]["by"] == "gradtrace"


def test_no_backward(tmp_path: Path) -> None:
    t = show_json(write(tmp_path, "x = torch.tensor(1.0, requires_grad=True)\ny = x * 2\n"),
                  "--no-backward")
    assert t["passes"] == [] and grad(t, "x") is None
    # gradtrace ran no backward, so the saved tensors are still there to read
    assert t["nodes"][0]["saved"][0]["status"] == "ok"


def test_saved_tensors_changed_in_place_are_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "x = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                           "a = x * 1\ny = a.exp()\na.add_(1)\n")
    t = show_json(path, "--no-backward")
    exp = next(n for n in t["nodes"] if n["type"] == "ExpBackward0")
    # ExpBackward0 saves its result y, which add_ on a leaves alone:
    assert exp["saved"] == [{"name": "result", "shape": [2], "dtype": "float32", "bytes": 8,
                             "status": "ok"}]
    # SinBackward0 saves its input a, which add_ changed:
    path = write(tmp_path, "x = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                           "a = x * 1\ny = a.sin()\na.add_(1)\n", "s2.py")
    t = show_json(path, "--no-backward")
    sin = next(n for n in t["nodes"] if n["type"] == "SinBackward0")
    assert sin["saved"] == [{"name": "self", "shape": None, "dtype": None, "bytes": 0,
                             "status": "modified in place"}]


def test_saved_tensors_are_read_before_backward_frees_them() -> None:
    t = show_json("chain_rule.py")  # the scenario ran backward() without retain_graph
    log = t["nodes"][0]
    assert log["saved"] == [{"name": "self", "shape": [], "dtype": "float32", "bytes": 4,
                             "status": "ok"}]


def test_printing_never_corrupts_json(tmp_path: Path) -> None:
    path = write(tmp_path, "import sys, warnings\nprint('{not json')\n"
                           "print('to stderr', file=sys.stderr)\nwarnings.warn('careful')\n"
                           "x = torch.tensor(1.0, requires_grad=True)\ny = x * 2\n")
    result = invoke("show", path, "--json")
    assert result.exit_code == 0
    data = as_read(result.stdout)
    assert "{not json" in data["stdout"] and "to stderr" in data["stdout"]
    assert "careful" in data["stdout"]


def test_scenario_runs_like_python_main(tmp_path: Path) -> None:
    (tmp_path / "helper_mod.py").write_text("SCALE = 3.0\n")
    path = write(tmp_path, "from helper_mod import SCALE\n"
                           "x = torch.tensor(1.0, requires_grad=True)\n"
                           "if __name__ == '__main__':\n    y = x * SCALE\n")
    assert grad(show_json(path), "x") == pytest.approx(3.0)


def test_torch_is_restored_after_a_run() -> None:
    import torch

    before = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad,
              torch.autograd.Function.__dict__["apply"], torch.autograd.gradcheck)
    show_json("custom_pow_function.py")
    show_json("backward_twice_error.py")
    after = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad,
             torch.autograd.Function.__dict__["apply"], torch.autograd.gradcheck)
    assert before == after


def test_python_api_loads_a_scenario() -> None:

    trace = gradtrace.load_scenario(str(SCENARIOS / "two_paths_add_up.py"))
    x = next(t for t in trace.tensors if t.name == "x")
    assert x.grad is not None and x.grad.values == pytest.approx(1.6)


def test_same_scenario_gives_identical_json() -> None:
    a = invoke("show", SCENARIOS / "custom_pow_function.py",
               "--json").stdout
    b = invoke("show", SCENARIOS / "custom_pow_function.py",
               "--json").stdout
    assert a == b


def test_many_unreached_leaves_make_one_finding(tmp_path: Path) -> None:
    path = write(tmp_path, "unused = torch.nn.Linear(3, 3)\nmore = torch.nn.Linear(3, 3)\n"
                           "x = torch.ones(3, requires_grad=True)\ny = x * 2\n")
    findings = [f for f in show_json(path)["findings"] if f["code"] == "unreached-leaf"]
    assert len(findings) == 1
    assert findings[0]["message"].startswith("4 tensors require grad")
    assert findings[0]["message"].endswith("by module: unused (2), more (2)")
