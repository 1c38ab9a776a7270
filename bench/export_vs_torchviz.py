"""gradtrace's Trace + DOT against torchviz's make_dot, and time to an SVG picture.

Both run in this process on the same graphs, so the ratios hold on a noisy machine.
torchviz is a test-only dependency (pip install torchviz).

    .venv/bin/python bench/export_vs_torchviz.py [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torchviz
from graphs import chain, diamond, many_leaves, mlp, transformer

import gradtrace
from gradtrace.render.dot import render

TARGET = 5  # times faster than torchviz on the transformer and the 10,000-leaf graph


def timed(work: Callable[[], object]) -> tuple[float | None, str]:
    start = time.perf_counter()
    try:
        work()
    except RecursionError:
        return None, "RecursionError"
    except subprocess.TimeoutExpired as exc:
        return None, f"unfinished after {exc.timeout:.0f} s"
    return time.perf_counter() - start, ""


def best_of(work: Callable[[], object], repeats: int) -> tuple[float | None, str]:
    results = [timed(work) for _ in range(repeats)]
    ok = [t for t, _ in results if t is not None]
    return (min(ok), "") if ok else results[0]


def fmt(seconds: float | None, note: str) -> str:
    return f"{seconds * 1000:10.1f} ms" if seconds is not None else f"{note:>13}"


def dot_svg(source: str, timeout: float) -> bytes:
    return subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True,
                          check=True, timeout=timeout).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds allowed to each `dot -Tsvg` run")
    args = parser.parse_args()
    sys.setrecursionlimit(100_000)  # torchviz walks recursively: give it a chance on chains

    print("Trace + DOT text vs torchviz.make_dot (like for like: no saved tensors, no folding):")
    cases = [("MLP (4 x Linear 256)", mlp, 5, None),
             ("transformer (6 layers)", transformer, 5, TARGET),
             ("10,000 leaves x 3 ops", many_leaves, 3, TARGET),
             ("10,000-op chain", lambda: chain(10_000), 3, None),
             ("100,000-op chain", lambda: chain(100_000), 1, None)]
    for name, build, repeats, target in cases:
        out = build()
        ours, _ = best_of(lambda out=out: gradtrace.trace(out, names={}, saved=False)
                          .to_dot(fold=False), repeats)
        if name.startswith("100,000"):
            theirs, note = None, "not tried: a recursive walker overflows the C stack here"
        else:
            theirs, note = best_of(lambda out=out: torchviz.make_dot(out).source, repeats)
        ratio = f"{theirs / ours:6.1f}x faster" if theirs and ours else ""
        if target and theirs and ours:
            ratio += f" (target {target}x: {'met' if theirs / ours >= target else 'NOT MET'})"
        print(f"  {name:26} gradtrace {fmt(ours, '')}   torchviz {fmt(theirs, note)}  {ratio}")
        del out

    print("\nTime to an SVG picture (graph walk + DOT + `dot -Tsvg`):")
    pictures = [("10,000-op chain", lambda: chain(10_000), False),
                ("50-layer diamond, saved tensors", diamond, True)]
    for name, build, saved in pictures:
        out = build()
        ours, note_ours = timed(lambda out=out, saved=saved: render(
            gradtrace.trace(out, names={}).to_dot(saved=saved), "svg"))
        theirs, note = timed(lambda out=out, saved=saved: dot_svg(
            torchviz.make_dot(out, show_saved=saved).source, args.timeout))
        if theirs is not None and ours is not None:
            ratio = f"{theirs / ours:6.1f}x faster"
        elif ours is not None:
            ratio = f"more than {args.timeout / ours:.0f}x faster"
        else:
            ratio = ""
        print(f"  {name:32} gradtrace {fmt(ours, note_ours)}   torchviz {fmt(theirs, note)}  "
              f"{ratio}")
        del out
    end_to_end(args.timeout)


CHAIN_SCENARIO = """import torch
x = torch.tensor(1.0, requires_grad=True)
y = x
for _ in range(10_000):
    y = y * 1.0001
"""
TORCHVIZ_SCRIPT = CHAIN_SCENARIO + """import subprocess, sys, torchviz
sys.setrecursionlimit(100_000)
source = torchviz.make_dot(y).source
subprocess.run(["dot", "-Tsvg", "-o", sys.argv[1]], input=source.encode(), check=True)
"""


def run(command: list[str], timeout: float) -> None:
    """Run a command; past the timeout, stop it and what it started (its `dot`) too."""
    with subprocess.Popen(command, start_new_session=True) as proc:
        try:
            if proc.wait(timeout=timeout):
                raise subprocess.CalledProcessError(proc.returncode, command)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise


def end_to_end(timeout: float) -> None:
    """The commands a user runs, each a new process (Python and torch start-up included)."""
    print("\nEnd to end, new processes (about 1.4 s of each is Python importing torch):")
    with tempfile.TemporaryDirectory() as folder:
        scenario, script = Path(folder, "chain.py"), Path(folder, "with_torchviz.py")
        scenario.write_text(CHAIN_SCENARIO)
        script.write_text(TORCHVIZ_SCRIPT)
        ours, note_ours = timed(lambda: run([sys.executable, "-m", "gradtrace", "dot",
                                             str(scenario), "-o", str(Path(folder, "ours.svg"))],
                                            timeout))
        theirs, note = timed(lambda: run([sys.executable, str(script),
                                          str(Path(folder, "theirs.svg"))], timeout))
    ratio = f"{theirs / ours:6.1f}x faster" if theirs and ours else ""
    print(f"  {'10,000-op chain to SVG':32} gradtrace {fmt(ours, note_ours)}   "
          f"torchviz {fmt(theirs, note)}  {ratio}")


if __name__ == "__main__":
    # torch frees a deep graph recursively: a big stack lets the 100,000-op chain go
    threading.stack_size(1 << 30)
    worker = threading.Thread(target=main)
    worker.start()
    worker.join()
