"""`gradtrace watch --tensorboard DIR`: each step's loss and gradient norms (global, per module)
as TensorBoard scalars, read back from the event files and compared with what plain torch
computes for the same seeded loop; written whole when --stop-on stops the run or the script
raises; refused before the script runs when DIR is a file or tensorboard is not installed."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import invoke, write_script
from plain_python import run_gradtrace

from gradtrace.cli.scalars import row_scalars
from gradtrace.model.records import LeafStep, Steps

# A seeded MLP with a parameter outside any module (`scale`, a module of its own name);
# from step NAN_FROM its inputs are NaN. {after} is a line run after each backward: nothing
# under gradtrace, the reference's recording here.
LOOP = """\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
scale = torch.ones(2, requires_grad=True)
optimizer = torch.optim.SGD([*model.parameters(), scale], lr=0.05)
x, y = torch.randn(16, 4), torch.randn(16, 2)
for step in range(1, 13):
    inputs = x * float("nan") if step >= {nan_from} else x
    loss = ((model(inputs) * scale - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    {after}
    optimizer.step()
"""
NAN_FROM = 8


def _events(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Each scalar tag's (global_step, value) points, as TensorBoard reads the event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}


def _closed() -> bool:
    """No event file writer's thread is left: the writer was closed (and so flushed)."""
    return not [t for t in threading.enumerate() if type(t).__name__ == "_AsyncWriterThread"]


def _reference(source: str) -> dict[str, list[float]]:
    """The loop run by plain torch: per tag, its value after each backward (float64 norms of
    p.grad; a module's, the root of its parameters' squared norms summed)."""
    expected: dict[str, list[float]] = {}

    def seen(namespace: dict[str, Any]) -> None:
        model, scale = namespace["model"], namespace["scale"]
        squares: dict[str, float] = {}
        for name, p in [*(("model." + n, p) for n, p in model.named_parameters()),
                        ("scale.", scale)]:
            module = name.rpartition(".")[0]
            squares[module] = squares.get(module, 0.0) + p.grad.double().norm().item() ** 2
        values = {"loss": namespace["loss"].item(),
                  "grad_norm/global": math.sqrt(sum(squares.values())),
                  **{f"grad_norm/{m}": math.sqrt(s) for m, s in squares.items()}}
        for tag, value in values.items():
            expected.setdefault(tag, []).append(value)

    namespace: dict[str, Any] = {}
    namespace["seen"] = lambda: seen(namespace)
    exec(compile(source, "<reference>", "exec"), namespace)
    return expected


def _same(got: float, expected: float) -> bool:
    """Equal to 1e-6 relative (TensorBoard keeps float32), NaN to NaN."""
    if math.isnan(expected):
        return math.isnan(got)
    return math.isclose(got, expected, rel_tol=1e-6)


def test_the_scalars_are_the_loss_and_norms_plain_torch_computes(tmp_path: Path) -> None:
    script = write_script(tmp_path, LOOP.format(nan_from=NAN_FROM, after="pass"))
    board = tmp_path / "runs" / "mlp"  # made, with its parent
    result = invoke("watch", script, "--tensorboard", board, "--stop-on", "nan-value")
    assert result.exit_code == 1, result.output  # stopped at the NaN's step
    assert _closed()
    expected = _reference(LOOP.format(nan_from=NAN_FROM, after="seen()"))
    events = _events(board)
    assert set(events) == {"loss", "grad_norm/global", "grad_norm/model.0",
                           "grad_norm/model.2", "grad_norm/scale"}
    for tag, points in events.items():
        # global_step: the 1-based pass; the last, the NaN's pass --stop-on stopped at
        assert [step for step, _ in points] == list(range(1, NAN_FROM + 1)), tag
        for (step, got), want in zip(points, expected[tag], strict=False):
            assert _same(got, want), (tag, step, got, want)
    # written as they are: the NaN pass's loss and every norm NaN, the ones before finite
    assert all(math.isnan(points[-1][1]) for points in events.values())
    assert all(math.isfinite(value) for points in events.values() for _, value in points[:-1])


def test_a_script_that_raises_leaves_every_step_it_made(tmp_path: Path) -> None:
    script = write_script(tmp_path, LOOP.format(
        nan_from=99, after="if step == 5:\n        raise RuntimeError('broke')"))
    board = tmp_path / "runs"
    result = invoke("watch", script, "--tensorboard", board)
    assert result.exit_code == 2 and "broke" in result.output, result.output
    assert _closed()
    expected = _reference(LOOP.format(nan_from=99, after="seen()"))
    loss = _events(board)["loss"]
    assert [step for step, _ in loss] == [1, 2, 3, 4, 5]
    assert all(_same(got, want) for (_, got), want in zip(loss, expected["loss"],
                                                          strict=False))


def _refused(run: Callable[[], Any], marker: Path) -> str:
    """What a refused watch said (exit 2, an error, no traceback); its script never ran."""
    result = run()
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    said = " ".join(result.stderr.split())  # as rich wrapped it, unwrapped
    assert code == 2 and said.startswith("error: --tensorboard "), said
    assert "Traceback" not in said + result.stdout
    assert not marker.exists()
    return said


MARKS = "open({mark!r}, 'w').close()\n"


def test_a_tensorboard_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    marker, notes = tmp_path / "ran", tmp_path / "notes.txt"
    notes.write_text("mine\n")
    script = write_script(tmp_path, MARKS.format(mark=str(marker)))
    said = _refused(lambda: invoke("watch", script, "--tensorboard", notes), marker)
    assert "is a file, not a folder" in said and "hint:" in said
    assert notes.read_text() == "mine\n"


def test_without_tensorboard_the_option_says_how_to_install_it(tmp_path: Path) -> None:
    """tensorboard made missing as python starts (sys.modules' None: an import of it fails)."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['tensorboard'] = None\n")
    marker = tmp_path / "ran"
    script = write_script(tmp_path, MARKS.format(mark=str(marker)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(hidden), *filter(None, [os.environ.get("PYTHONPATH")])])}
    said = _refused(lambda: run_gradtrace("watch", script, "--tensorboard", tmp_path / "tb",
                                          cwd=tmp_path, env=env), marker)
    assert "needs the tensorboard package" in said and "pip install tensorboard" in said
    assert not (tmp_path / "tb").exists()


def test_non_finite_norms_are_written_as_they_are_and_a_missing_grad_is_no_point() -> None:
    """The scalars of hand-made rows: a module's norm NaN when a leaf's is, inf when every
    non-finite one is inf; a module with no .grad in a pass, no point there."""
    def g(norm: float) -> LeafStep:
        return LeafStep(norm, norm, math.isfinite(norm), False)

    rows = Steps(("a.w", "a.b", "c.w", "free"), ("a", "a", "c", None), (1.5, None),
                 (0, 0), ((g(3.0), g(4.0), g(math.inf), None),
                          (g(math.nan), g(1.0), None, g(2.0))))
    nan_said = {tag: tuple("nan" if v is not None and math.isnan(v) else v for v in values)
                for tag, values in row_scalars(rows)}
    assert nan_said == {"loss": (1.5, None), "grad_norm/global": (math.inf, "nan"),
                        "grad_norm/a": (5.0, "nan"), "grad_norm/c": (math.inf, None),
                        "grad_norm/free": (None, 2.0)}
