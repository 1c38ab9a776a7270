"""No false alarms about graph cuts. A cut is blamed only on a line that ran before the
backward it explains (a loop's logging after backward() cuts nothing); a detach in a
module's forward() names the module whose forward holds the line, and `dot` draws it; a
torch.autograd.grad a library runs inside its own code is not the default graph when the
script's own backward ran; a target copy (updated-copy) gets no graph-cut."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from helpers import SCENARIOS, as_read, invoke, shared_invoke, write_script

from gradtrace.model import Edge, Finding, Node, Source, Trace
from gradtrace.render.dot import to_dot
from gradtrace.render.drawing import drawing
from gradtrace.render.mermaid import to_mermaid

BUGS = SCENARIOS / "bugs"


def _findings(script: Path, *args: str) -> list[dict[str, Any]]:
    result = invoke("show", script, "--json", *args)
    assert result.stdout.lstrip().startswith("{"), result.stderr
    return list(json.loads(result.stdout)["findings"])


def _cuts(found: list[dict[str, Any]]) -> list[tuple[int | None, str]]:
    return [(f["line"], f["message"]) for f in found if f["code"] == "graph-cut"]


UNUSED_LAYER = """import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.unused = nn.Linear(4, 4)

    def forward(self, x):
        {count}
        return self.fc(x)


torch.manual_seed(0)
model = Net()
history = []
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    logged = loss.data.numpy()
    history.append(logged)
"""


def test_a_line_after_the_backward_is_never_the_cut(tmp_path: Path) -> None:
    # the layer no root reaches was never used: the logging after backward cut nothing
    script = write_script(tmp_path, UNUSED_LAYER.format(count="pass"))
    found = _findings(script)
    assert _cuts(found) == []
    assert [f["tensor"] for f in found if f["code"] == "unreached-leaf"] == [
        "model.unused.weight", "model.unused.bias"]


def test_a_value_taken_in_forward_of_no_unreached_tensor_is_no_cut(tmp_path: Path) -> None:
    # .item() in forward() counts where it takes the module's own unreached tensor only
    script = write_script(tmp_path, UNUSED_LAYER.format(
        count="n = int((x > 0).sum().item()) + self.fc.weight.abs().max().item()"))
    assert _cuts(_findings(script)) == []


def test_the_flow_s_cut_is_its_item_not_the_logging_after_backward() -> None:
    result = shared_invoke("show", str(BUGS / "flow_scale_item.py"), "--json")
    ((line, message),) = _cuts(json.loads(result.stdout)["findings"])
    assert line == 39 and "`scale = self.log_scale.exp().item()` in Scale.forward of " \
        "flow.layers.3" in message and ".item() turns it into a Python number" in message
    assert "numpy" not in message


REBUILT = """import torch

w = torch.ones(3, requires_grad=True)


def compute(w):
    return torch.tensor((w * 2).sum().item(), requires_grad=True)


for step in range(2):
    loss = compute(w)
    loss.backward()
    loss = loss.item()
"""


def test_a_root_rebound_after_its_backward_is_not_what_cut_it(tmp_path: Path) -> None:
    assert _cuts(_findings(write_script(tmp_path, REBUILT))) == []


def test_a_detach_in_forward_names_the_module_whose_forward_holds_it() -> None:
    result = shared_invoke("show", str(BUGS / "detach_in_forward.py"), "--json")
    trace = as_read(result.stdout)
    ((line, message),) = _cuts(trace["findings"])
    assert line == 34
    assert "in Classifier.forward of model.model took a value without its graph" in message
    (cut,) = [f for f in trace["findings"] if f["code"] == "graph-cut"]
    node = next(n for n in trace["nodes"] if n["id"] == cut["node"])
    # where the detached features are used: the head's first layer, made by that line
    assert (node["type"], node["module"], node["source"]["line"]) == \
        ("AddmmBackward0", "model.model.head.0", 34)


def test_dot_and_mermaid_draw_the_cut_to_where_it_is_used() -> None:
    trace = json.loads(shared_invoke("show", str(BUGS / "detach_in_forward.py"),
                                     "--json").stdout)
    (cut,) = [f for f in trace["findings"] if f["code"] == "graph-cut"]
    dot = invoke("dot", BUGS / "detach_in_forward.py", "-q").stdout
    assert 'cut0 [label="✂ graph cut at line 34", shape=note' in dot
    assert f'cut0 -> {cut["node"]} [style=dashed, color="#c62828"' in dot
    assert "legend_cut" in dot
    mermaid = invoke("dot", BUGS / "detach_in_forward.py", "-q", "--to", "mmd").stdout
    assert f"cut0 -.-> {cut['node']}" in mermaid
    healthy = invoke("dot", BUGS / "detach_in_forward_fixed.py", "-q").stdout
    assert "cut0" not in healthy and "legend_cut" not in healthy


def _trace(findings: tuple[Finding, ...]) -> Trace:
    here = Source("s.py", 3, "y = f(h.detach())")
    return Trace("s.py", "0", "2", ("n0",), ("y",), "", (
        Node("n0", "MulBackward0", "op", "y", source=here),
        Node("n1", "AccumulateGrad", "leaf", "w")), (Edge("n1", "n0", 1, 0),), (), (),
        findings)


def test_a_cut_is_drawn_from_the_trace_alone() -> None:
    cut = Finding("graph-cut", "warning", "w reaches no root …", tensor="w", node="n0",
                  file="s.py", line=3)
    picture = drawing(_trace((cut,)))
    assert ("cut0", ("✂ graph cut at line 3",), "cut", None) in picture.boxes
    assert picture.cuts == [("cut0", "n0", None)] and "cut0" not in str(picture.arrows)
    assert picture.tooltips["cut0"] == "w reaches no root …"
    assert "cut0 -> n0 [style=dashed" in to_dot(picture)
    assert "cut0 -.-> n0\n  linkStyle 2 stroke:#c62828" in to_mermaid(picture)  # 2 arrows before
    # a finding without a node, or with one the graph does not hold, draws nothing
    for node in (None, "n7"):
        assert drawing(_trace((replace(cut, node=node),))).cuts == []


LIBRARY = '''import torch
import torch.nn as nn


class ContinuousFlow(nn.Module):
    """One Euler step of a continuous flow, its divergence by torch.autograd.grad (as
    FFJORD computes it)."""

    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 16), nn.Tanh(), nn.Linear(16, dim))

    def log_prob(self, x):
        x = x.requires_grad_(True)
        f = self.net(x)
        divergence = 0.0
        for i in range(x.shape[1]):
            divergence = divergence + torch.autograd.grad(
                f[:, i].sum(), x, create_graph=True)[0][:, i]
        return -0.5 * ((x + 0.1 * f) ** 2).sum(1) + 0.1 * divergence
'''
TRAIN = """import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lib"))
import torch
from tinyflow import ContinuousFlow

