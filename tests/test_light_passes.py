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
    """Pass 41's NaN is read with its batch (64 vectors at most): the 8 passes after that
    are recorded in detail, flow included, and kept (their gradients are NaN too)."""
    trace = show_json(write_script(tmp_path, NOT_FINITE))
    detailed = [i for i, p in enumerate(trace["passes"], 1) if not p.get("light")]
    chased = [i for i in detailed if i > 41][:8]  # (pass 100 is in detail anyway)
    assert chased == list(range(chased[0], chased[0] + 8)) and chased[0] <= 41 + 64
    born = [f for f in trace["findings"] if f["code"] == "nan-gradient"]
    assert born and born[0]["message"].startswith(f"pass {chased[0]}: ")
    exploding = [f for f in trace["findings"] if f["code"] == "exploding-gradient"]
    assert any("at pass 41" in f["message"] for f in exploding)


TWO_GRAPHS = """import torch
torch.manual_seed(0)
critic = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
maker = torch.nn.Linear(4, 2)
c_opt = torch.optim.SGD(critic.parameters(), lr=0.01)
m_opt = torch.optim.SGD(maker.parameters(), lr=0.01)
real = torch.randn(16, 2)
for step in range(120):
    c_opt.zero_grad()
    c_loss = critic(maker(torch.randn(16, 4)).detach()).mean() - critic(real).mean()
    c_loss.backward()
    c_opt.step()
    m_opt.zero_grad()
    m_loss = -critic(maker(torch.randn(16, 4))).mean()
    m_loss.backward()
    m_opt.step()
"""


def test_each_graph_light_steps_ran_over_keeps_its_lines_and_modules(tmp_path: Path) -> None:
    """A GAN's two graphs, each last run by a light pass: both are shown with the lines and
    modules of the latest pass in detail over each."""
    trace = show_json(write_script(tmp_path, TWO_GRAPHS))
    assert trace["passes"][-1].get("light") and trace["passes"][-2].get("light")
    ops = [n for n in trace["nodes"] if n["kind"] == "op"]
    lines = {n["source"]["line"] for n in ops if n["source"] is not None}
    assert all(n["source"] is not None for n in ops), [n["type"] for n in ops if not n["source"]]
    assert lines == {10, 14}
    assert {n["module"] for n in ops} >= {"critic.0", "critic.2", "maker"}


HOOKED = """import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
data = torch.randn(8, 3)
for step in range(60):
    model.zero_grad()
    hidden = model[0](data)
    hidden.register_hook(lambda g: g * 0.5)
    loss = model[2](model[1](hidden)).pow(2).mean()
    loss.backward()
"""


def test_a_loop_with_tensor_hooks_is_recorded_in_detail_forwards_included(
        tmp_path: Path) -> None:
    trace = show_json(write_script(tmp_path, HOOKED))
    assert not any(p.get("light") for p in trace["passes"][-1:])
    ops = [n for n in trace["nodes"] if n["kind"] == "op"]
    assert ops and all(n["source"] is not None for n in ops)


@pytest.mark.parametrize("function", ["backward", "grad"])
def test_each_pass_s_arguments_are_bound_as_python_binds_them(function: str) -> None:
    """The pass wrapper's quick binding of torch.autograd.backward's and grad's arguments
    gives what inspect's does, defaults included, and refuses what it refuses."""
    import inspect

    import torch

    from gradtrace.capture.passes.patches import _binder

    original = getattr(torch.autograd, function)
    signature = inspect.signature(original)
    bind = _binder(signature)
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    calls = [((y,), {}), ((y, None, None, False), {"inputs": None}), ((y,), {"retain_graph": True}),
             ((), {"tensors" if function == "backward" else "outputs": y, "inputs": [x]}),
             ((y, [x]), {"create_graph": True}), ((y,), {"no_such": 1}), ((), {}),
             ((y,), {"tensors" if function == "backward" else "outputs": y}), ((y,) * 10, {})]
    for args, kwargs in calls:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            with pytest.raises(TypeError):
                bind(args, kwargs)
            continue
        bound.apply_defaults()
        given = bind(args, kwargs)
        assert list(given) == list(bound.arguments)
        assert all(given[name] is value for name, value in bound.arguments.items())
