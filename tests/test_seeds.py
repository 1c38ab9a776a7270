"""The seed documents' numbers, reproduced through `gradtrace show --json`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from helpers import SCENARIOS, grad, invoke, shared_invoke, show_json, tensor

approx = pytest.approx
pytestmark = pytest.mark.matrix


def changes(trace: dict, pass_index: int) -> dict:
    """{tensor: (before values, after values)} of one pass's .grad changes."""
    out = {}
    for c in trace["passes"][pass_index]["grad_changes"]:
        before = c["before"] and c["before"]["values"]
        out[c["tensor"]] = (before, c["after"] and c["after"]["values"])
    return out


def node(trace: dict, node_id: str) -> dict:
    return next(n for n in trace["nodes"] if n["id"] == node_id)


# seed 003 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["forward_only", "finite_difference",
                                  "tensor_flags_without_grad"])
def test_code_1_to_3_have_no_graph_and_say_why(name: str) -> None:
    result = invoke("show", SCENARIOS / "no_graph" / f"{name}.py")
    assert result.exit_code == 2
    assert "no output to trace: no tensor requires grad" in result.stderr
    assert "requires_grad=True" in result.stderr


def test_code_4_chain_rule() -> None:
    t = show_json("chain_rule.py")
    assert grad(t, "x") == approx(0.6)
    assert tensor(t, "y")["value"]["values"] == approx(125.0)
    assert tensor(t, "z")["value"]["values"] == approx(4.8283, abs=1e-4)
    assert [n["type"] for n in t["nodes"]] == ["LogBackward0", "PowBackward0", "AccumulateGrad"]
    assert [(n["tensor"], n["kind"]) for n in t["nodes"]] == [("z", "op"), ("y", "op"),
                                                              ("x", "leaf")]
    assert grad(t, "y") is None and grad(t, "z") is None  # non-leaves keep no .grad
    assert t["passes"][0]["by"] == "scenario" and t["passes"][0]["line"] == 9


def test_code_5_retain_grad() -> None:
    t = show_json("retain_grad.py")
    assert grad(t, "y") == approx(0.008)
    assert grad(t, "z") == approx(1.0)
    assert tensor(t, "y")["retains_grad"] and not tensor(t, "x")["retains_grad"]


def test_code_6_second_backward_is_a_finding_with_state_so_far() -> None:
    t = show_json("backward_twice_error.py")
    assert [p["error"] is None for p in t["passes"]] == [True, False]
    assert "backward through the graph a second time" in t["passes"][1]["error"]
    assert grad(t, "x") == approx(0.6)  # the state up to the failing call
    # the failed pass is the stop's finding, after the graph-freed finding of its cause
    codes = [f["code"] for f in t["findings"]]
    assert codes.index("graph-freed") < codes.index("scenario-stopped")
    assert "pass-failed" not in codes
    (freed,) = [f for f in t["findings"] if f["code"] == "graph-freed"]
    assert "retain_graph=True" in freed["hint"]


def test_code_7_retain_graph_accumulates() -> None:
    t = show_json("retain_graph_accumulates.py")
    assert t["passes"][0]["retain_graph"] is True
    assert changes(t, 0)["x"] == (None, approx(0.6))
    assert changes(t, 1)["x"] == (approx(0.6), approx(1.2))
    assert grad(t, "x") == approx(1.2)


def test_code_8_zeroed_between_passes() -> None:
    t = show_json("zero_grad_between_passes.py")
    assert changes(t, 1)["x"] == (approx(0.0), approx(0.6))
    assert grad(t, "x") == approx(0.6)


def test_code_9_two_paths_add_up() -> None:
    t = show_json("two_paths_add_up.py")
    assert grad(t, "x") == approx(1.6)
    leaves = [n for n in t["nodes"] if n["kind"] == "leaf"]
    assert [n["tensor"] for n in leaves] == ["x"]  # one AccumulateGrad, reached twice
    assert sum(e["src"] == leaves[0]["id"] for e in t["edges"]) == 2


def test_code_10_tensor_exponent() -> None:
    t = show_json("tensor_exponent.py")
    assert grad(t, "q") == approx(math.log(5.0), rel=1e-5)
    assert grad(t, "q") == approx(1.6094, abs=1e-4)
    assert grad(t, "x") == approx(0.6)
    assert tensor(t, "y")["grad_fn"] == "PowBackward1"


