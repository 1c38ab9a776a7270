"""Every command once, with its numbers compared with plain PyTorch on the torch that runs the
tests: `python3 dev.py matrix` runs this file on each supported Python with a torch of the range."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    SCENARIOS,
    TORCH_LOG_LINE,
    invoke,
    printed_without_torch_logs,
    show_without,
    tensor,
    torch_warnings,
    write_script,
)
from plain_python import run_plain

pytestmark = [pytest.mark.matrix, pytest.mark.xdist_group("every_torch")]  # fixtures once

# A loop that prints, after each backward, the loss and each module's gradient norm (the root
# of its parameters' squared norms) as `steps` computes them.
LOOP = """import json
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 4)
calls = []
for step in range(5):
    opt.zero_grad()
    hidden = model[0](x)
    hidden.register_hook(lambda g: calls.append(1))
    loss = model[2](model[1](hidden)).pow(2).mean()
    loss.backward()
    norms = {name: sum(p.grad.norm().item() ** 2 for p in m.parameters()) ** 0.5
             for name, m in (("model.0", model[0]), ("model.2", model[2]))}
    print(json.dumps({"loss": loss.item(), **norms}))
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    opt.step()
print(json.dumps({n: p.grad.norm().item() for n, p in model.named_parameters()}))
print("hook calls", len(calls))
"""


def _show(*args: str | Path, own_process: bool = False) -> dict[str, Any]:
    """The trace `gradtrace show ARGS --json` prints; own_process: run in a python of its own
    (a compiled scenario: helpers.COMPILE_CRASH)."""
    if own_process:
        return json.loads(_shown_apart(*map(str, args)))
    result = invoke("show", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@functools.cache  # compiling takes seconds: a test that shows the same run shares it
def _shown_apart(*args: str) -> str:
    """The trace of `gradtrace show ARGS --json` in a python of its own, as JSON text."""
    return json.dumps(show_without(args[0], "", *args[1:])[0])


def without_logs(printed: str) -> list[str]:
    """Printed lines but torch's log lines (their times differ from run to run) and its
    warnings (shown again after a filter changed)."""
    lines = printed.splitlines()
    noise = torch_warnings(lines)
    return [line for i, line in enumerate(lines)
            if i not in noise and not TORCH_LOG_LINE.match(line)]


def _grads(trace: dict[str, Any]) -> dict[str, Any]:
    return {t["name"]: t["grad"] for t in trace["tensors"]}


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, float]], str]:
    """The loop script, what plain python printed at each step, and its whole output."""
    script = write_script(tmp_path_factory.mktemp("loop"), LOOP)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    steps = [json.loads(line) for line in plain.stdout.splitlines() if line.startswith("{")]
    assert len(steps) == 6 and plain.stdout.endswith("hook calls 5\n")
    return script, steps, plain.stdout


def test_show_of_a_bundled_example_has_the_chain_rule_s_numbers() -> None:
    trace = _show("example:chain_rule")
    # z = log(x**3) at x = 5: dz/dx = 3/x
    assert tensor(trace, "x")["grad"]["values"] == pytest.approx(0.6)
    assert trace["passes"][0]["kind"] == "backward"


def test_show_of_a_training_loop_matches_plain_pytorch(
        loop: tuple[Path, list[dict[str, float]], str]) -> None:
    script, steps, stdout = loop
    trace = _show(script)
    assert trace["stdout"] == stdout  # the hook ran once a step, the loss as under python
    assert len(trace["passes"]) == 5
    final = steps[-1]  # each .grad as the script left it, clipped
    assert set(final) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    for name, norm in final.items():
        assert tensor(trace, f"model.{name}")["grad"]["norm"] == pytest.approx(norm, rel=1e-5)


def test_steps_are_the_loss_and_norms_plain_pytorch_computes(
        loop: tuple[Path, list[dict[str, float]], str]) -> None:
    script, steps, _ = loop
    result = invoke("steps", script, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    steps = steps[:-1]  # the last line is the final .grad
    assert data["loss"] == pytest.approx([s["loss"] for s in steps], rel=1e-6)
    series = {s["name"]: s["norm"] for s in data["series"]}
    for name in ("model.0", "model.2"):
        # read when each pass ended, before clip_grad_norm_ changed .grad in place
        assert series[name] == pytest.approx([s[name] for s in steps], rel=1e-5), name


def test_check_of_a_custom_function_passes_and_of_a_wrong_one_fails(tmp_path: Path) -> None:
    assert invoke("check", SCENARIOS / "custom_sigmoid.py").exit_code == 0
    wrong = write_script(tmp_path, """import torch
