"""Naming cost: the share of a `show` run spent naming tensors and modules (globals, the
locals of the scenario's frames, paths through containers, names kept across passes, module
paths), against the whole run measured in the same run.

Two targets: gradtrace/examples/real/gpt_tiny.py as it is (one pass), and the same model held by a
plain object (`trainer.model`, its batches in a list) trained for 30 steps, so that names
through containers are looked up at every pass. The median share over the repeats is printed.

    .venv/bin/python bench/naming_cost.py [--repeats N]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradtrace.capture import runner, session
from gradtrace.capture.naming import names
from gradtrace.capture.options import CaptureOptions
from gradtrace.capture.passes import recorder

BUDGET = 0.05
GPT = Path(__file__).resolve().parent.parent / "gradtrace" / "examples" / "real" / "gpt_tiny.py"

LOOP = '''

class Trainer:
    def __init__(self, model, batches):
        self.model = model
        self.batches = batches
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.losses = []

    def step(self, idx, targets):
        self.optimizer.zero_grad()
        loss = self.model(idx, targets)
        loss.backward()
        self.optimizer.step()
        self.losses.append(loss.item())


torch.manual_seed(0)
trainer = Trainer(GPT(), [(torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16)))
                          for _ in range(30)])
for idx, targets in trainer.batches:
    trainer.step(idx, targets)
print(trainer.losses[-1])
'''


class Clock:
    """Time spent inside the wrapped functions (an outer call's time only, when nested)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._depth = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._depth -= 1
                if not self._depth:
                    self.spent += time.perf_counter() - start
        return timed


def instrumented(clock: Clock) -> list[tuple[Any, str, Any]]:
    """Wrap every naming step with clock; the (owner, attribute, original) to restore."""
    targets: list[tuple[Any, str]] = [
        (names.ScenarioNames, "look"), (names.ScenarioNames, "merged"),
        (names.ScenarioNames, "remember"), (names.ScenarioNames, "earlier"),
        (names, "named_tensors"), (recorder, "named_tensors"), (session, "named_tensors"),
        (session, "module_paths")]
    saved = [(owner, attribute, getattr(owner, attribute)) for owner, attribute in targets]
    for owner, attribute, original in saved:
        setattr(owner, attribute, clock.wrap(original))
    return saved


def share(path: Path) -> tuple[float, float]:
    """(whole run in seconds, the share of it spent naming) for one run of path."""
    clock = Clock()
    saved = instrumented(clock)
    try:
        start = time.perf_counter()
        runner.run_scenario(str(path), CaptureOptions())
        whole = time.perf_counter() - start
    finally:
        for owner, attribute, original in saved:
            setattr(owner, attribute, original)
    return whole, clock.spent / whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        loop = Path(folder) / "gpt_tiny_trainer.py"
        source = GPT.read_text()
        loop.write_text(source[:source.index("torch.manual_seed(0)\nmodel")] + LOOP)
        for label, path in (("gpt_tiny.py (1 pass)", GPT),
                            ("gpt_tiny in trainer.model, 30 passes", loop)):
            share(path)  # warm up
            runs = [share(path) for _ in range(args.repeats)]
            whole = statistics.median(w for w, _ in runs)
            ratio = statistics.median(s for _, s in runs)
            print(f"{label}: run {whole * 1000:.0f} ms, naming {ratio * 100:.2f}% of it "
                  f"(budget {BUDGET * 100:.0f}%: {'within' if ratio <= BUDGET else 'OVER'})")


if __name__ == "__main__":
    main()
