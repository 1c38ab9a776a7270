"""Training loops: one step's graph, every step's light statistics (equal to plain PyTorch's),
full flow for a bounded set of passes, create_graph styling only where it is true."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import SCENARIOS, as_read, invoke, show_json
from plain_python import run_plain

LOOPS = SCENARIOS / "loops"


def node_lines(dot: str) -> list[str]:
    return re.findall(r"^  n\d+ \[.*$", dot, re.MULTILINE)


def test_a_30_step_loop_draws_one_steps_graph_without_create_graph_styling() -> None:
    default = invoke("dot", LOOPS / "mlp_30_steps.py")
    first = invoke("dot", LOOPS / "mlp_30_steps.py", "--pass", "1")
    every = invoke("dot", LOOPS / "mlp_30_steps.py", "--pass", "all")
    assert default.exit_code == first.exit_code == every.exit_code == 0
    assert len(node_lines(default.stdout)) == len(node_lines(first.stdout)) > 0
    assert len(node_lines(every.stdout)) > 20 * len(node_lines(first.stdout)) // 2
    assert not any("dashed" in line for line in node_lines(default.stdout))


def test_only_the_nodes_a_create_graph_pass_made_are_a_gradients_graph() -> None:
    trace = show_json("second_derivative.py")
    styled = {n["type"] for n in trace["nodes"] if n.get("grad_graph")}
    plain = {(n["type"], n["tensor"]) for n in trace["nodes"] if not n.get("grad_graph")}
    assert ("LogBackward0", "z") in plain and ("PowBackward0", "y") in plain
    made_at = {n["source"]["line"] for n in trace["nodes"] if n.get("grad_graph")}
    assert made_at == {9} and "MulBackward0" in styled  # line 9: backward(create_graph=True)
    # the seed's autograd.grad(create_graph=True) makes a gradient never differentiated
    # again: the graph shown is the forward's, so nothing in it is a gradient's graph
    cube = show_json("double_backward_cube.py")
    assert cube["passes"][0]["create_graph"] and not any(n.get("grad_graph")
                                                         for n in cube["nodes"])
    assert not any(n.get("grad_graph") for n in show_json(LOOPS / "mlp_30_steps.py")["nodes"])


def test_a_1000_step_loop_runs_to_its_end_in_80_lines_with_bounded_detail() -> None:
    shown = invoke("show", LOOPS / "mlp_1000_steps.py", env={"COLUMNS": "120"})
    assert shown.exit_code == 0, shown.stderr
    assert len(shown.stdout.splitlines()) <= 80
    words = " ".join(shown.stdout.split())  # the header wraps where the scenario's path is long
    assert "1000 passes over the same graph of 9 ops" in words
    assert "passes 2–999 backward at line" in words
    trace = show_json(LOOPS / "mlp_1000_steps.py")
    assert len(trace["passes"]) == 1000 and len(trace["steps"]["grads"]) == 1000
    assert [i for i, p in enumerate(trace["passes"]) if p["flow"]] == [0, 999]
    assert all(p.get("light") for p in trace["passes"][1:999])
    assert sum(trace["steps"]["optimizer_steps"]) == 999  # steps taken before passes 2…1000


STEP_NORMS = '''
import json, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
norms = []
for step in range(12):
    opt.zero_grad(set_to_none=step % 2 == 0)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    norms.append([loss.item()] + [p.grad.norm().item() for p in model.parameters()])
    opt.step()
print(json.dumps(norms))
'''


def test_every_steps_statistics_equal_plain_pytorchs(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text(STEP_NORMS)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    expected = json.loads(plain.stdout)
    steps = show_json(script)["steps"]
    assert steps["leaves"] == ["model.0.weight", "model.0.bias", "model.2.weight",
                               "model.2.bias"]
    assert steps["modules"] == ["model.0", "model.0", "model.2", "model.2"]
    for row, loss, grads in zip(expected, steps["loss"], steps["grads"], strict=True):
        assert loss == pytest.approx(row[0], rel=1e-6)
        assert [g[0] for g in grads] == pytest.approx(row[1:], rel=1e-5)
        assert all(g[2] for g in grads)  # finite
        assert not any(g[3] for g in grads)  # zero_grad before every pass: nothing kept
    assert steps["optimizer_steps"] == [0] + [1] * 11
    assert steps["optimizer_steps_after"] == 1  # the step after the last pass counts too
    assert "12 passes, 12 optimizer steps" in invoke("show", script).stdout


def test_a_forgotten_zero_grad_is_kept_and_a_reset_one_is_not(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text("import torch\nw = torch.ones(2, requires_grad=True)\n"
                      "opt = torch.optim.SGD([w], lr=0.01)\n"
                      "for step in range(4):\n"
                      "    if step == 2:\n        opt.zero_grad()\n"
                      "    (w * 3).sum().backward()\n    opt.step()\n")
    kept = [row[0][3] for row in show_json(script)["steps"]["grads"]]
    assert kept == [False, True, False, True]


def test_pass_out_of_range_or_not_a_number_is_exit_2() -> None:
    for value in ("31", "zero"):
        result = invoke("show", LOOPS / "mlp_30_steps.py", "--pass", value)
        assert result.exit_code == 2 and "error:" in result.stderr, value


def test_a_diff_of_two_loops_names_the_changed_layer_once(tmp_path: Path) -> None:
    changed = tmp_path / "mlp_30_steps_tanh.py"
    source = (LOOPS / "mlp_30_steps.py").read_text()
    changed.write_text(source.replace("nn.ReLU()", "nn.Tanh()", 1))
    result = invoke("diff", LOOPS / "mlp_30_steps.py", changed, "--json")
    assert result.exit_code == 1
    diff = json.loads(result.stdout)
    assert [(n["a"]["type"], n["b"]["type"]) for n in diff["nodes"]] == [
        ("ReluBackward0", "TanhBackward0")]
    moved = [g["tensor"] for g in diff["gradients"]]
    assert len(moved) == len(set(moved)) == 6  # each parameter once, not once per step


def test_a_grad_zeroed_in_place_between_passes_is_read_again(tmp_path: Path) -> None:
    """A leaf the second pass does not reach keeps its .grad, but zero_grad(set_to_none=False)
    zeroed it in between: its row says 0, not the last pass's norm."""
    script = tmp_path / "loop.py"
    script.write_text("import torch\na = torch.ones(2, requires_grad=True)\n"
                      "b = torch.ones(2, requires_grad=True)\n"
                      "opt = torch.optim.SGD([a, b], lr=0.1)\n"
                      "(a * b * 3).sum().backward()\nopt.zero_grad(set_to_none=False)\n"
                      "(b * 2).sum().backward()\n")
    steps = show_json(script)["steps"]
    a = steps["leaves"].index("a")
    assert steps["grads"][0][a][0] == pytest.approx(3 * 2 ** 0.5)
    assert steps["grads"][1][a][0] == 0.0


