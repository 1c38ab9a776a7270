"""The classic autograd failures explained with the tensor and the lines at fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    GALLERY_FINDINGS,
    SCENARIOS,
    as_read,
    gallery_finding,
    invoke,
    stopped_by_its_call,
)

from gradtrace.findings.recorded import out_of_place

EXPLAINED = SCENARIOS / "explained"


def findings(path: Path, *args: str) -> list[dict]:
    """The findings of `show --json`: it succeeded, or stopped where a call it made raised."""
    result = invoke("show", path, "--json", *args)
    assert result.exit_code == 0 or stopped_by_its_call(result), result.stderr
    return json.loads(result.stdout)["findings"]


def inplace(path: Path, *args: str) -> list[dict]:
    return [f for f in findings(path, *args) if f["code"] == "inplace-modified"]


def test_inplace_names_the_tensor_and_both_lines() -> None:
    (found,) = inplace(EXPLAINED / "inplace_after_save.py")
    assert found["message"] == ("b (output of SigmoidBackward0, line 6) was saved for backward "
                                "and then changed in place at line 8 `b.add_(1)`: backward "
                                "needs the saved value")
    assert found["hint"] == "write line 8 out of place: `b = b.add(1)`"
    assert (found["tensor"], found["line"]) == ("b", 8)
    assert found["file"].endswith("inplace_after_save.py")


def test_a_tensor_saved_twice_is_told_once() -> None:
    (found,) = inplace(EXPLAINED / "inplace_augmented.py")
    assert found["message"].startswith("y (output of ExpBackward0, line 7) was saved")
    assert "line 9 `y += 1`" in found["message"] and found["hint"].endswith("`y = y + 1`")


def test_before_any_backward_runs_even_gradtraces_own(tmp_path: Path) -> None:
    path = tmp_path / "s.py"
    path.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n"
                    "h = x.exp()\nout = (h * h).sum()\nh.mul_(3)\n")
    (found,) = inplace(path, "--root", "out")
    assert found["message"].startswith("h (output of ExpBackward0, line 3)")
    assert "line 5 `h.mul_(3)`" in found["message"] and "`h = h.mul(3)`" in found["hint"]


def test_a_change_autograd_did_not_see_still_names_the_tensor_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.py"
    path.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n"
                    "h = x.sigmoid()\nout = (h * 2).sum()\n"
                    "with torch.no_grad():\n    h.add_(1)\nout.backward()\n")
    (found,) = inplace(path)
    assert found["message"].startswith("h (output of SigmoidBackward0, line 3) was saved")
    # no node of the change's (under no_grad): the line is read off the code, as in forward()
    assert "changed in place at line 6 `h.add_(1)`" in found["message"]
    assert found["hint"] == "write line 6 out of place: `h = h.add(1)`"


@pytest.mark.parametrize(("line", "rewrite"), [
    ("b.add_(1)", "b = b.add(1)"),
    ("    self.h.mul_(x, y)", "self.h = self.h.mul(x, y)"),
    ("h[0] += 1", "h[0] = h[0] + 1"),
    ("y **= 2", "y = y ** 2"),
    ("loss.backward()", None),
])
def test_out_of_place_rewrites(line: str, rewrite: str | None) -> None:
    assert out_of_place(line) == rewrite


def freed(path: Path) -> dict:
    (found,) = [f for f in findings(path) if f["code"] == "graph-freed"]
    return found


def test_a_gan_step_names_the_shared_batch_and_says_detach() -> None:
    found = freed(EXPLAINED / "gan_shared_fake.py")
    assert found["message"] == ("pass 2 reached 3 node(s) whose saved tensors pass 1 (line 13 "
                                "`lossD.backward()`) already freed; it entered them through "
                                "fake (output of TanhBackward0, line 11)")
    assert found["hint"].startswith("fake links the two passes: detach it")
    assert (found["tensor"], found["line"]) == ("fake", 11)


def test_backward_twice_on_one_root_says_retain_graph() -> None:
    found = freed(SCENARIOS / "backward_twice_error.py")
    assert "pass 1 (line 9 `z.backward()`)" in found["message"]
    assert "through z (output of LogBackward0, line 7)" in found["message"]
    assert found["hint"].startswith("pass retain_graph=True to the first backward()")


def test_a_hidden_state_carried_across_iterations(tmp_path: Path) -> None:
    path = tmp_path / "rnn.py"
    path.write_text("import torch\nw = torch.ones(3, requires_grad=True)\n"
                    "h = torch.zeros(3)\nfor step in range(2):\n"
                    "    h = torch.tanh(w * h + 1)\n    loss = h.sum()\n    loss.backward()\n")
    found = freed(path)
    assert "pass 1 (line 7 `loss.backward()`)" in found["message"]
    # the name the loop carries it under (line 5 both reads and binds h)
    assert "through h (output of TanhBackward0, line 5)" in found["message"]
    assert "`h.detach()`" in found["hint"]
    assert "detach it where the first pass uses it or where it is carried over" in \
        found["hint"]


def test_a_grad_the_scenario_set_to_none_is_said_so(tmp_path: Path) -> None:
    """Regression: `a.grad = None` after a backward was told "only torch.autograd.grad
    reached it"."""
    path = tmp_path / "s.py"
    path.write_text("import torch\na = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                    "b = (a * 3).sum()\nb.backward()\na.grad = None\n")
    trace = as_read(invoke("show", path, "--json").stdout)
    notes = {t["name"]: t["grad_note"] for t in trace["tensors"]}
    assert notes["a"] == ("a backward pass filled it, then the scenario set it to None "
                          "(zero_grad(), or .grad = None)")


def test_unused_parameters_are_told_by_the_module_that_does_not_reach_the_loss() -> None:
    (found,) = [f for f in findings(EXPLAINED / "unused_head.py") if f["code"] ==
                "unreached-leaf"]
    assert found["message"].endswith("by module: model.aux (4)")
    assert "find_unused_parameters" in found["hint"]


WAITING = """import sys, torch
w = torch.ones(3, requires_grad=True)
(w * 2).sum().backward()
c = torch.zeros(3, requires_grad=True)
unused = torch.zeros(2, requires_grad=True)
h = w * 2 + c
loss2 = h.sum()
if sys.argv[1:] == ["stop"]:
    raise RuntimeError("the data ran out")
"""


@pytest.mark.parametrize("stop", [False, True])
def test_a_leaf_only_a_tensor_not_yet_differentiated_uses_is_said_so(tmp_path: Path,
                                                                      stop: bool) -> None:
    """c is used by loss2, which no backward ran from: said so (it read 'no output depends
    on it'), and not at all once the script stopped before that backward could run; a leaf
    nothing uses is unreached either way."""
    path = tmp_path / "waiting.py"
    path.write_text(WAITING)
    result = invoke("show", path, "--json", "--", *(["stop"] if stop else []))
    assert result.exit_code == (2 if stop else 0), result.stderr
    found = {f["tensor"]: f for f in as_read(result.stdout)["findings"]
             if f["code"] == "unreached-leaf"}
    assert found["unused"]["message"] == \
        "unused requires grad, but no output depends on it: its .grad stays None"
    if stop:
        assert set(found) == {"unused"}
        return
    assert set(found) == {"unused", "c"}
    assert found["c"]["message"] == "c requires grad and loss2 depends on it, but no " \
        "backward pass ran from loss2: its .grad stays None"
    assert found["c"]["hint"] == \
        "call loss2.backward() or use loss2 in the loss; --root loss2 shows its graph"


def test_no_graph_cites_only_lines_that_ran(tmp_path: Path) -> None:
    """Regression: a torch.no_grad() inside a function that never ran was cited."""
    path = tmp_path / "s.py"
    path.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n\n"
                    "def test():\n    with torch.no_grad():\n        return x * 2\n\n"
                    "y = x.detach() * 3\n")
    result = invoke("show", path)
    assert result.exit_code == 2
    assert ".detach() on line 8" in result.stderr
    assert "torch.no_grad() on line" not in result.stderr


