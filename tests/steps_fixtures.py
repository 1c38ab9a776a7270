"""Hand-made traces of training loops (literal records, no torch) for the steps tests."""

from __future__ import annotations

import math
from collections.abc import Callable

from gradtrace.model.records import LeafStep, Pass, Steps, Trace

BACKWARD = Pass(kind="backward", roots=(), retain_graph=False, create_graph=False, error=None,
                line=12, code="loss.backward()")


def loop_trace(steps: Steps | None, scenario: str = "loop.py") -> Trace:
    """A trace of steps and their passes (the graph is not what these tests read)."""
    return Trace(scenario=scenario, gradtrace_version="0", torch_version="2.13", outputs=(),
                 output_names=(), root_reason="", nodes=(), edges=(), tensors=(),
                 passes=(BACKWARD,) * (0 if steps is None else len(steps.grads)),
                 findings=(), steps=steps)


def leaf(norm: float, finite: bool = True) -> LeafStep:
    return LeafStep(norm=norm, max_abs=norm, finite=finite, kept=False)


def steps_of(norms: dict[str, list[float | None]], modules: dict[str, str | None] | None = None,
             loss: list[float | None] | None = None) -> Steps:
    """Steps from each leaf's norm per pass (None: no .grad; NaN or inf: not finite)."""
    names = tuple(norms)
    passes = len(next(iter(norms.values())))
    grads = tuple(tuple(None if (x := norms[n][p]) is None else leaf(x, math.isfinite(x))
                        for n in names) for p in range(passes))
    return Steps(leaves=names, modules=tuple((modules or {}).get(n) for n in names),
                 loss=tuple(loss if loss is not None else [None] * passes),
                 optimizer_steps=(1,) * passes, grads=grads)


def mlp_loop(passes: int = 1_000, layers: int = 4, nan_from: int | None = None,
             wobble: Callable[[int, int], float] = lambda p, i: 1 + 0.3 * math.sin(p / 20 + i),
             ) -> Trace:
    """An MLP's training loop: model.0, model.2, … (a weight and a bias each), gradient norms
    decaying over the passes, the loss too; model.2.bias turns NaN from pass nan_from."""
    norms: dict[str, list[float | None]] = {}
    modules: dict[str, str | None] = {}
    for k in range(layers):
        for j, kind in enumerate(("weight", "bias")):
            name = f"model.{2 * k}.{kind}"
            i = 2 * k + j
            norms[name] = [(i + 1) * math.exp(-p / 300) * wobble(p, i)
                           if nan_from is None or name != "model.2.bias" or p + 1 < nan_from
                           else math.nan for p in range(passes)]
            modules[name] = f"model.{2 * k}"
    loss = [2.3 * math.exp(-p / 200) + 0.1 for p in range(passes)]
    return loop_trace(steps_of(norms, modules, loss))
