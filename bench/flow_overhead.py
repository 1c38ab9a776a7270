"""Gradient-flow capture cost: backward with gradtrace's node hooks over a plain backward.

A 6-layer nn.TransformerEncoder (d_model 128, batch 8, seq 32). Both are timed in the same run,
interleaved, and the ratio of the medians is printed (these machines are noisy).

    .venv/bin/python bench/flow_overhead.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gradtrace.capture.observers.flow import FlowCapture
from gradtrace.extract.summary import to_summaries
from gradtrace.extract.walk import walk

BUDGET = 1.3  # the design's goal


def model_and_input() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False)
    return model, torch.randn(8, 32, 128)


def plain(model: torch.nn.Module, x: torch.Tensor) -> float:
    loss = model(x).pow(2).mean()
    start = time.perf_counter()
    loss.backward()
    return time.perf_counter() - start


def captured(model: torch.nn.Module, x: torch.Tensor) -> float:
    """Everything gradtrace adds to a pass for the flow: walk, hooks, summaries, clean-up."""
    loss = model(x).pow(2).mean()
    start = time.perf_counter()
    nodes, edges = walk([loss.grad_fn])
    capture = FlowCapture(nodes, edges)  # a full backward: every leaf runs
    loss.backward()
    capture.remove()
    to_summaries([g for _, _, outs, ins in capture.records.values() for g in outs + ins])
    elapsed = time.perf_counter() - start
    assert len(capture.records) == len(nodes)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    model, x = model_and_input()
    for _ in range(3):  # warm up both paths
        plain(model, x), captured(model, x)
    plain_times, captured_times = [], []
    for _ in range(args.repeats):
        model.zero_grad(set_to_none=True)
        plain_times.append(plain(model, x))
        model.zero_grad(set_to_none=True)
        captured_times.append(captured(model, x))
    p, c = statistics.median(plain_times), statistics.median(captured_times)
    # Each captured run is timed right after a plain one: the median of the pairs' ratios
    # cancels the machine's slow drifts better than a ratio of two medians.
    paired = statistics.median(cap / pl for pl, cap in zip(plain_times, captured_times,
                                                           strict=True))
    loss = model(x).pow(2).mean()
    nodes = len(walk([loss.grad_fn])[0])
    print(f"transformer (6 layers, d_model 128, batch 8, seq 32): {nodes} autograd nodes")
    print(f"plain backward      median {p * 1000:8.2f} ms")
    print(f"captured backward   median {c * 1000:8.2f} ms")
    print(f"ratio of medians    {c / p:.2f}x")
    print(f"capture / plain     {paired:.2f}x  median of {args.repeats} paired runs "
          f"(budget {BUDGET}x: {'within' if paired <= BUDGET else 'OVER'})")


if __name__ == "__main__":
    main()