def test_the_first_non_finite_value_names_its_producer_and_line() -> None:
    (found,) = [f for f in findings(EXPLAINED / "log_of_zero.py") if f["code"] == "nan-value"]
    assert found["message"] == ("pass 1: loss is Inf, and its first Inf was made in the "
                                "forward at line 8 `y = torch.log(h)` (LogBackward0, y), of "
                                "finite inputs")
    assert found["node"] == "n1"
    assert (found["tensor"], found["line"]) == ("y", 8)
    assert found["hint"].startswith("log(0) is -inf")


def test_nan_data_is_told_at_its_leaf(tmp_path: Path) -> None:
    path = tmp_path / "s.py"
    path.write_text("import torch\nx = torch.tensor([1.0, float('nan')], requires_grad=True)\n"
                    "y = (x * 2).sum()\n")
    (found,) = [f for f in findings(path) if f["code"] == "nan-value"]
    assert found["message"] == ("pass 1: y is NaN, and its NaN was in x from the start (a "
                                "leaf: the data it was made from)")
    assert found["tensor"] == "x"


def test_nan_written_into_a_data_batch_is_no_optimizer_s(tmp_path: Path) -> None:
    """A corrupt sample written into a batch makes the forward raise (binary_cross_entropy
    checks its input): the batch holds NaN as the run ends. No optimizer holds it (it needs
    no grad), though the loop's optimizer stepped: it is not said to have written it; the
    healthy twin has no nan-value."""
    text = ("import torch\n"
            "import torch.nn.functional as F\n"
            "torch.manual_seed(0)\n"
            "model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Sigmoid())\n"
            "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
            "for step in range(1, 6):\n"
            "    data = torch.rand(4, 8)\n"
            "    if step == 3:\n"
            "        data[1, 2] = CORRUPT\n"
            "    opt.zero_grad()\n"
            "    loss = F.binary_cross_entropy(model(data), data)\n"
            "    loss.backward()\n"
            "    opt.step()\n")
    path = tmp_path / "batch.py"
    path.write_text(text.replace("CORRUPT", "float('nan')"))
    result = invoke("show", path, "--json")
    assert result.exit_code == 2 and "all elements of input should be between 0 and 1" in \
        result.stderr
    (found,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "nan-value"]
    assert found["message"] == ("data holds NaN values as the run ends (a tensor without "
                                "grad: data, as the code made, loaded or wrote it)")
    path.write_text(text.replace("CORRUPT", "0.5"))
    assert not [f for f in findings(path) if f["code"] == "nan-value"]