torch.manual_seed(0)
flow = ContinuousFlow(2)
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-2)
for step in range(3):
    loss = -flow.log_prob(torch.randn(32, 2)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
flow.eval()
test_log_prob = flow.log_prob(torch.randn(8, 2)).mean().item()
"""


def test_the_default_graph_is_the_loss_s_backward_not_a_library_s_grad(
        tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "run").mkdir()
    write_script(tmp_path / "lib", LIBRARY, "tinyflow.py")
    script = write_script(tmp_path / "run", TRAIN, "train.py")
    result = invoke("show", script)
    assert result.exit_code == 0, result.stderr
    # 3 steps of 2 grads (the library's) and a backward, then the library's 2 in eval
    assert "11 passes" in result.stdout
    assert "output loss  (the roots of the scenario's last backward pass, at line 14;" in \
        result.stdout
    assert "gradients of pass 9 at line 14 `loss.backward()`" in result.stdout
    assert "no gradient in this pass" not in result.stdout
    # the script's own torch.autograd.grad is its default graph, as before
    own = write_script(tmp_path / "run", "import torch\nx = torch.ones(2, requires_grad=True)"
                       "\nloss = (x * x).sum()\nloss.backward()\n"
                       "(g,) = torch.autograd.grad((x ** 3).sum(), x)\n", "own.py")
    assert "gradients of pass 2 at line 5" in invoke("show", own).stdout


# An actor-critic's episode (pytorch/examples' actor_critic.py keeps (log_prob, value) pairs
# in a list): the critic's values are detached as its loss is built ({loss}).
ACTOR_CRITIC = """import torch

torch.manual_seed(0)
actor, critic = torch.nn.Linear(4, 2), torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
saved = []
for episode in range(3):
    for t in range(5):
        s = torch.randn(4)
        log_prob = torch.log_softmax(actor(s), -1)[0]
        saved.append((log_prob, critic(s)))
    optimizer.zero_grad()
    losses = []
    rewards = []
    for log_prob, value in saved:
        rewards.append(value.item())  # logged: a value read, no loss of the graph's
{loss}
    loss = torch.stack(losses).sum()
    loss.backward()
    optimizer.step()
    del saved[:]
"""


def test_a_detach_in_the_training_loop_is_the_cut_of_what_it_detached(tmp_path: Path) -> None:
    # the values flow through a list (append) and a for loop into the loss: the cut once went
    # unnamed (unreached-leaf only, its hint to call value.backward())
    for loss, line in [
            ("        losses.append(-log_prob + (value.detach() - 1.0).pow(2).sum())", 17),
            ("        v = value.detach()\n        losses.append(-log_prob + (v - 1.0) ** 2)", 17)]:
        script = write_script(tmp_path, ACTOR_CRITIC.format(loss=loss))
        (cut,) = _cuts(_findings(script))
        assert cut[0] == line, cut
        assert "took value (computed from critic) without its graph: .detach()" in cut[1]
    healthy = write_script(tmp_path, ACTOR_CRITIC.format(
        loss="        losses.append(-log_prob + (value - 1.0).pow(2).sum())"), "healthy.py")
    assert [f for f in _findings(healthy) if f["severity"] != "info"] == []


LBFGS_DETACH = """import torch
torch.manual_seed(0)
enc, head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
opt = torch.optim.LBFGS([*enc.parameters(), *head.parameters()], lr=0.5)
for step in range(3):
    def closure():
        opt.zero_grad()
        h = CUT
        loss = ((head(h) - y) ** 2).mean()
        loss.backward()
        return loss
    opt.step(closure)
"""


def test_lbfgs_adding_zeros_to_a_cut_off_layer_is_no_update_of_a_copy(tmp_path: Path) -> None:
    """L-BFGS adds its flat update, zeros where backward never reached, to every parameter:
    a new version of the same values. A layer a .detach() cut off was called an EMA or target
    copy (info), and the cut went untold; it is told at its line, as under Adam. Uncut, the
    twin has neither."""
    cut = _findings(write_script(tmp_path, LBFGS_DETACH.replace("CUT", "enc(x).detach()")))
    assert [(f["code"], f["line"]) for f in cut] == [
        ("unreached-leaf", 3), ("unreached-leaf", 3), ("graph-cut", 9)]
    assert not _findings(write_script(tmp_path, LBFGS_DETACH.replace("CUT", "enc(x)"),
                                      "uncut.py"))
