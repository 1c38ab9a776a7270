"""A RunListener is told while the code runs: the steps' rows as their numbers are read
(in batches), and facts as they are met; what it is told is what the trace ends with."""

from __future__ import annotations

from typing import Any

from helpers import SCENARIOS

from gradtrace.capture.options import CaptureOptions
from gradtrace.capture.runner import run_scenario
from gradtrace.model.records import Steps


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
