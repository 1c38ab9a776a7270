"""A RunListener is told while the code runs: the steps' rows as their numbers are read
(in batches), and facts as they are met; what it is told is what the trace ends with."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import SCENARIOS, as_read, write_script

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

    def printed(self, text: str, to_stderr: bool) -> None:
        pass

    def judged(self, findings: Any, passes: int) -> None:
        self.heard.extend((f.code, passes) for f in findings)

    def ended(self, findings: Any) -> None:
        self.heard.append(("ended", len(findings)))


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
    assert list(spilled.grads) == list(kept.grads)  # a row read before a leaf: None in it
    assert replace(spilled, grads=()) == replace(kept, grads=())
    assert heard.grads == list(spilled.grads)


# A .grad of a subclass whose own tolist() refuses, from pass 51: it is joined into a batch with
# the loss and the other passes' numbers, which are read all the same.
REFUSING_GRAD = """
import torch


class Refuses(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.tolist:
            raise RuntimeError("this tensor's numbers are not for reading")
        return super().__torch_function__(func, types, args, kwargs or {})


torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
for step in range(200):
    loss = (w * x).sum() ** 2
    loss.backward()  # no zero_grad: pass p's .grad is p times the first's
    if step == 50:
        w.grad = w.grad.as_subclass(Refuses)
"""


def test_a_grad_whose_numbers_refuse_to_be_listed_leaves_every_row_read(tmp_path: Path
                                                                        ) -> None:
    script = write_script(tmp_path, REFUSING_GRAD)
    torch.manual_seed(0)
    w, x = torch.randn(3), torch.randn(3)
    first = float((2 * (w * x).sum() * x).norm())
    for options in (CaptureOptions(listener=Listening()), CaptureOptions()):
        steps = run_scenario(script, options).steps
        assert steps is not None and len(steps.grads) == 200
        norms = [row[0].norm for row in steps.grads if row[0] is not None]
        assert norms == pytest.approx([first * (p + 1) for p in range(200)], rel=1e-5)


def test_numbers_never_handed_out_end_their_rows_with_none_the_trace_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A vector Readback never hands out (a meta tensor's) leaves its row unread for good:
    once nothing is pending, the rows go on past it, and the trace keeps a row per pass."""
    from gradtrace.capture.observers import readback
    from gradtrace.model.codec import trace_to_dict

    given = readback.Readback.later
    count = iter(range(10**6))

    def drops_one(self: Any, values: Any, reader: Any) -> None:
        if next(count) != 100:  # one of pass ~50's
            given(self, values, reader)

    monkeypatch.setattr(readback.Readback, "later", drops_one)
    script = write_script(tmp_path, ROWS_OF_EVERY_KIND)
    heard = Listening()
    trace = run_scenario(script, CaptureOptions(listener=heard))
    assert trace.steps is not None and len(trace.steps.grads) == len(trace.passes) == 343
    assert len(heard.grads) == 343
    as_read(json.dumps(trace_to_dict(trace)))  # checked as gradtrace checks a saved one


def test_a_watched_run_plans_its_first_two_passes_in_detail_not_thirty_two() -> None:
    """A watched run is a long one: its detail goes to its first two passes, every 100th and
    those after a .grad read not finite; show's to its first 32 as well."""
    from gradtrace.capture.passes.detail import DetailPlan

    def planned(options: CaptureOptions) -> list[int]:
        plan = DetailPlan(options, NoSteps(), lambda p: None)
        return [n for n in range(1, 251) if plan.detailed(n, hooked=False)]

    assert planned(CaptureOptions(listener=Listening())) == [1, 2, 100, 200]
    assert planned(CaptureOptions()) == [*range(1, 33), 100, 200]


def test_a_watched_run_waits_for_no_device_until_a_grad_was_read_not_finite() -> None:
    """A watched run's passes in detail never wait for a GPU to ask whether their loss is
    finite (the GPU check counts no synchronisation of gradtrace's own) until a .grad was read
    not finite; show's passes in detail do (a NaN born in a script's first step has its line)."""
    from gradtrace.capture.passes.detail import DetailPlan

    steps = NoSteps()
    watched = DetailPlan(CaptureOptions(listener=Listening()), steps, lambda p: None)
    shown = DetailPlan(CaptureOptions(), steps, lambda p: None)
    assert [watched.may_wait(True), watched.may_wait(False)] == [False, False]
    assert [shown.may_wait(True), shown.may_wait(False)] == [True, False]
    steps.not_finite_read = 1
    assert [watched.may_wait(True), watched.may_wait(False)] == [True, False]


def test_a_loop_s_settled_light_steps_alike_share_one_record() -> None:
    """A long loop keeps a record per distinct step, not per step: a settled light step is
    the step before's record when alike; the latest over its graph, a step with changes of
    its own, and one unlike the step before keep their own."""
    from gradtrace.capture.passes.detail import DetailPlan
    from gradtrace.extract.captured import RawPass

    def step(line: int = 7, **kwargs: Any) -> RawPass:
        return RawPass("backward", "scenario", [], ["loss"], False, False, line, "x",
                       signature=1, thinned=True, **kwargs)

    plan = DetailPlan(CaptureOptions(), NoSteps(), lambda p: None)
    made = [step(keep=True), step(), step(), step(error="boom"), step(), step(line=9),
            step(line=9), step(line=9)]
    passes: list[RawPass] = []
    for p in made:
        passes.append(p)
        plan.last_of[p.signature] = p
        plan.fold(passes)
    assert len(passes) == len(made)
    kept = [next(i for i, q in enumerate(made) if q is p) for p in passes]
    # 2 is 1's record; 3 failed; 4 is unlike 3 (3's error); 5 is at another line; 6 is 5's;
    # 7, the latest over its graph, keeps its own
    assert kept == [0, 1, 1, 3, 4, 5, 5, 7]


class NoSteps:
    """The steps' statistics a DetailPlan reads, of a run whose .grads are all finite."""

    def __init__(self) -> None:
        from gradtrace.capture.observers.readback import Readback

        self.readback, self.not_finite_read = Readback(), 0

    def finite(self, row: int) -> bool | None:
        return True