CLIPPED_LOOP = """import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=8.0, enabled=sys.argv[1:] == ["scaled"])
for step in range(5):
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).sum()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    scaler.step(opt)
    scaler.update()
    print(float(norm), loss.item())
"""


@pytest.mark.parametrize("scaled", [False, True])
def test_every_pass_shows_the_grad_its_backward_wrote_before_a_clip(tmp_path: Path,
                                                                     scaled: bool) -> None:
    """clip_grad_norm_ (and GradScaler.unscale_ before it) change .grad in place after the
    pass: the last step read 'values unavailable (changed in place after the pass)' while
    the first showed its values. Each pass's .grad now is what its backward wrote: its norm
    is the norm clip_grad_norm_ returned (times the scale, which unscale_ divides out)."""
    script = tmp_path / "clipped.py"
    script.write_text(CLIPPED_LOOP)
    result = invoke("show", script, "--json", "--", *(["scaled"] if scaled else []))
    assert result.exit_code == 0, result.stderr
    trace = as_read(result.stdout)
    printed = [[float(x) for x in line.split()] for line in trace["stdout"].splitlines()]
    norms = [norm for norm, _ in printed]  # what plain python prints
    # the loss is the script's, not GradScaler's scaled one (it read 8× the loss)
    assert trace["steps"]["loss"] == pytest.approx([loss for _, loss in printed], rel=1e-6)
    scale = 8.0 if scaled else 1.0
    first, last = trace["passes"][0], trace["passes"][-1]
    for passed, norm in ((first, norms[0]), (last, norms[-1])):
        after = [c["after"] for c in passed["grad_changes"]]
        assert all(a["values"] is not None for a in after), after
        total = sum(a["norm"] ** 2 for a in after) ** 0.5
        assert total == pytest.approx(norm * scale, rel=1e-5)


def test_a_saved_run_shows_a_pass_kept_in_full_and_says_what_it_kept_of_the_others(
        tmp_path: Path) -> None:
    saved = tmp_path / "run.json"
    assert invoke("show", LOOPS / "mlp_30_steps.py", "-o", saved).exit_code == 0
    passes = json.loads(saved.read_text())["passes"]
    full = [i for i, p in enumerate(passes, 1) if not p.get("light")]
    light = next(i for i, p in enumerate(passes, 1) if p.get("light"))
    kept = invoke("show", saved, "--pass", str(full[-1]))
    assert kept.exit_code == 0 and f"gradients of pass {full[-1]} " in kept.stdout
    # the report says which passes it keeps in full
    assert full == [1, 30] and "(passes 1–30; kept in full: 1, 30, the others' statistics " \
        "only)" in " ".join(invoke("show", saved).stdout.split())
    loss = json.loads(saved.read_text())["steps"]["loss"][light - 1]
    for command in (("show",), ("dot", "--grads")):
        result = invoke(*command, saved, "--pass", str(light))
        assert result.exit_code == 2 and not result.stdout, command
        assert (f"--pass {light}: this trace kept only the light statistics of pass {light} "
                f"(loss {loss:.4g}; .grad norm ") in result.stderr
        assert f"passes kept in full: {full[0]}" in result.stderr
        assert f"--pass {light} -o FILE" in result.stderr and "Traceback" not in result.stderr
    # recorded with it, the pass is kept in full
    again = invoke("show", LOOPS / "mlp_30_steps.py", "--pass", str(light))
    assert again.exit_code == 0 and f"gradients of pass {light} " in again.stdout
    out_of_range = invoke("show", saved, "--pass", str(len(passes) + 1))
    assert out_of_range.exit_code == 2 and "error:" in out_of_range.stderr
    assert "the scenario ran 30 pass(es)" in out_of_range.stderr