def test_code_11_custom_pow_function() -> None:
    t = show_json("custom_pow_function.py")
    assert grad(t, "x") == approx(0.6)
    assert grad(t, "q") == approx(1.6094, abs=1e-4)
    y = node(t, tensor(t, "y")["node"])
    assert (y["type"], y["kind"]) == ("MyPowBackward", "custom")
    assert [s["name"] for s in y["saved"]] == ["saved_tensors[0]", "saved_tensors[1]"]
    assert "grad_input_2 tensor(1.6094)" in t["stdout"]  # the scenario's prints, kept apart
    assert t["functions"][0]["function"] == "MyPow" and t["functions"][0]["node"] == y["id"]


def test_code_12_no_grad_context() -> None:
    t = show_json("no_grad_context.py")
    assert t["nodes"] == [] and t["outputs"] == []
    assert not tensor(t, "y")["requires_grad"] and tensor(t, "y")["grad_fn"] is None
    codes = {f["code"]: f for f in t["findings"]}
    assert "does not require grad" in t["passes"][0]["error"]
    assert "torch.no_grad() on line 5" in codes["no-graph"]["message"]


def test_code_13_vector_fan_out() -> None:
    t = show_json("vector_fan_out.py")
    assert grad(t, "x") == approx(74.0)
    assert grad(t, "y") == approx([4.0, 7.0, 9.0])
    assert grad(t, "z") == approx(1.0)


def test_code_14_detach_cuts_the_graph() -> None:
    t = show_json("detach_cuts_graph.py")
    assert "does not require grad" in t["passes"][0]["error"]
    assert not tensor(t, "w")["requires_grad"] and not tensor(t, "z")["requires_grad"]
    detached = [f for f in t["findings"] if f["code"] == "detached"]
    assert [f["tensor"] for f in detached] == ["w"]


def test_code_15_detached_leaf_gets_grad_x_does_not() -> None:
    t = show_json("detach_then_requires_grad.py")
    assert grad(t, "w") == approx([4.0, 7.0, 9.0])
    assert grad(t, "x") is None
    assert any(f["code"] == "unreached-leaf" and f["tensor"] == "x" for f in t["findings"])


def test_code_16_backward_across_detach() -> None:
    t = show_json("backward_across_detach.py")
    assert grad(t, "w") == approx([4.0, 7.0, 9.0])
    assert grad(t, "x") == approx(74.0)
    assert changes(t, 1)["x"] == (None, approx(74.0))
    assert t["passes"][1]["root_names"] == ["y"]


def test_code_17_grad_of_grad_without_create_graph_fails() -> None:
    t = show_json("second_derivative_without_create_graph.py")
    assert t["passes"][1]["kind"] == "grad"
    assert t["passes"][1]["root_names"] == ["x.grad"]
    (finding,) = [f for f in t["findings"] if f["code"] == "scenario-stopped"]
    assert "create_graph=True" in finding["hint"]  # the failed pass's hint


def test_code_18_second_derivative() -> None:
    t = show_json("second_derivative.py")
    assert t["passes"][0]["create_graph"] is True
    assert tensor(t, "x_2nd_grad")["value"]["values"] == approx(-0.12)
    assert grad(t, "x") == approx(0.6)
    # x.grad has a graph of its own, walked from the second pass's root
    assert t["passes"][1]["root_names"] == ["x.grad"] and t["passes"][1]["roots"]


def test_code_19_hook_doubles_the_gradient() -> None:
    t = show_json("tensor_hook.py")
    assert grad(t, "x") == approx(1.2)
    assert "grad tensor(0.0080)" in t["stdout"]


def test_code_20_gradcheck_passes_and_code_21_fails() -> None:
    good = show_json("gradcheck_pow.py")
    assert any(f["code"] == "gradcheck" and "passed" in f["message"] for f in good["findings"])
    bad = show_json(SCENARIOS / "broken" / "gradcheck_pow_wrong_backward.py")
    (failed,) = [f for f in bad["findings"] if f["code"] == "gradcheck-failed"]
    assert "201.1797" in failed["message"] and "223.9699" in failed["message"]