def test_a_loss_rebuilt_from_item_inside_a_function_is_one_cut_not_also_no_graph(
        tmp_path: Path) -> None:
    """`loss = torch.tensor(out.item(), requires_grad=True)` in the function a loop calls
    (a Trainer's compute_loss): the passes' cut is told at its line. No named tensor has a
    graph at the end, and "ran under torch.no_grad() or was detached" was told beside it (and
    the run exited 2), which is wrong; at module level the cut was told alone."""
    body = ("import torch\n"
            "torch.manual_seed(0)\n"
            "model = torch.nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "x, y = torch.randn(16, 4), torch.randn(16, 1)\n"
            "def compute_loss():\n"
            "    out = ((model(x) - y) ** 2).mean()\n"
            "    loss = torch.tensor(out.item(), requires_grad=True)\n"
            "    return loss\n"
            "for step in range(10):\n"
            "    opt.zero_grad()\n"
            "    loss = compute_loss()\n"
            "    loss.backward()\n"
            "    opt.step()\n")
    path = tmp_path / "item.py"
    path.write_text(body)
    assert [(f["code"], f["line"]) for f in findings(path)] == [
        ("graph-cut", 8), ("step-without-gradient", 14)]
    # returned unnamed, no line is known to have cut it: still no graph, said for what it is
    path.write_text(body.replace("    loss = torch.tensor(out.item(), requires_grad=True)\n"
                                 "    return loss\n",
                                 "    return torch.tensor(out.item(), requires_grad=True)\n"))
    result = invoke("show", path)
    assert result.exit_code == 2, result.stderr
    assert "model.weight, model.bias, loss require grad, but the backward passes ran from " \
        "loss, a leaf made from values" in " ".join(result.stderr.split())
    assert "no_grad" not in result.stderr


# A training library's loop, in an installed package below the script's folder: it runs the
# backward of what the script's compute_loss returns, divided as a Trainer divides it.
LIBRARY_LOOP = """def fit(model, opt, compute_loss, x, y, steps, divide):
    for _ in range(steps):
        opt.zero_grad()
        loss = compute_loss(model, x, y)
        (loss / 2 if divide else loss).backward()
        opt.step()
"""


