"""Training code that is healthy, though it calls zero_grad(), steps or freezes in ways the
optimizer findings watch (adversarial training, saliency after training, per-sample
clipping, multi-task heads, a frozen model after training, a physics-informed network's
inputs, a masked attention, a checkpoint reloaded for testing, L-BFGS's closure, with
micro-batches too): no warning or error; and three more bugs those findings name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import invoke, shared_invoke

FOLDER = Path(__file__).parent / "training"
HEALTHY = ("fgsm", "saliency", "dpsgd", "multitask", "posttrain_freeze", "pinn", "masked",
           "reload_for_test", "lbfgs_closure", "lbfgs_closure_micro_batches")


def _findings(name: str) -> list[tuple[str, str, int | None]]:
    result = shared_invoke("show", str(FOLDER / f"{name}.py"), "--json")
    assert result.exit_code == 0, result.stderr
    return [(f["severity"], f["code"], f["line"])
            for f in json.loads(result.stdout)["findings"]]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_training_code_gets_no_warning_or_error(name: str) -> None:
    assert [f for f in _findings(name) if f[0] != "info"] == []


@pytest.mark.parametrize(("name", "line"), [("zero_grad_zeros_before_step", 13),
                                            ("actor_critic_reset_before_step", 18)])
def test_a_reset_right_before_its_step_is_found(name: str, line: int) -> None:
    assert ("warning", "grad-discarded", line) in _findings(name)


def test_a_closure_without_zero_grad_is_found_from_l_bfgs_s_first_step() -> None:
    """L-BFGS steps with each call of its closure's gradient: a closure that never resets
    it sums them (two steps, 40 calls: the optimizer stepped once between them)."""
    result = shared_invoke("show", str(FOLDER / "lbfgs_closure_no_zero_grad.py"), "--json")
    trace = json.loads(result.stdout)
    found = [f for f in trace["findings"] if f["code"] == "grad-accumulating"]
    assert len(found) == 1 and found[0]["line"] == 12, trace["findings"]
    assert "across 40 calls of an optimizer step's closure" in found[0]["message"]
    assert "the closure does not call zero_grad()" in found[0]["message"]
    assert found[0]["hint"].startswith("call optimizer.zero_grad() in the closure")
    assert trace["steps"]["closure_call"] == list(range(1, 41))
    assert sum(trace["steps"]["optimizer_steps"]) == 1


@pytest.mark.parametrize("code", ["opt = torch.optim.SGD([], lr=0.1)",
                                  "opt = torch.optim.SGD([w], lr=0.1)\nopt.zero_grad(bogus=1)",
                                  "torch.nn.utils.clip_grad_norm_([w, None], 1.0)"])
def test_the_code_s_own_error_in_an_optimizer_call_is_the_code_s(tmp_path: Path,
                                                                 code: str) -> None:
    script = tmp_path / "s.py"
    script.write_text(f"import torch\nw = torch.ones(2, requires_grad=True)\n{code}\n")
    result = invoke("show", script)
    assert result.exit_code == 2 and "the scenario raised" in result.stderr, result.stderr
    assert "bug in gradtrace" not in result.stderr
