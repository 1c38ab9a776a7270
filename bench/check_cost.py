"""`gradtrace check` cost: time and peak memory of checking a custom Square on an n×n input,
for n = 10 … 300, against the plain script (`python square.py`, torch import included) in
the same run.

Below --max-jacobian (1,000,000 entries: n <= 31) gradcheck and gradgradcheck run in full;
above it, 32 random coordinates of each input and output are checked. Each figure is one
fresh process (peak RSS from getrusage of that child alone); ratios are against the plain
script measured just before it.

    .venv/bin/python bench/check_cost.py [--sizes 10,30,100,300] [--max-jacobian N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from measure import measured

SCENARIO = '''import torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


x = torch.rand({n}, {n}, requires_grad=True)
Square.apply(x).sum().backward()
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,30,100,300")
    parser.add_argument("--max-jacobian", default=None)
    args = parser.parse_args()
    gradtrace = [sys.executable, "-m", "gradtrace", "check"]
    if args.max_jacobian:
        gradtrace += ["--max-jacobian", args.max_jacobian]
    print(f"{'input':>9} {'Jacobian':>14} {'plain s':>8} {'check s':>8} {'ratio':>6} "
          f"{'plain MiB':>9} {'check MiB':>9} {'exit':>4}")
    with tempfile.TemporaryDirectory() as folder:
        for n in map(int, args.sizes.split(",")):
            path = Path(folder) / f"square_{n}.py"
            path.write_text(SCENARIO.format(n=n))
            _, plain_s, plain_mib = measured([sys.executable, str(path)])
            code, check_s, check_mib = measured([*gradtrace, str(path)])
            print(f"{n:>4}×{n:<4} {(n * n) ** 2:>14,} {plain_s:>8.2f} {check_s:>8.2f} "
                  f"{check_s / plain_s:>5.1f}× {plain_mib:>9.0f} {check_mib:>9.0f} {code:>4}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
