"""`gradtrace watch` on a terminal: a live panel (the step, sparklines of the loss and the
largest modules' gradient norms, the rate, gradtrace's own share) instead of heartbeat lines,
each finding above it with its step; off a terminal the lines, as before."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from helpers import read_terminal
from plain_python import run_gradtrace, start_gradtrace
from rich.console import Console

from gradtrace.model.records import LeafStep, Steps
from gradtrace.render.live_panel import Pace, RunSparks, Sparks, live_panel, module_norms
from gradtrace.render.series import bucketed, grad_series, mean
from gradtrace.render.steps import BLOCKS, WIDTH

EXAMPLES = "gradtrace/examples"


def _on_terminal(*args: str) -> str:
    """What `gradtrace watch ARGS` writes on a terminal (stdout and stderr both)."""
    leader, follower = os.openpty()
    done = start_gradtrace("watch", *args, stdout=follower, stderr=follower,
                           env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(follower)
    seen = read_terminal(leader)
    done.wait(300)
    assert done.returncode == 0, seen.decode(errors="replace")
    return seen.decode(errors="replace")


def test_a_loop_on_a_terminal_shows_the_panel_not_heartbeat_lines() -> None:
    screen = _on_terminal(f"{EXAMPLES}/loops/mlp_1000_steps.py")
    steps = [int(n.replace(",", "")) for n in re.findall(r"step ([\d,]+)\x1b", screen)]
    assert max(steps) > 0 and steps == sorted(steps)  # redrawn as the run went
    assert len(steps) < 100  # a few times a second, not once a pass (1,000 of them)
    loss = re.findall(r"loss\s*\x1b\[0m\s+([" + BLOCKS + "]+)", screen)
    assert loss and len(loss[-1]) > 10  # the loss's sparkline
    assert "model.0" in screen and "steps/s" in screen and "of the time in gradtrace's" in screen
    assert "|g|" not in screen  # no heartbeat line
    # the report follows the panel as it was last drawn, and the cursor is given back
    assert screen.rindex("scenario ") > screen.rindex("step ")
    report = screen[screen.rindex("scenario "):]
    assert "\x1b[?25h" in report and "\x1b[1A" not in report  # never drawn over


def test_a_finding_on_a_terminal_is_a_line_above_the_panel_with_its_step() -> None:
    screen = _on_terminal("example:bugs/nan_masked_mean")
    line = re.search(r"\x1b\[2K(step 5: error \[nan-value\] pass 5: loss is NaN[^\r]*)\r\n",
                     screen)
    assert line is not None, screen  # on a line of its own, where the panel was
    assert "\x1b[1;31m!" in screen  # the NaN in the panel's sparklines
    assert "\x1b[1A" not in screen[screen.rindex("scenario "):]  # what the end adds: lines


# A NaN at step 5 of 40 steps of 20 ms each: its rows are read at the end, 0.8 s in, so
# however fast the machine a heartbeat of 0.1 s is due by then.
NAN_AT_5_SLOWLY = """
import time

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
for step in range(40):
    x = torch.full((3,), float("nan")) if step == 4 else torch.randn(3)
    loss = (w * x).sum() ** 2
    loss.backward()
    time.sleep(0.02)