def test_code_22_both_paths_reach_one_accumulate_grad() -> None:
    t = show_json("next_functions_walk.py")
    assert "x_1_is_x True" in t["stdout"] and "same node True" in t["stdout"]
    assert [n["type"] for n in t["nodes"]].count("AccumulateGrad") == 1
    assert grad(t, "x") == approx(1.6)


# seed 000 ----------------------------------------------------------------------------------

def test_seed_000_custom_sigmoid_matches_torch_sigmoid() -> None:
    builtin = show_json("sigmoid_builtin.py")
    custom = show_json("custom_sigmoid.py")
    assert grad(custom, "x") == approx(grad(builtin, "x"), rel=1e-5)
    assert grad(custom, "x") == approx(tensor(custom, "expected")["value"]["values"], rel=1e-5)
    assert node(custom, tensor(custom, "z")["node"])["type"] == "CustomBackward"


def test_seed_000_synthetic_gradient_updater() -> None:
    t = show_json("synthetic_gradient.py")
    torch.manual_seed(0)
    torch.randn(4, 3)  # hidden, drawn first
    synthetic = torch.randn(4, 3)
    true_gradient = torch.full((4, 3), 2.0)  # d loss / d trigger for loss = (trigger * 2).sum()
    torch.testing.assert_close(torch.tensor(grad(t, "hidden")), true_gradient)
    torch.testing.assert_close(torch.tensor(grad(t, "synthetic")),
                               2 / 4 * (synthetic - true_gradient))


# seed 001 ----------------------------------------------------------------------------------

def test_seed_001_chain_rule_on_a_vector() -> None:
    t = show_json("chain_rule_vector.py")
    assert grad(t, "x") == approx(tensor(t, "expected")["value"]["values"])


def test_seed_001_custom_add_passes_gradient_through() -> None:
    t = show_json("custom_add.py")
    assert grad(t, "x") == approx([1.0] * 32) and grad(t, "y2") == approx([1.0] * 32)


def test_seed_001_mul_with_ones_hides_its_bug() -> None:
    t = show_json(SCENARIOS / "broken" / "mul_ignores_grad_output.py")
    assert grad(t, "x") == approx(tensor(t, "y2")["value"]["values"])
    assert grad(t, "y2") == approx(tensor(t, "x")["value"]["values"])


def test_seed_001_apple_shopping() -> None:
    t = show_json("shopping_apple.py")
    expected = {"apple": 2.2, "num": 110.0, "ctax": 200.0, "price": 1.1, "result": 1.0}
    for name, value in expected.items():
        assert grad(t, name) == approx([value]), name


def test_seed_001_apple_and_tangerine_shopping() -> None:
    t = show_json("shopping_apple_tangerine.py")
    expected = {"apple": 2.2, "tangerine": 3.3, "num_apple": 110.0, "num_tangerine": 165.0,
                "ctax": 650.0, "apple_price": 1.1, "tangerine_price": 1.1, "price": 1.1,
                "result": 1.0}
    for name, value in expected.items():
        assert grad(t, name) == approx([value]), name


# seed 002 ----------------------------------------------------------------------------------

def test_seed_002_graph_printing() -> None:
    t = show_json("print_grad_graph.py")
    assert [n["type"] for n in t["nodes"]] == ["SumBackward0", "MulBackward0",
                                               "AccumulateGrad", "AccumulateGrad"]
    assert "  MulBackward0" in t["stdout"]
    assert grad(t, "x") == approx([4.0, 5.0, 6.0]) and grad(t, "y") == approx([1.0, 2.0, 3.0])


def test_seed_002_chunk_is_one_node_with_two_outputs() -> None:
    t = show_json("chunk_multi_output.py")
    split = [n for n in t["nodes"] if n["type"] == "SplitBackward0"]
    assert len(split) == 1
    into_split = sorted((e["src_output"]) for e in t["edges"] if e["src"] == split[0]["id"])
    assert into_split == [0, 1]
    assert grad(t, "x") == approx([1.0, 1.0, 1.0, 1.0])
    assert not [f for f in t["findings"] if f["code"] == "detached"]  # views are not detached