@pytest.mark.parametrize("divide", [True, False])
def test_a_loss_rebuilt_from_item_whose_backward_a_library_runs_is_cut_at_its_line(
        tmp_path: Path, divide: bool) -> None:
    """compute_loss returns `torch.tensor(loss.item(), requires_grad=True)` to a library
    that runs its backward (a Hugging Face Trainer's): no frame of the script's names the
    root when it runs, and the graph-cut was missing. The healthy twin gets none."""
    library = tmp_path / "site-packages"
    library.mkdir()
    (library / "trainlib.py").write_text(LIBRARY_LOOP)
    body = ("import sys\n"
            "import torch\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from trainlib import fit\n"
            "torch.manual_seed(0)\n"
            "model = torch.nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "x, y = torch.randn(16, 4), torch.randn(16, 1)\n"
            "def compute_loss(model, x, y):\n"
            "    loss = ((model(x) - y) ** 2).mean()\n"
            "    loss = torch.tensor(loss.item(), requires_grad=True)\n"
            "    return loss\n"
            f"fit(model, opt, compute_loss, x, y, 3, {divide})\n")
    path = tmp_path / "train.py"
    path.write_text(body)
    result = invoke("show", path, "--json", "--", library)
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)["findings"]
    assert [(f["code"], f["line"]) for f in found if f["code"] == "graph-cut"] == [
        ("graph-cut", 11)]
    path.write_text(body.replace("    loss = torch.tensor(loss.item(), requires_grad=True)\n",
                                 ""))
    healthy = invoke("show", path, "--json", "--", library)
    assert healthy.exit_code == 0, healthy.stderr
    assert not [f for f in json.loads(healthy.stdout)["findings"]
                if f["severity"] != "info"]


def cut(path: Path) -> dict:
    (found,) = [f for f in findings(path) if f["code"] == "graph-cut"]
    return found


def test_a_root_without_a_graph_names_the_line_that_lost_it() -> None:
    found = cut(EXPLAINED / "cut_by_item.py")
    assert found["message"] == ("pass 1: loss has no graph because line 7 `loss = "
                                "torch.tensor(out.item())` made it so: torch.tensor(...) makes "
                                "a new leaf from values, without a graph")
    assert (found["tensor"], found["line"]) == ("loss", 7)


def test_a_no_grad_block_that_ran_is_named_one_that_did_not_is_not(tmp_path: Path) -> None:
    path = tmp_path / "s.py"
    path.write_text("import torch\nw = torch.ones(2, requires_grad=True)\n\n"
                    "def never():\n    loss = w.detach().sum()\n    return loss\n\n"
                    "with torch.no_grad():\n    loss = (w * 2).sum()\nloss.backward()\n")
    found = cut(path)
    assert "line 9 `loss = (w * 2).sum()`" in found["message"]
    assert found["message"].endswith("it ran inside torch.no_grad() (line 8)")


def test_a_leaf_no_root_reaches_names_the_line_that_cut_its_path() -> None:
    found = cut(EXPLAINED / "frozen_by_detach.py")
    assert found["message"] == ("w_enc reaches no root because line 10 `frozen = "
                                "features.detach()` took features (computed from w_enc) "
                                "without its graph: .detach() cuts it from the graph")
    assert (found["tensor"], found["line"], found["severity"]) == ("w_enc", 10, "warning")


def test_a_variable_called_data_cuts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.py"
    path.write_text("import torch\nw = torch.ones(2, requires_grad=True)\n"
                    "v = torch.ones(2, requires_grad=True)\ndata = w * 2\n"
                    "loss = (v * 3).sum() + data.sum().detach()\nloss.backward()\n")
    (found,) = [f for f in findings(path) if f["code"] == "graph-cut"]
    assert (found["tensor"], found["line"]) == ("w", 5)  # the .detach(), not `data`
    assert "took data (computed from w)" in found["message"]


def test_the_gallery_covers_every_finding_code() -> None:
    from gradtrace.findings.registry import CODES

    assert set(GALLERY_FINDINGS) == set(CODES)


@pytest.mark.parametrize("code", sorted(GALLERY_FINDINGS))
def test_each_finding_names_its_tensor_and_line(code: str) -> None:
    scenario, tensor, line, words = GALLERY_FINDINGS[code]
    found = gallery_finding(code)
    assert (found.get("tensor"), found["line"]) == (tensor, line)
    assert found["file"].endswith(scenario.rsplit("/", 1)[-1])
    assert words in found["message"] and (tensor is None or tensor in found["message"])


