"""A forgotten zero_grad() on the shapes real training code has: a small transformer with
AdamW, a cosine schedule and clip_grad_norm_ (which rescales every .grad in place, so the
norm stops growing), a CNN under autocast with a GradScaler (which unscales .grad in place),
and the healthy loops beside them, deliberate accumulation included, which stay unflagged.
The steps' statistics are checked against what plain PyTorch computed in the same run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SCENARIOS, invoke, shared_invoke, write_script

TRANSFORMER = """
import math, torch
import torch.nn as nn

torch.manual_seed(0)

class TinyLM(nn.Module):
    def __init__(self, vocab=50, width=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.block = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.block(self.embed(tokens)))

model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=12)
data = torch.randint(0, 50, (12, 4, 9))
ACCUMULATE = {accumulate}
norms = []
for step, batch in enumerate(data):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    {reset}
    logits = model(inputs)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 50), targets.reshape(-1))
    (loss / ACCUMULATE).backward()
    norms.append(model.head.weight.grad.norm().item())  # as backward left it
    if (step + 1) % ACCUMULATE == 0:
        {clip}
        optimizer.step()
        schedule.step()
        {reset_after}
print("NORMS", norms)
"""

CNN = """
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
images, labels = torch.randn(10, 4, 3, 8, 8), torch.randint(0, 4, (10, 4))
norms = []
for x, y in zip(images, labels):
    {reset}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x).float(), y)
    scaler.scale(loss).backward()
    norms.append(model[3].weight.grad.norm().item() / scaler.get_scale())  # as stepped with
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    scaler.step(optimizer)
    scaler.update()
print("NORMS", norms)
"""

ZERO = "optimizer.zero_grad()"
CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)"
CASES = {  # name: (script, forgotten)
    "transformer, clipped, zero_grad forgotten": (
        TRANSFORMER.format(accumulate=1, reset="pass", clip=CLIP, reset_after="pass"), True),
    "transformer, not clipped, zero_grad forgotten": (
        TRANSFORMER.format(accumulate=1, reset="pass", clip="pass", reset_after="pass"), True),
    "transformer, clipped, zero_grad each step": (
        TRANSFORMER.format(accumulate=1, reset=ZERO, clip=CLIP, reset_after="pass"), False),
    "transformer, clipped, .grad zeroed in place": (
        TRANSFORMER.format(accumulate=1, reset="optimizer.zero_grad(set_to_none=False)",
                           clip=CLIP, reset_after="pass"), False),
    "transformer, clipped, accumulating 4 micro-batches on purpose": (
        TRANSFORMER.format(accumulate=4, reset="pass", clip=CLIP, reset_after=ZERO), False),
    "cnn, GradScaler, zero_grad forgotten": (CNN.format(reset="pass"), True),
    "cnn, GradScaler, zero_grad each step": (CNN.format(reset=ZERO), False),
}


@pytest.mark.parametrize("case", CASES)
def test_a_forgotten_zero_grad_is_found_on_real_loops_and_only_there(
        case: str, tmp_path: Path) -> None:
    script, forgotten = CASES[case]
    result = invoke("show", write_script(tmp_path, script), "--json")
    assert result.exit_code == 0, result.stderr
    trace = json.loads(result.stdout)
    accumulating = [f for f in trace["findings"] if f["code"] == "grad-accumulating"]
    assert len(accumulating) == (1 if forgotten else 0), [f["message"] for f in accumulating]
    if forgotten:
        assert "zero_grad()" in accumulating[0]["hint"]
        assert accumulating[0]["line"] is not None
    # the steps hold what backward left in .grad (÷ GradScaler's scale: the gradient the
    # optimizer steps with), as plain PyTorch read it in the same run
    printed = json.loads(trace["stdout"].split("NORMS ")[1].replace("'", '"'))
    steps = trace["steps"]
    column = steps["leaves"].index(next(n for n in steps["leaves"]
                                        if n.endswith(("head.weight", "3.weight"))))
    ours = [row[column][0] for row in steps["grads"]]  # (norm, max |g|, finite, kept)
    assert ours == pytest.approx(printed, rel=1e-5)


def test_gradscaler_scale_is_divided_out_so_a_scale_change_is_no_finding(tmp_path: Path) -> None:
    """Passes scaled by GradScaler, then one unscaled pass: the norms are compared as the
    optimizer sees them (a 65,536-fold drop read off raw .grads was once 'vanishing')."""
    unscaled_pass = (  # after the loop, one pass without GradScaler
        "optimizer.zero_grad()\n"
        "loss = nn.functional.cross_entropy(model(images[0]), labels[0])\n"
        "loss.backward()\n"
        "norms.append(model[3].weight.grad.norm().item())\n")
    script = CNN.format(reset=ZERO).replace("init_scale=256.0", "init_scale=65536.0") \
        .replace('print("NORMS"', unscaled_pass + 'print("NORMS"')
    path = write_script(tmp_path, script)
    trace = json.loads(invoke("show", path, "--json").stdout)
    steps = trace["steps"]
    assert steps["loss_scale"] == [65536.0] * 10 + [None]
    assert not [f for f in trace["findings"] if f["code"] in ("vanishing-gradient",
                                                               "exploding-gradient")]
    column = steps["leaves"].index("model.3.weight")
    printed = json.loads(trace["stdout"].split("NORMS ")[1])
    assert [row[column][0] for row in steps["grads"]] == pytest.approx(printed, rel=1e-5)
    shown = invoke("show", path, "--pass", "3").stdout
    assert "scaled ×65536 by GradScaler" in shown
    assert "divided by GradScaler's scale in 10 passes" in shown


def test_the_loss_row_is_the_loss_the_code_computed_before_loss_over_k() -> None:
    script = SCENARIOS / "bugs" / "accumulation_zero_grad_every_batch_fixed.py"
    result = shared_invoke("show", str(script), "--json")
    steps = json.loads(result.stdout)["steps"]
    assert steps["loss_divisor"] == [4.0] * 32
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           check=True).stdout  # the script prints its last loss
    assert f"last loss {steps['loss'][-1]:.4f}" in plain
    # a sum over n is the code's own mean: no divisor (nor for a plain loss)
    assert json.loads(shared_invoke("show", str(SCENARIOS / "loops" / "forgot_zero_grad.py"),
                                    "--json").stdout)["steps"]["loss_divisor"] == []


SCALED_ACCUMULATION = """
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
scaler = torch.amp.GradScaler("cpu", init_scale=256.0, enabled={scaled})
x, y = torch.randn(12, 4, 8), torch.randn(12, 4, 1)
losses = []
for step in range(12):
    loss = nn.functional.mse_loss(model(x[step]), y[step])
    losses.append(loss.item())
    scaler.scale(loss / 4).backward()
    if (step + 1) % 4 == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
print("LOSSES", losses)
"""


@pytest.mark.parametrize("scaled", [True, False])
def test_the_loss_row_is_the_loss_before_loss_over_k_with_a_grad_scaler_too(
        tmp_path: Path, scaled: bool) -> None:
    # scaler.scale(loss / 4): the loss row was loss / 4 with a GradScaler, loss without one
    script = write_script(tmp_path, SCALED_ACCUMULATION.format(scaled=scaled))
    result = shared_invoke("show", str(script), "--json")
    trace = json.loads(result.stdout)
    plain = json.loads(trace["stdout"].split("LOSSES ", 1)[1].replace("'", '"'))
    steps = trace["steps"]
    assert steps["loss_divisor"] == [4.0] * 12
    assert steps["loss"] == pytest.approx(plain, rel=1e-6)
    assert bool(steps.get("loss_scale")) is scaled
