"""The bug gallery (examples/bugs/): each bug people make in training code is found with
the line at fault, and its healthy twin (`*_fixed.py`) gets no warning or error finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import SCENARIOS, UNDER_TORCHRUN, invoke, shared_invoke, stopped_by_its_call

from gradtrace.capture.naming import setup_lines

# bug -> (its finding's code, the line at fault)
BUGS = {
    "accumulation_zero_grad_every_batch": ("grad-discarded", 22),
    "zero_grad_before_step": ("grad-discarded", 20),
    "step_before_backward": ("step-without-gradient", 19),
    "clip_before_backward": ("clip-without-gradient", 21),
    "accumulation_forgot_zero_grad": ("grad-accumulating", 22),
    "layers_in_list": ("not-optimized", 15),
    "head_after_optimizer": ("not-optimized", 23),
    "frozen_layer_left_in": ("frozen-in-optimizer", 25),
    "loss_rebuilt_from_item": ("graph-cut", 25),
    "weights_to_double": ("leaf-copied", 12),
    "running_loss_keeps_graph": ("graph-kept", 23),
    "inplace_residual": ("inplace-modified", 33),
    "hf_gpt2_accumulation": ("grad-discarded", 28),  # transformers and accelerate
    "lightning_zero_grad_before_step": ("grad-discarded", 23),  # lightning
    "rnn_hidden_not_detached": ("graph-freed", 24),
    "no_grad_helper": ("graph-cut", 17),
    "detach_in_forward": ("graph-cut", 34),
    "flow_scale_item": ("graph-cut", 39),  # not line 72, which logs after backward
}
# the codes of the training-code findings: none fires on any other example
TRAINING = {"grad-discarded", "step-without-gradient", "clip-without-gradient",
            "not-optimized", "frozen-in-optimizer", "leaf-copied", "graph-kept"}
# what a bug's own finding brings along: its steps change nothing; a frozen-on-purpose info
ALSO = {"loss_rebuilt_from_item": {"step-without-gradient"},
        "frozen_backbone": {"frozen-in-optimizer"}}
SCRIPTS = sorted(str(p.relative_to(SCENARIOS)) for p in SCENARIOS.rglob("*.py")
                 if UNDER_TORCHRUN not in p.parts)
# the bugs whose script raises, as under python: gradtrace shows it, then stops (exit 2)
STOPS = {"inplace_residual", "rnn_hidden_not_detached"}
TWINS = sorted(p.stem for p in (SCENARIOS / "bugs").glob("*_fixed.py"))


def _findings(name: str) -> list[dict[str, Any]]:
    result = shared_invoke("show", str(SCENARIOS / "bugs" / f"{name}.py"), "--json")
    assert result.stdout.lstrip().startswith("{"), result.stderr
    # a bug that raises stops where python stops, after its backward's error: exit 2
    assert stopped_by_its_call(result) if name in STOPS else result.exit_code == 0, \
        result.stderr
    return list(json.loads(result.stdout)["findings"])


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_bug_is_found_at_its_line(name: str) -> None:
    code, line = BUGS[name]
    found = [(f["code"], f["line"], f["severity"]) for f in _findings(name)
             if f["severity"] != "info"]
    assert any(f[:2] == (code, line) for f in found), found
    assert f"line {line}" in (SCENARIOS / "bugs" / f"{name}.py").read_text().split('"""')[1]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_bug_has_a_healthy_twin(name: str) -> None:
    assert f"{name}_fixed" in TWINS


@pytest.mark.parametrize("name", TWINS)
def test_healthy_twins_get_no_warning_or_error(name: str) -> None:
    assert [f for f in _findings(name) if f["severity"] != "info"] == []


def test_a_backbone_frozen_on_purpose_is_info_only() -> None:
    found = [(f["code"], f["severity"], f["line"]) for f in _findings("frozen_backbone")]
    assert found == [("frozen-in-optimizer", "info", 25)]


@pytest.mark.parametrize(("said", "meant"), [
    ("model.embed.requires_grad_(False)  # freeze the embeddings", True),
    ("    # fine-tune the head only\nmodel.embed.requires_grad_(False)", True),
    ("model.embed.requires_grad_(False)  # BUG: frozen, but still handed to the optimizer",
     False),
    ("# TODO: freeze only while warming up\nmodel.embed.requires_grad_(False)", False),
    ("model.embed.requires_grad_(False)  # frozen by mistake", False),
    ("model.embed.requires_grad_(False)", False),
])
def test_the_code_says_it_freezes_on_purpose_unless_it_calls_it_a_mistake(
        said: str, meant: bool) -> None:
    lines = ["import torch", *said.split("\n"), "optimizer = make(model.parameters())"]
    assert setup_lines.on_purpose(lines, len(said.split("\n")) + 1) is meant


def test_the_line_that_set_the_unheld_layers_and_no_missing_zero_grad() -> None:
    (finding,) = [f for f in _findings("layers_in_list") if f["code"] == "not-optimized"]
    assert "model.blocks[0].weight" in finding["message"]
    assert "built at line 26" in finding["message"]
    codes = {f["code"] for f in _findings("head_after_optimizer")}
    assert "grad-accumulating" not in codes  # its .grad grows: no optimizer resets it


@pytest.mark.parametrize("scenario", SCRIPTS)
def test_training_findings_fire_only_on_their_own_bugs(scenario: str) -> None:
    result = shared_invoke("show", str(SCENARIOS / scenario), "--json")
    if not result.stdout.lstrip().startswith("{"):
        pytest.skip("no trace")
    found = {f["code"] for f in json.loads(result.stdout)["findings"]} & TRAINING
    name = scenario.removeprefix("bugs/").removesuffix(".py")
    assert found <= {BUGS.get(name, ("", 0))[0], *ALSO.get(name, ())}, scenario


LBFGS_FIT = """\
import torch

torch.manual_seed(0)
x = torch.linspace(0, 1, 50).unsqueeze(1)
y = 3 * x + 0.5 + 0.05 * torch.randn(50, 1)
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=20)


def closure():
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for _ in range(5):
    optimizer.step(closure)
print(float(closure()))
"""


def test_an_lbfgs_fit_with_its_closure_is_healthy(tmp_path: Path) -> None:
    script = tmp_path / "fit.py"
    script.write_text(LBFGS_FIT)
    result = invoke("show", script, "--json")
    trace = json.loads(result.stdout)
    assert len(trace["passes"]) > 10  # the closure's passes, inside each step
    assert [f for f in trace["findings"] if f["severity"] != "info"] == []


def test_a_carried_hidden_state_is_named_as_the_link() -> None:
    (f,) = [f for f in _findings("rnn_hidden_not_detached") if f["code"] == "graph-freed"]
    assert f["tensor"] == "hidden" and "`hidden.detach()`" in f["hint"]