class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x
    @staticmethod
    def backward(ctx, g):
        return 3 * g
x = torch.randn(3, dtype=torch.float64, requires_grad=True)
y = Twice.apply(x).sum()
""")
    result = invoke("check", wrong)
    assert result.exit_code == 1 and "Twice" in result.stdout


@pytest.mark.slow  # a process each, compiling: the quick tier compiles in-process (test_real)
@pytest.mark.parametrize(("script", "passes", "names"), [
    ("compile_tutorial.py", 4, {}), ("compiled_model.py", 3, {}),
    ("compiled_autograd.py", 4, {"hook.xh": "xh"}),  # the norms it prints, by its own names
])
def test_show_of_compiled_code_matches_plain_pytorch(script: str, passes: int,
                                                     names: dict[str, str]) -> None:
    path = SCENARIOS / "real" / script
    plain = run_plain(path)
    assert plain.returncode == 0, plain.stderr
    expected = json.loads(plain.stdout.splitlines()[-1])
    trace = _show(path, own_process=True)
    # what the script printed (the norms it read off .grad) is what it printed under python
    assert printed_without_torch_logs(trace["stdout"], plain.stderr) == plain.stdout
    # the script's backward calls, none of AOTAutograd's own while it compiled
    assert len(trace["passes"]) == passes
    assert all(p["kind"] == "backward" and p["error"] is None for p in trace["passes"])
    named = {t["name"] for t in trace["tensors"]}
    shown = {n: v for k, v in expected.items() if (n := names.get(k, k)) in named}
    assert shown
    for name, norm in shown.items():
        assert tensor(trace, name)["grad"]["norm"] == pytest.approx(norm, rel=1e-5), name
    assert not [f for f in trace["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("target", [
    "example:retain_grad", "example:tensor_hook", "LOOP",
    pytest.param(str(SCENARIOS / "real" / "compile_tutorial.py"), marks=pytest.mark.slow,
                 id="compile_tutorial")])  # as the test above shows it: that run is shared
def test_profile_changes_no_number(target: str,
                                   loop: tuple[Path, list[dict[str, float]], str]) -> None:
    """--profile replays a pass only where nothing the script sees can change: each .grad,
    each hook's count and the script's output are those of a run without it."""
    args = [loop[0]] if target == "LOOP" else [target]
    compiled = "compile" in target
    plain = _show(*args, own_process=compiled)
    profiled = _show(*args, "--profile", own_process=compiled)
    assert _grads(profiled) == _grads(plain)
    assert without_logs(profiled["stdout"]) == without_logs(plain["stdout"])
    assert [p.get("grad_changes") for p in profiled["passes"]] == \
        [p.get("grad_changes") for p in plain["passes"]]
    assert profiled["costs"]["nodes"]


def test_retain_grad_keeps_its_value_under_profile() -> None:
    """z.grad is 1 (it was 26 on torch 2.11 and 2.12: a replay ran retain_grad() again)."""
    trace = _show("example:retain_grad", "--profile")
    assert tensor(trace, "z")["grad"]["values"] == 1.0
    assert tensor(trace, "y")["grad"]["values"] == pytest.approx(1 / 125)
    assert "retain_grad() would set a .grad" in trace["costs"]["note"]


def test_dot_and_diff_of_saved_traces(tmp_path: Path) -> None:
    saved = tmp_path / "a.json"
    assert invoke("show", "example:chain_rule", "-o", saved).exit_code == 0
    mermaid = invoke("dot", saved, "-o", tmp_path / "a.mmd")
    assert mermaid.exit_code == 0 and (tmp_path / "a.mmd").read_text().startswith("flowchart")
    assert invoke("diff", saved, saved).exit_code == 0
    other = invoke("diff", saved, "example:chain_rule_vector")
    assert other.exit_code == 1
