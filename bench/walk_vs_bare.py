"""gradtrace's graph walk against a bare next_functions traversal, and linear time on chains.

The bare traversal only visits each node once (a stack and a set of ids); gradtrace's walk also
records the order and every edge. Both run in this process on the same graphs; the ratio of
their best times is printed (the design promises at most 2x). Then walk + JSON + DOT of chains
of growing length, whose time per node stays flat when the work is linear.

    .venv/bin/python bench/walk_vs_bare.py
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch
from graphs import chain, diamond, many_leaves, transformer

import gradtrace
from gradtrace.extract.walk import walk

BUDGET = 2.0


def bare(root: Any) -> int:
    """Each node once, by identity, iteratively: the least a graph walk can do."""
    seen = {id(root)}
    stack = [root]
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return len(seen)


def best(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    print(f"walk (order + edges) vs a bare traversal (visits only), best of runs "
          f"(budget {BUDGET}x):")
    for name, build, repeats in [("6-layer transformer", transformer, 50),
                                 ("50-layer diamond", diamond, 50),
                                 ("10,000 leaves x 3 ops", many_leaves, 5),
                                 ("100,000-op chain", lambda: chain(100_000), 3)]:
        out = build()
        root = out.grad_fn
        nodes = bare(root)
        assert nodes == len(walk([root])[0])
        ours, theirs = best(lambda r=root: walk([r]), repeats), best(lambda r=root: bare(r),
                                                                    repeats)
        ratio = ours / theirs
        print(f"  {name:24} {nodes:7} nodes   walk {ours * 1000:8.2f} ms   bare "
              f"{theirs * 1000:8.2f} ms   {ratio:.2f}x "
              f"({'within' if ratio <= BUDGET else 'OVER'})")
        del out, root

    print("\nwalk + JSON + DOT of a chain (time per node is flat when the work is linear):")
    for n in (25_000, 50_000, 100_000):
        out = chain(n)
        elapsed = best(lambda out=out: _export(out), 1)
        print(f"  {n:7}-op chain   {elapsed:6.2f} s   {elapsed / n * 1e6:5.1f} us a node")
        del out


def _export(out: torch.Tensor) -> None:
    trace = gradtrace.trace(out, names={}, saved=False)
    trace.to_json()
    trace.to_dot()


if __name__ == "__main__":
    # torch frees a deep graph recursively: a big stack lets the 100,000-op chain go
    threading.stack_size(1 << 30)
    worker = threading.Thread(target=main)
    worker.start()
    worker.join()