def test_a_model_whose_output_is_detached_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "s.py"
    path.write_text("import torch\nfrom torch import nn\n"
                    "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))\n"
                    "scale = torch.ones(1, requires_grad=True)\n"
                    "out = model(torch.randn(5, 4))\n"
                    "loss = nn.functional.mse_loss(out.detach() * scale, torch.randn(5, 1))\n"
                    "loss.backward()\n")
    (found,) = [f for f in findings(path) if f["code"] == "graph-cut"]
    assert found["message"].startswith("4 tensors of model (model.0.weight, …) reach no root "
                                       "because line 6 `loss = nn.functional.mse_loss(")
    assert "took out (computed from model) without its graph: .detach()" in found["message"]
    assert (found["tensor"], found["line"]) == ("model.0.weight", 6)


def test_the_detach_lesson_blames_the_detach_not_the_constant(tmp_path: Path) -> None:
    # seed 003: torch.tensor([2., 3., 5.]) is a constant factor; x keeps its graph through y
    path = tmp_path / "lesson.py"
    path.write_text("import torch\nx = torch.tensor(5.0, requires_grad=True)\n"
                    "y = x * torch.tensor([2.0, 3.0, 5.0])\nw = y.detach()\n"
                    "w.requires_grad_()\nz = w @ torch.tensor([4.0, 7.0, 9.0])\nz.backward()\n")
    result = invoke("show", path, "--json")
    (cut,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "graph-cut"]
    assert cut["line"] == 4 and "`w = y.detach()`" in cut["message"]
    assert ".detach() cuts it from the graph" in cut["message"]


def test_a_cut_by_data_is_named_with_its_line_and_a_fix_from_it(tmp_path: Path) -> None:
    path = tmp_path / "data.py"
    path.write_text("import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                    "h = x * 3\nout = (h.data * 2).sum()\nout.backward()\n")
    result = invoke("show", path, "--json")
    (cut,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "graph-cut"]
    assert cut["line"] == 4 and ".data is the tensor without its graph" in cut["message"]
    assert cut["hint"] == "at line 4, use the tensor itself, not its .data (its values without " \
        "the graph)"


def test_reading_a_non_leaf_grad_says_retain_grad_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "nonleaf.py"
    path.write_text("import torch\nx = torch.tensor(2.0, requires_grad=True)\ny = x ** 2\n"
                    "y.backward()\nprint(y.grad)\nz = x * 2\nz.retain_grad()\nz.backward()\n"
                    "print(z.grad)  # kept: retain_grad() ran\n")
    result = invoke("show", path, "--json")
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "nonleaf-grad"]
    assert [(f["tensor"], f["line"]) for f in found] == [("y", 5)]
    assert "y.retain_grad() before the backward" in found[0]["hint"]


def test_a_backward_gradtrace_ran_itself_says_so_where_the_flow_is_shown() -> None:
    result = invoke("show", "example:next_functions_walk")
    text = " ".join(result.stdout.split())
    assert "gradients of pass 1 by gradtrace, which ran this backward after the script (it " \
        "ran none) to show the flow" in text
    assert "pass 1 backward by gradtrace after the script ended: it ran no backward of its " \
        "own" in text
    assert "the script's own .grad stayed as it left them" in text


def test_a_lesson_s_tree_has_a_legend_and_the_table_no_empty_column() -> None:
    out = invoke("show", "example:chain_rule").stdout
    assert "  legend: n2 node id · [0] input slot it feeds · grad in: gradient received · " \
        "a × b: upstream × local derivative" in out
    assert "grad before ┃" not in out
    assert "grad before: None for every tensor (no .grad before the first backward)" in out
    many = " ".join(invoke("show", "example:two_paths_add_up").stdout.split())
    assert "this edge: one edge's share" in many  # x is reached by two edges


def test_a_backward_twice_error_is_said_in_full_once() -> None:
    result = invoke("show", "example:backward_twice_error")
    # the report once (stderr's error line is whole too when it goes elsewhere)
    said = " ".join(result.stdout.split())
    assert said.count("Trying to backward through the graph a second time") == 1
    assert "failed: RuntimeError (under findings)" in result.stdout
