"""Provenance cost: a forward pass with gradtrace's line log (which scenario line made each
node) over a plain forward, and the TorchFunctionMode alternative it was chosen over.

A 6-layer nn.TransformerEncoder, at d_model 128 (batch 8, seq 32) and at a small d_model 32
(batch 2, seq 10), where Python overhead weighs most. Timed in the same run, interleaved;
the median of paired ratios is printed (these machines are noisy).

    .venv/bin/python bench/provenance.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradtrace.capture.naming.provenance import LineLog
from gradtrace.extract.walk import walk

BUDGET = 1.3
HERE = __file__


def model_and_input(width: int, batch: int, seq: int) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=width, nhead=4,
                                             dim_feedforward=2 * width, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False)
    return model, torch.randn(batch, seq, width)


def forward(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).pow(2).mean()  # the "scenario line" every node comes from


def plain(model: torch.nn.Module, x: torch.Tensor) -> float:
    start = time.perf_counter()
    forward(model, x)
    return time.perf_counter() - start


def logged(model: torch.nn.Module, x: torch.Tensor) -> float:
    """The line log while the forward runs, then a source for every node (as build_trace)."""
    start = time.perf_counter()
    log = LineLog(lambda name: name == HERE)
    with log.tracing():
        loss = forward(model, x)
    nodes, _ = walk([loss.grad_fn])
    sources = list(map(log.source_of, nodes))
    elapsed = time.perf_counter() - start
    assert any(s is not None and s.line for s in sources)
    return elapsed


class _Provenance(TorchFunctionMode):
    """The alternative: a mode that looks up the scenario frame after every torch call."""

    def __init__(self) -> None:
        super().__init__()
        self.where: dict[int, Any] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                            kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        node = out.grad_fn if type(out) is torch.Tensor else None
        if node is not None and id(node) not in self.where:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename != HERE:
                frame = frame.f_back
            self.where[id(node)] = (node, frame.f_lineno if frame else None)
        return out


def by_mode(model: torch.nn.Module, x: torch.Tensor) -> float:
    start = time.perf_counter()
    with _Provenance():
        forward(model, x)
    return time.perf_counter() - start


def paired(model: torch.nn.Module, x: torch.Tensor, way: Callable[..., float],
           repeats: int) -> float:
    for _ in range(3):  # warm up
        plain(model, x), way(model, x)
    return statistics.median(way(model, x) / plain(model, x) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    for width, batch, seq in ((128, 8, 32), (32, 2, 10)):
        model, x = model_and_input(width, batch, seq)
        nodes = len(walk([forward(model, x).grad_fn])[0])
        base = statistics.median(plain(model, x) for _ in range(args.repeats))
        line_log = paired(model, x, logged, args.repeats)
        mode = paired(model, x, by_mode, args.repeats)
        print(f"transformer (6 layers, d_model {width}, batch {batch}, seq {seq}): "
              f"{nodes} nodes, plain forward {base * 1000:.2f} ms")
        print(f"  line log / plain          {line_log:.2f}x  (budget {BUDGET}x: "
              f"{'within' if line_log <= BUDGET else 'OVER'})")
        print(f"  TorchFunctionMode / plain {mode:.2f}x  (the alternative, not used)")


if __name__ == "__main__":
    main()
