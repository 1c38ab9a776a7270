"""--profile's numbers checked against what they claim, on gpt_tiny and transformer_encoder.

For each scenario, three runs of `gradtrace show SCENARIO --profile` (in-process, each a
fresh run of the script), and for each run:

- the per-module backward times added up (leaf accumulation included) over the median
  wall time of the same backward without the profiler, measured in the same run
  (done when within 15%: a ratio in 0.85–1.15);
- the same sum over torch.profiler's own per-op total of the same pass (the sum of every
  op's self CPU time in its `key_averages()` table, from gradtrace's full profiles of the
  pass, each op's median over them as each node's time is its median) (within 20%);
- the top-5 modules by backward time, and whether the three runs agree: the same order, or
  where they differ, the swapped modules' times within their spreads.

    .venv/bin/python bench/profile_accuracy.py [--threads N] [--runs 3]

The machines these run on are shared: --threads 1 (the default) keeps torch's intra-op
threads from spinning against other processes; pass --threads 0 for torch's default. Each
run prints the load average: on a busy machine the unprofiled wall time's median takes the
other processes' time slices (a whole backward is long enough to be interrupted), while each
node's median leaves them out (most nodes are not): the fastest unprofiled timing is then the
fairer comparison, and it is printed too.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from gradtrace.cli.inputs import load_trace
from gradtrace.model.profile import cost_rows, median
from gradtrace.model.records import Trace

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("gradtrace/examples/real/gpt_tiny.py",
             "gradtrace/examples/real/transformer_encoder.py")
TOP = 5


def profiled(scenario: str) -> Trace:
    trace = load_trace(str(ROOT / scenario), [], backward=True, profile=True).trace
    assert trace.costs is not None, scenario
    return trace


def stable(tops: list[list[tuple[str, float, float]]]) -> str:
    """ "same order", or whether each difference is within the modules' spreads."""
    orders = [[m for m, _, _ in top] for top in tops]
    if all(order == orders[0] for order in orders):
        return "same order in every run"
    worst = []
    for top in tops:
        times = {m: (t, s) for m, t, s in top}
        for first, second in zip(top, top[1:], strict=False):
            # two neighbours whose order differs in another run: their gap against the noise
            if any(o.index(first[0]) > o.index(second[0]) for o in orders
                   if first[0] in o and second[0] in o):
                gap = times[first[0]][0] - times[second[0]][0]
                noise = max(times[first[0]][1], times[second[0]][1])
                worst.append(gap <= noise)
    sets = [set(o) for o in orders]
    same_set = all(s == sets[0] for s in sets)
    verdict = "within noise (each swapped pair's gap ≤ its spread)" if all(worst) \
        else "NOT within noise"
    return f"order differs, {verdict}; " + ("same five modules" if same_set
                                             else "the five differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{args.runs} runs per scenario")
    for scenario in SCENARIOS:
        print(f"\n{scenario}")
        tops = []
        for run in range(1, args.runs + 1):
            trace = profiled(scenario)
            costs = trace.costs
            assert costs is not None
            rows = cost_rows(trace, "module")
            modules = sum(r.time_us for r in rows)
            wall, ops = median(costs.wall_us), sum(costs.ops_us.values())
            profiled_wall = median(costs.profiled_us)
            fastest = min(costs.wall_us)
            print(f"  run {run} ({costs.method} ×{len(costs.profiled_us)}, load "
                  f"{os.getloadavg()[0]:.1f}): modules sum {modules:6.0f} µs / unprofiled "
                  f"wall {wall:6.0f} µs = {modules / wall:.2f} (fastest {fastest:6.0f} µs: "
                  f"{modules / fastest:.2f})"
                  f" | torch.profiler op total {ops:6.0f} µs: {modules / ops:.2f}"
                  f" | profiled wall {profiled_wall:6.0f} µs "
                  f"(overhead {profiled_wall / wall - 1:+.0%})")
            top = [(r.key, r.time_us, r.spread_us) for r in rows[:TOP]]
            tops.append(top)
            print("        top-5: " + ", ".join(f"{m} {t:.0f}±{s:.0f}" for m, t, s in top))
        print(f"  top-5 stability: {stable(tops)}")


if __name__ == "__main__":
    main()
