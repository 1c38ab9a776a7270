"""A RunListener is told while the code runs: the steps' rows as their numbers are read
(in batches), and facts as they are met; what it is told is what the trace ends with."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from helpers import SCENARIOS, write_script

from gradtrace.capture.options import CaptureOptions
from gradtrace.capture.runner import run_scenario
from gradtrace.model.records import Steps
from gradtrace.model.spilled import SpilledRows


class Listening:
    def __init__(self) -> None:
        self.heard: list[tuple[str, int]] = []
        self.told = self.told_fact  # RunListener.told
        self.firsts: list[int] = []
        self.grads: list[tuple[Any, ...]] = []
        self.loss: list[float | None] = []

    def told_fact(self, fact: Any, passes: int) -> None:
        self.heard.append((type(fact).__name__, passes))

    def read(self, first: int, rows: Steps) -> None:
        self.firsts.append(first)
        self.grads.extend(rows.grads)
        self.loss.extend(rows.loss)


def test_a_loop_s_rows_are_told_in_batches_as_the_trace_ends_with_them() -> None:
    heard = Listening()
    trace = run_scenario(SCENARIOS / "loops" / "mlp_1000_steps.py",
                         CaptureOptions(listener=heard))
    steps = trace.steps
    assert steps is not None and len(steps.grads) == 1000
    # each batch starts where the one before ended, and none is told twice
    assert heard.firsts[0] == 1 and len(heard.grads) == 1000
    assert 2 < len(heard.firsts) < 1000  # in batches, not one call per pass
    assert heard.grads == list(steps.grads) and heard.loss == list(steps.loss)


def test_a_fact_is_told_when_it_is_met() -> None:
    heard = Listening()
    trace = run_scenario(SCENARIOS / "bugs" / "nan_masked_mean.py",
                         CaptureOptions(listener=heard))
    assert ("NonFiniteBorn", 5) in heard.heard  # at the fifth pass, not at the end
    assert any(f.code == "nan-value" for f in trace.findings)


# A loop whose rows hold each way a row is made: a leaf first seen late, a pass that leaves a
# .grad as it was (autograd.grad), a GradScaler's scaled passes, a .grad kept across passes.
ROWS_OF_EVERY_KIND = """
import torch
torch.manual_seed(0)
w, b = torch.randn(4, requires_grad=True), torch.randn(1, requires_grad=True)
late = torch.randn(4, requires_grad=True)
opt = torch.optim.SGD([w, b, late], lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4)
x = torch.randn(8, 4)
for step in range(300):
    if step % 3:
        opt.zero_grad()
    loss = ((x @ w + b) ** 2).mean() + (((x @ late) ** 2).mean() if step >= 100 else 0)
    if step % 7 == 0:
        torch.autograd.grad((x @ w).sum(), [w])
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""


def test_a_listener_s_run_keeps_its_rows_in_a_file_the_same_as_a_run_without_one(
        tmp_path: Path) -> None:
    script = write_script(tmp_path, ROWS_OF_EVERY_KIND)
    heard = Listening()
    spilled = run_scenario(script, CaptureOptions(listener=heard)).steps
    kept = run_scenario(script, CaptureOptions()).steps
    assert spilled is not None and kept is not None
    assert isinstance(spilled.grads, SpilledRows) and isinstance(kept.grads, tuple)
    assert len(spilled.grads) == len(kept.grads) == 343 and kept.loss_scale
    width = len(kept.leaves)
    assert [row + (None,) * (width - len(row)) for row in spilled.grads] == list(kept.grads)
    assert replace(spilled, grads=()) == replace(kept, grads=())
    assert heard.grads == list(spilled.grads)
