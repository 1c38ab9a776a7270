"""The floor of recording a pass's flow with Python hooks, against the plain script.

The chain of `cli_scaling.py` (N ops of `y = y * (1 + 10 / N)`, then `y.backward()`), each as a
new process: plain; then a bare walk of its graph (a set of seen nodes, no records) and a hook
on every other node that only reads the two numbers it is given (gradtrace's chain links need
no hook on the others), removed after the pass. No names, lines, saved tensors, trace or JSON:
what any recorder of every node's gradient pays in torch before doing anything of its own.
Ratios and RSS are against the plain script of the same run, best of --repeat.

    .venv/bin/python bench/hook_floor.py [--chains 100000,1000000] [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from measure import measured

SCRIPT = """import sys

import torch

x = torch.tensor(1.0, requires_grad=True)
y = x
for _ in range({n}):
    y = y * {factor}
if sys.argv[1] == "hooked":
    nodes, todo, seen = [], [y.grad_fn], set()
    while todo:  # iterative, each node once by identity
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        todo.extend(child for child, _ in node.next_functions)
    got = []

    def hook_of(node):
        def hook(grad_inputs, grad_outputs):
            got.append((grad_outputs[0].item(), grad_inputs[0].item() if grad_inputs
                        and grad_inputs[0] is not None else None))
        return hook

    handles = [node.register_hook(hook_of(node)) for node in nodes[::2]]
y.backward()
if sys.argv[1] == "hooked":
    for handle in handles:
        handle.remove()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", default="100000,1000000")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"{'nodes':>10} | {'plain s':>7} {'MiB':>6} | {'hooked s':>8} {'ratio':>6} "
          f"{'RSS/node':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for n in map(int, args.chains.split(",")):
            path = Path(folder) / f"chain{n}.py"
            path.write_text(SCRIPT.format(n=n, factor=1 + 10 / n))
            plain, hooked = [], []
            for _ in range(args.repeat):  # in turn: a slow spell of the machine hits both
                plain.append(measured([sys.executable, str(path), "plain"]))
                hooked.append(measured([sys.executable, str(path), "hooked"]))
            plain_s, hooked_s = min(r[1] for r in plain), min(r[1] for r in hooked)
            plain_mib, hooked_mib = max(r[2] for r in plain), max(r[2] for r in hooked)
            print(f"{n + 1:>10,} | {plain_s:>7.2f} {plain_mib:>6.0f} | {hooked_s:>8.2f} "
                  f"{hooked_s / plain_s:>5.2f}× {(hooked_mib - plain_mib) * 2**20 / n:>7.0f} B")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
