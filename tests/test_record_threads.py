"""gradtrace.record() records the calls of its own thread: another thread's backward passes,
Function calls and module forwards, made while the block runs, are not the block's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

import gradtrace


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


class Neighbour:
    """A thread that runs a training step over its own tensor `v` (through a Function and a
    module; an optimizer steps, clips and resets) each time it is asked, while the test's
    thread records."""

    def __init__(self) -> None:
        self.ask, self.done = threading.Semaphore(0), threading.Semaphore(0)
        self.passes, self.stopping = 0, False
        self.thread = threading.Thread(target=self._work)

    def _work(self) -> None:
        v = torch.ones(2, requires_grad=True)
        layer = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD([v], lr=0.1)
        while True:
            self.ask.acquire()
            if self.stopping:
                return
            optimizer.zero_grad()
            optimizer.step()  # before its backward: a step without a gradient, each time
            torch.nn.utils.clip_grad_norm_([v], 1.0)
            layer(Double.apply(v)).sum().backward()
            self.passes += 1
            self.done.release()

    def one_pass(self) -> None:
        self.ask.release()
        self.done.acquire()

    def __enter__(self) -> Neighbour:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping = True
        self.ask.release()
        self.thread.join()


def five_passes_beside_a_neighbour(**options: Any) -> tuple[Any, int]:
    """Five backward passes over w in a record() block, each beside one of the neighbour's."""
    w = torch.ones(3, requires_grad=True)
    with Neighbour() as neighbour, gradtrace.record(**options) as rec:
        for _ in range(5):
            neighbour.one_pass()  # the neighbour's pass runs while the block records
            (w * 3).sum().backward()
    return rec, neighbour.passes


def in_thread(work: Callable[[], Any]) -> Any:
    """work's result, run in a thread of its own (the recording thread need not be main)."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(work()))
    worker.start()
    worker.join()
    return result[0]


def test_record_sees_only_its_own_threads_passes() -> None:
    for rec, theirs in (five_passes_beside_a_neighbour(),
                        in_thread(five_passes_beside_a_neighbour)):
        assert theirs == 5
        assert len(rec.passes) == 5
        names = {t.name for t in rec.tensors}
        assert "w" in names and "v" not in names
        assert rec.functions == ()  # the neighbour's Function calls are not the block's
        assert not any(n.module for n in rec.nodes)
        assert {n.type for n in rec.nodes} == {"MulBackward0", "SumBackward0",
                                               "AccumulateGrad"}
        # nor its optimizer's steps, resets and clipping
        assert rec.steps is not None and rec.steps.optimizer_steps_taken == 0
        assert not [f for f in rec.findings if f.code.endswith("-without-gradient")]


def test_record_all_threads_records_every_threads_passes() -> None:
    rec, theirs = five_passes_beside_a_neighbour(all_threads=True)
    assert theirs == 5 and len(rec.passes) == 10
    assert len(rec.functions) == 5
    assert rec.steps is not None and rec.steps.optimizer_steps_taken == 5
    assert "clip-without-gradient" in {f.code for f in rec.findings}
