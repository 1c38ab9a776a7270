"""The whole CLI against the plain script: time, peak RSS and JSON bytes a node.

For chains of N ops (`y = y * (1 + 10 / N)`, then `y.backward()`: 1.0001 for 100,000, and the
product stays near e^10 at every N, so no chain overflows float32 into the NaN search) and
the wide graph (10,000
leaves × 3 ops), each as a new process: `python scenario.py` (torch import included), then
`gradtrace show scenario.py --json` and `gradtrace dot scenario.py -o graph.svg`. Ratios are
against the plain script measured in the same run (these machines are noisy); with --repeat N
each command runs N times, in turn with the others, and its best time counts.

    .venv/bin/python bench/cli_scaling.py [--chains 10000,100000,1000000] [--no-wide]
                                          [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from measure import measured

CHAIN = """import torch

x = torch.tensor(1.0, requires_grad=True)
y = x
for _ in range({n}):
    y = y * {factor}
y.backward()
"""

WIDE = """import torch

leaves = [torch.randn((), requires_grad=True) for _ in range(10_000)]
loss = torch.stack([(leaf * 2).sin().exp() for leaf in leaves]).sum()
loss.backward()
"""

GOALS = "goals: show --json ≤ 2× plain (≤ 2.5× at 1,000,000 nodes), ≤ 250 B a node, " \
    "≤ 1.5 KB a node over plain's RSS"


def best(runs: list[tuple[int, float, float]]) -> tuple[int, float, float]:
    """The first exit code, the fastest time and the largest peak RSS of repeated runs."""
    return runs[0][0], min(r[1] for r in runs), max(r[2] for r in runs)


def row(name: str, nodes: int, path: Path, folder: Path, repeat: int) -> None:
    """Print plain, show --json and dot -o .svg figures for one scenario: each of the three
    run `repeat` times in turn (so a slow spell of the machine hits all three), best taken."""
    gradtrace = [sys.executable, "-m", "gradtrace"]
    out = folder / "trace.json"
    svg = folder / "graph.svg"
    commands = ([sys.executable, str(path)],
                ["sh", "-c", f'"$0" "$@" > {out}', *gradtrace, "show", str(path), "--json"],
                [*gradtrace, "dot", str(path), "-o", str(svg)])
    runs: list[list[tuple[int, float, float]]] = [[], [], []]
    for _ in range(repeat):
        for kept, command in zip(runs, commands, strict=True):
            kept.append(measured(command))
    (_, plain_s, plain_mib), (code, show_s, show_mib), (dot_code, dot_s, dot_mib) = \
        map(best, runs)
    size = out.stat().st_size if code == 0 else 0
    extra = (show_mib - plain_mib) * 1024 * 1024 / nodes
    time_goal = 2.5 if nodes > 500_000 else 2.0
    met = [show_s / plain_s <= time_goal, size / nodes <= 250, extra <= 1536]
    print(f"{name:>16} {nodes:>9,} {plain_s:>7.2f} {plain_mib:>6.0f} | {show_s:>7.2f} "
          f"{show_s / plain_s:>5.2f}× {show_mib:>6.0f} {extra:>7.0f} B {size / nodes:>6.0f} B"
          f" {code:>2} | {dot_s:>7.2f} {dot_s / plain_s:>5.2f}× {dot_mib:>6.0f} {dot_code:>2}"
          f" | {' '.join('ok' if ok else 'over' for ok in met)}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", default="10000,100000,1000000")
    parser.add_argument("--no-wide", action="store_true")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each command this many times in turn and keep the best")
    args = parser.parse_args()
    print(GOALS)
    print(f"{'graph':>16} {'nodes':>9} {'plain s':>7} {'MiB':>6} | {'show s':>7} {'ratio':>6} "
          f"{'MiB':>6} {'RSS/node':>9} {'JSON/node':>8} {'rc':>2} | {'dot s':>7} "
          f"{'ratio':>6} {'MiB':>6} {'rc':>2} | goals: time JSON RSS")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for n in map(int, args.chains.split(",")):
            path = folder / f"chain_{n}.py"
            path.write_text(CHAIN.format(n=n, factor=1 + 10 / n))
            row(f"chain {n:,}", n + 1, path, folder, args.repeat)  # n MulBackward0 and one leaf
        if not args.no_wide:
            path = folder / "wide.py"
            path.write_text(WIDE)
            row("10,000 leaves×3", 40_002, path, folder, args.repeat)


if __name__ == "__main__":
    main()