"""


def test_off_a_terminal_forced_colours_still_get_lines_not_the_panel(tmp_path: Path) -> None:
    script = tmp_path / "nan_at_5.py"
    script.write_text(NAN_AT_5_SLOWLY)
    done = run_gradtrace("watch", str(script), "--heartbeat", "0.1",
                         env={**os.environ, "FORCE_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    assert "step 5: error [nan-value]" in done.stderr
    assert "\x1b[" not in done.stderr and "|g|" in done.stderr


def test_sparks_keep_at_most_width_marks_each_a_bucket_of_consecutive_passes() -> None:
    values = [float(k % 7 + 1) for k in range(1000)]
    values[613] = math.nan
    for pick in (max, mean):
        sparks = Sparks(pick)
        for start in range(0, 1000, 64):  # the readback's batches
            sparks.add(values[start:start + 64])
        shown = sparks.shown()
        assert len(shown) <= WIDTH and sparks.size == 32
        reference = [bucketed(values[i:i + sparks.size], 1, pick)[0]
                     for i in range(0, len(values), sparks.size)]
        assert [str(x) for x in shown] == [str(x) for x in reference]
        assert sparks.last == values[-1]


def _rows(*grads: tuple[float | None, ...], loss: float = 1.0,
          leaves: tuple[str, ...] = ("a.w", "b.w")) -> Steps:
    return Steps(leaves, tuple(name.split(".")[0] for name in leaves), (loss,) * len(grads),
                 (1,) * len(grads),
                 tuple(tuple(None if g is None else LeafStep(g, g, math.isfinite(g), False)
                             for g in row) for row in grads))


def test_a_module_seen_late_starts_where_it_was_seen_and_the_largest_are_shown() -> None:
    run = RunSparks()
    run.add(_rows((1.0,), (2.0,), leaves=("a.w",)))
    run.add(_rows((3.0, 50.0), leaves=("a.w", "b.w")))
    run.add(_rows((4.0, math.inf, 9.0), leaves=("a.w", "b.w", "c.w")))
    assert run.steps == 4
    assert run.modules["b"].shown()[:2] == [None, None]
    assert run.largest(2) == ["b", "c"]  # b's inf first, then c's 9 over a's 4; seen order
    console = Console(width=100, height=20, record=True)
    console.print(live_panel(run, Pace(12.5, 0.031, "findings"), height=7))
    text = console.export_text()
    assert "step 4" in text and "12.5 steps/s" in text and "3.1% of the time" in text
    assert "… 1 more module (smaller norms)" in text and "\na " not in text
    assert re.search(r"\nb +▄!  +inf\n", text)
    assert len(text.splitlines()) == 7  # the last one blank: where the cursor waits


def test_module_norms_say_what_grad_series_says() -> None:
    leaves = ("a.w", "a.b", "b.w", "c")
    plain = [(3.0, 4.0, 1.0, 2.0), (0.5, 0.0, 2.0, 1e-30)]
    cases = [plain, [*plain, (1.0, None, 2.0, 3.0)], [*plain, (math.nan, 1.0, 2.0, 3.0)],
             [*plain, (math.inf, 1.0, 2.0, 3.0)], [*plain, (1.0, 2.0, 3.0)]]
    for grads in cases:
        rows = Steps(leaves, ("a", "a", "b", None), (1.0,) * len(grads), (1,) * len(grads),
                     tuple(tuple(None if g is None else LeafStep(g, g, math.isfinite(g), False)
                                 for g in row) for row in grads))
        reference = {s.name: s.values for s in grad_series(rows, by_module=True)}
        fast = module_norms(rows)
        assert list(fast) == list(reference) == ["a", "b", "c"]
        for name, values in fast.items():
            assert [str(x) if x is None or not math.isfinite(x) else round(x, 12)
                    for x in values] == \
                [str(x) if x is None or not math.isfinite(x) else round(x, 12)
                 for x in reference[name]]
    assert module_norms(_rows((3.0, 4.0), leaves=("a.w", "a.b"))) == {"a": [5.0]}
    unfinished = Steps(("a.w",), ("a",), (1.0,), (1,), ((LeafStep(1.0, 1.0, False, False),),))
    assert math.isnan(module_norms(unfinished)["a"][0])  # a finite norm of a non-finite .grad


def test_the_script_s_own_lines_print_above_the_panel(tmp_path: Path) -> None:
    script = tmp_path / "epochs.py"
    script.write_text("""\
import torch
w = torch.zeros(3, requires_grad=True)
for epoch in range(3):
    for step in range(40):
        (w * step).sum().backward()
    print(f"epoch {epoch}: ", end="")
    print("done")
""")
    screen = _on_terminal(str(script))
    # each whole line once, on a line of its own above the panel, before the report
    lines = re.findall(r"\x1b\[2K(epoch \d: done)\r\n", screen)
    assert lines == ["epoch 0: done", "epoch 1: done", "epoch 2: done"], screen
    assert screen.index("epoch 2: done") < screen.rindex("scenario ")