def test_seed_002_chunk_labels_each_output_with_its_own_tensor() -> None:
    """The lesson is that one node has two outputs: output 0 is a, output 1 is b (issue 54)."""
    t = show_json("chunk_multi_output.py")
    split = next(n for n in t["nodes"] if n["type"] == "SplitBackward0")
    assert split["output_tensors"] == ["a", "b"] and split["tensor"] == "a"
    shown = shared_invoke("show", str(SCENARIOS / "chunk_multi_output.py"))
    assert shown.exit_code == 0, shown.stderr
    assert "[0] SplitBackward0 (a, b) output 0  n3" in shown.stdout
    assert "[0] SplitBackward0 (b) output 1  n3  ↑ shown above" in shown.stdout
    assert "(a) output 1" not in shown.stdout


def test_an_output_is_named_by_its_place_not_by_which_name_came_first(tmp_path: Path) -> None:
    script = tmp_path / "reversed.py"
    script.write_text("import torch\n\nx = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "
                      "requires_grad=True)\nb, a = x.chunk(2)[::-1]\nk, v = x.chunk(3)[1:]\n"
                      "y = (b * a).sum() + (k * v).sum()\n")
    t = show_json(script)
    split = [n for n in t["nodes"] if n["type"] == "SplitBackward0"]
    assert [n["output_tensors"] for n in split] == [["a", "b"], [None, "k", "v"]]
    assert split[0]["tensor"] == "b"  # the first name bound still names the node
    assert not [n for n in t["nodes"] if n["type"] != "SplitBackward0" and "output_tensors" in n]
    text = invoke("show", script).stdout
    assert "SplitBackward0 (_, k, v)" in text and "SplitBackward0 (v) output 2" in text


def test_seed_002_custom_function_template() -> None:
    t = show_json("custom_function_template.py")
    assert grad(t, "a") == approx([1.0, 1.0, 1.0])
    assert node(t, tensor(t, "b")["node"])["kind"] == "custom"


def test_seed_002_undefined_ctx_fails_in_backward_at_its_line() -> None:
    t = show_json(SCENARIOS / "broken" / "custom_function_undefined_ctx.py")
    assert "NameError: name 'ctx' is not defined" in t["passes"][0]["error"]
    assert "custom_function_undefined_ctx.py:17" in t["passes"][0]["error"]


def test_seed_002_global_operand_gives_wrong_gradient_silently() -> None:
    t = show_json(SCENARIOS / "broken" / "custom_function_global_operand.py")
    # d(result_func)/db is 0 (b is never used), but the backward claims sum(x) = 3 * a
    assert grad(t, "b") == approx(3.0)
    assert [c["function"] for c in t["functions"]] == ["MyCustomFunction"] * 2


# seed 004 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,function", [("double_backward_square", "Square"),
                                           ("double_backward_exp", "Exp"),
                                           ("double_backward_sinh", "sinh"),
                                           ("double_backward_cube", "Cube")])
def test_seed_004_double_backward_functions(name: str, function: str) -> None:
    t = show_json(f"{name}.py")
    checks = [f["message"] for f in t["findings"] if f["code"] == "gradcheck"]
    assert len(checks) == 2 and all("passed" in m for m in checks)
    assert all(function in m for m in checks)
    grad_x = tensor(t, "grad_x")
    assert grad_x["grad_fn"] is not None  # create_graph=True: the gradient has a graph


def test_seed_004_square_gradient_is_2x() -> None:
    t = show_json("double_backward_square.py")
    assert tensor(t, "grad_x")["value"]["values"] == approx(2.0)


def test_seed_004_cube_gradient_and_cube_backward_recorded() -> None:
    t = show_json("double_backward_cube.py")
    assert tensor(t, "grad_x")["value"]["values"] == approx(12.0)  # 3 * 2**2
    assert {c["function"] for c in t["functions"]} == {"Cube", "CubeBackward"}


def test_seed_004_sinh_bad_gradient_has_no_graph() -> None:
    t = show_json(SCENARIOS / "broken" / "sinh_saved_on_ctx.py")
    assert tensor(t, "grad_x")["grad_fn"] is None
    assert not tensor(t, "grad_x")["requires_grad"]
