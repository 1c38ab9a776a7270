"""A long loop's light passes (statistics only, made on the device as each pass ends): what
the trace still shows of them, and the passes it records in detail among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import show_json, write_script
from plain_python import run_plain

# A model built anew at step 60, inside the light stretch (passes 33–99): python's final
# model.0.weight is the new one. After each backward the script notes its .grad's norm.
REBUILT = """import json
import torch
torch.manual_seed(0)
data = torch.randn(8, 3)


def build():
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


model = build()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
norms = []
for step in range(150):
    if step == 60:
        model = build()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    opt.zero_grad()
    loss = model(data).pow(2).mean()
    loss.backward()
    norms.append(model[0].weight.grad.norm(dtype=torch.float64).item())
    opt.step()
print(json.dumps(norms))
"""


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[float], dict]:
    script = write_script(tmp_path_factory.mktemp("rebuilt"), REBUILT)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    trace = show_json(script)
    assert trace["stdout"] == plain.stdout
    return json.loads(plain.stdout), trace


def test_every_pass_s_row_is_python_s_model_built_anew_in_a_light_stretch_included(
        rebuilt: tuple[list[float], dict]) -> None:
    norms, trace = rebuilt
    steps = trace["steps"]
    column = steps["leaves"].index("model.0.weight")
    assert [row[column][0] for row in steps["grads"]] == pytest.approx(norms, rel=1e-9)


def test_the_graph_a_light_pass_made_shows_the_pass_in_detail_with_its_lines_and_modules(
        rebuilt: tuple[list[float], dict]) -> None:
    """The last pass (150) is light: its graph is the trace's, with the flow of pass 100
    (the latest in detail over a graph alike) and the lines and modules noted then."""
    _, trace = rebuilt
    passes = trace["passes"]
    assert [i for i, p in enumerate(passes, 1) if not p.get("light")] == [1, 100]
    ops = [n for n in trace["nodes"] if n["kind"] == "op"]
    assert ops and all(n["source"]["line"] == 19 for n in ops)  # loss = model(data)…
    assert {n["module"] for n in ops} >= {"model.0", "model.1", "model.2"}
    outputs = set(trace["outputs"])
    assert outputs <= set(passes[99]["flow"])  # pass 100's flow lies on the trace's graph
    assert passes[99]["roots"] == passes[149]["roots"] == trace["outputs"]


NOT_FINITE = """import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(8, 3)
for step in range(150):
    opt.zero_grad()
    x = data if step < 40 else data * float("nan")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
"""


def test_gradients_read_not_finite_put_the_next_passes_in_detail(tmp_path: Path) -> None:
    """Pass 41's NaN is read with its batch (64 rows, after pass 63): the 8 passes after
    that are recorded in detail, flow included, and kept (their gradients are NaN too)."""
    trace = show_json(write_script(tmp_path, NOT_FINITE))
    detailed = [i for i, p in enumerate(trace["passes"], 1) if not p.get("light")]
    assert detailed == [1, *range(64, 72), 100]
    born = [f for f in trace["findings"] if f["code"] == "nan-gradient"]
    assert born and born[0]["message"].startswith("pass 64: ")
    exploding = [f for f in trace["findings"] if f["code"] == "exploding-gradient"]
    assert any("at pass 41" in f["message"] for f in exploding)
