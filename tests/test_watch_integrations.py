"""gradtrace.watch() and the Lightning and Hugging Face callbacks: each writes the run log as
the training goes, with plain python's gradient norms; a NaN at a known step is told through
the framework's own logger with that step and stops the training; a healthy run tells
nothing."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import gradtrace
from gradtrace.capture.session import RECORDING
from gradtrace.model.run_log import RunLog, read_log

# Lightning and transformers take seconds each to import: their tests run in the slow tier,
# as tests/test_frameworks.py's do
FRAMEWORK = pytest.mark.slow
Norms = list[dict[str, float]]  # each backward's gradient norm per parameter name


def logged_norms(log: RunLog) -> Norms:
    """Each step row's gradient norm per leaf, as the log holds them."""
    assert log.steps is not None
    return [{name: g.norm for name, g in zip(log.steps.leaves, row, strict=True)
             if g is not None} for row in log.steps.grads]


def named_norms(model: torch.nn.Module, prefix: str = "model.") -> dict[str, float]:
    """The norm of each parameter's .grad now, named as gradtrace names it (the variable)."""
    return {prefix + n: float(p.grad.norm()) for n, p in model.named_parameters()
            if p.grad is not None}


def assert_same_norms(logged: Norms, plain: Norms) -> None:
    assert [sorted(row) for row in logged] == [sorted(row) for row in plain]
    for got, expected in zip(logged, plain, strict=True):
        assert got == pytest.approx(expected, rel=1e-6)  # float64 of float32 gradients


def said_by(logger: logging.Logger, caplog: pytest.LogCaptureFixture) -> list[str]:
    """What that logger said in the test."""
    return [r.getMessage() for r in caplog.records if r.name == logger.name]


@pytest.fixture
def listen(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[logging.Logger], None]]:
    """listen(logger): caplog hears it, though a framework's logger may not propagate to
    the root's handlers."""
    loggers: list[logging.Logger] = []

    def listen_to(logger: logging.Logger) -> None:
        logger.addHandler(caplog.handler)
        loggers.append(logger)

    yield listen_to
    for logger in loggers:
        logger.removeHandler(caplog.handler)


# ---- gradtrace.watch() around a plain loop

def plain_loop(steps: int, nan_at: int | None = None,
               watching: gradtrace.Watching | None = None) -> tuple[Norms, int]:
    """A tiny MLP's SGD loop (seed 0); its inputs NaN at step nan_at; stopped once watching
    says so. Each step's norms after backward, and the steps run."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    norms: Norms = []
    for step in range(1, steps + 1):
        inputs = x * float("nan") if step == nan_at else x
        loss = ((model(inputs) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        norms.append(named_norms(model))
        optimizer.step()
        if watching is not None and watching.stopped is not None:
            break
    return norms, step


def test_watch_writes_plain_pythons_norms_as_the_block_runs(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plain, _ = plain_loop(6)
    log = tmp_path / "run.jsonl"
    with gradtrace.watch(log=log) as watched:
        assert read_log(log.read_bytes()).header is not None  # written as the block starts
        norms, _ = plain_loop(6)
        assert not read_log(log.read_bytes()).ended
    written = read_log(log.read_bytes())
    assert written.outcome == "finished" and written.findings == ()
    assert_same_norms(logged_norms(written), plain)
    assert norms == plain  # watching changed no number
    assert len(watched.trace.passes) == 6  # the block's trace, as record()'s
    assert said_by(logging.getLogger("gradtrace"), caplog) == []


def test_watch_says_a_nan_at_its_step_and_the_loop_stops_there(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = tmp_path / "run.jsonl"
    with gradtrace.watch(log=log, stop_on=["nan-value"]) as watched:
        _, stopped_at = plain_loop(10, nan_at=4, watching=watched)
    assert stopped_at == 4 and watched.stopped is not None
    assert watched.stopped.code == "nan-value"
    said = said_by(logging.getLogger("gradtrace"), caplog)
    assert said and said[0].startswith("step 4: error [nan-value]"), said
    written = read_log(log.read_bytes())
    assert written.outcome == "stopped"
    assert [(f.step, f.finding.code) for f in written.findings][0] == (4, "nan-value")


def test_watch_says_to_the_callable_given() -> None:
    said: list[str] = []
    with gradtrace.watch(say=said.append) as watched:  # no log: said only
        plain_loop(5, nan_at=3)
    assert said[0].startswith("step 3: error [nan-value]") and watched.stopped is None


def test_watch_refuses_an_unknown_code() -> None:
    with pytest.raises(gradtrace.GradtraceError, match="no finding has the code nan-valu"):
        gradtrace.watch(stop_on="nan-valu")


# ---- Lightning

def lightning_fit(callback: Any | None, nan_at: int | None = None,
                  fails_at: int | None = None) -> tuple[Norms, int]:
    """A tiny regressor's Lightning fit (seed 0, 8 batches) with callback (a
    GradtraceCallback, or none); its batch nan_at (from 1) NaN, fails_at raises ValueError.
    Each backward's norms, read by a plain callback, and the steps run."""
    import lightning as L

    class Regressor(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                           torch.nn.Linear(8, 1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            if batch_idx + 1 == fails_at:
                raise ValueError("a bad batch")
            x = x * float("nan") if batch_idx + 1 == nan_at else x
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class PlainNorms(L.Callback):
        def __init__(self) -> None:
            self.norms: Norms = []

        def on_after_backward(self, trainer: L.Trainer, module: L.LightningModule) -> None:
            self.norms.append(named_norms(module))

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    model = Regressor()
    plain = PlainNorms()
    trainer = L.Trainer(max_epochs=1, callbacks=[plain, *([callback] if callback else [])],
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", devices=1)
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
    return plain.norms, trainer.global_step


@FRAMEWORK
def test_lightning_callback_logs_plain_pythons_norms(
        tmp_path: Path, listen: Any, caplog: pytest.LogCaptureFixture) -> None:
    from gradtrace.integrations.lightning import LOGGER, GradtraceCallback

    listen(LOGGER)
    plain, _ = lightning_fit(None)
    callback = GradtraceCallback(log=tmp_path / "run.jsonl", stop_on="nan-value")
    norms, steps = lightning_fit(callback)
    written = read_log((tmp_path / "run.jsonl").read_bytes())
    assert steps == 8 and written.outcome == "finished" and written.findings == ()
    assert_same_norms(logged_norms(written), plain)
    assert norms == plain
    assert len(callback.watching.trace.passes) == 8  # the fit's trace
    assert said_by(LOGGER, caplog) == []


@FRAMEWORK
def test_lightning_callback_tells_a_nan_at_its_step_and_stops_the_fit(
        tmp_path: Path, listen: Any, caplog: pytest.LogCaptureFixture) -> None:
    from gradtrace.integrations.lightning import LOGGER, GradtraceCallback

    listen(LOGGER)
    _, steps = lightning_fit(GradtraceCallback(log=tmp_path / "run.jsonl",
                                               stop_on="nan-value"), nan_at=5)
    said = said_by(LOGGER, caplog)
    assert said and said[0].startswith("step 5: error [nan-value]"), said
    assert steps == 5  # trainer.should_stop after the batch that fired
    written = read_log((tmp_path / "run.jsonl").read_bytes())
    assert written.outcome == "stopped" and written.findings[0].step == 5


@FRAMEWORK
def test_lightning_callback_ends_a_fit_that_raised(tmp_path: Path) -> None:
    from gradtrace.integrations.lightning import GradtraceCallback

    callback = GradtraceCallback(log=tmp_path / "run.jsonl")
    with pytest.raises(ValueError, match="a bad batch"):
        lightning_fit(callback, fails_at=3)
    written = read_log((tmp_path / "run.jsonl").read_bytes())
    assert written.outcome == "failed" and written.steps is not None
    assert len(written.steps.loss) == 2
    assert RECORDING == []  # the recording ended with the fit


# ---- Hugging Face

def hf_train(callback: Any | None, nan_at: int | None = None,
             fails_at: int | None = None) -> tuple[Norms, int]:
    """A tiny regressor under transformers' Trainer (seed 0, 6 steps of 4, no clipping) with
    callback (a GradtraceCallback, or none); its forward nan_at (from 1) NaN, fails_at raises
    ValueError. Each step's norms before the optimizer steps, read by a plain callback, and
    the steps run."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Pairs(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
        def __init__(self) -> None:
            g = torch.Generator().manual_seed(1)
            self.x, self.y = torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g)

        def __len__(self) -> int:
            return len(self.y)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"x": self.x[i], "labels": self.y[i]}

    class Regressor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                           torch.nn.Linear(8, 1))
            self.calls = 0

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
            self.calls += 1
            if self.calls == fails_at:
                raise ValueError("a bad batch")
            x = x * float("nan") if self.calls == nan_at else x
            return {"loss": torch.nn.functional.mse_loss(self.net(x), labels)}

    class PlainNorms(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.norms: Norms = []

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any,
                                  model: torch.nn.Module, **kwargs: Any) -> None:
            self.norms.append(named_norms(model))  # no clipping: the gradients as made

    torch.manual_seed(0)
    model = Regressor()
    plain = PlainNorms()
    with tempfile.TemporaryDirectory() as output:  # the trainer's own: nothing is saved in it
        args = TrainingArguments(output_dir=output, per_device_train_batch_size=4,
                                 max_steps=6, max_grad_norm=0, report_to=[],
                                 save_strategy="no", logging_strategy="no", use_cpu=True,
                                 disable_tqdm=True, dataloader_num_workers=0, seed=0)
        trainer = Trainer(model=model, args=args, train_dataset=Pairs(),
                          callbacks=[plain, *([callback] if callback else [])])
        trainer.train()
    return plain.norms, trainer.state.global_step


@FRAMEWORK
def test_hugging_face_callback_logs_plain_pythons_norms(
        tmp_path: Path, listen: Any, caplog: pytest.LogCaptureFixture) -> None:
    from gradtrace.integrations.huggingface import LOGGER, GradtraceCallback

    listen(LOGGER)
    plain, _ = hf_train(None)
    callback = GradtraceCallback(log=tmp_path / "run.jsonl", stop_on="nan-value")
    norms, steps = hf_train(callback)
    written = read_log((tmp_path / "run.jsonl").read_bytes())
    assert steps == 6 and written.outcome == "finished" and written.findings == ()
    assert_same_norms(logged_norms(written), plain)
    assert norms == plain
    assert len(callback.watching.trace.passes) == 6
    assert said_by(LOGGER, caplog) == []


@FRAMEWORK
def test_hugging_face_callback_tells_a_nan_at_its_step_and_stops_training(
        tmp_path: Path, listen: Any, caplog: pytest.LogCaptureFixture) -> None:
    from gradtrace.integrations.huggingface import LOGGER, GradtraceCallback

    listen(LOGGER)
    _, steps = hf_train(GradtraceCallback(log=tmp_path / "run.jsonl", stop_on="nan-value"),
                        nan_at=3)
    said = said_by(LOGGER, caplog)
    assert said and said[0].startswith("step 3: error [nan-value]"), said
    assert steps == 3  # control.should_training_stop after the step that fired
    written = read_log((tmp_path / "run.jsonl").read_bytes())
    assert written.outcome == "stopped" and written.findings[0].step == 3


@FRAMEWORK
def test_hugging_face_callback_ends_a_train_that_raised_as_the_next_begins(
        tmp_path: Path) -> None:
    """transformers calls no callback when train() raises: the recording goes on until the
    callback's next train() begins, which ends it and records its own steps alone."""
    from gradtrace.integrations.huggingface import GradtraceCallback

    log = tmp_path / "run.jsonl"
    callback = GradtraceCallback(log=log)
    with pytest.raises(ValueError, match="a bad batch"):
        hf_train(callback, fails_at=3)
    assert not read_log(log.read_bytes()).ended and RECORDING  # it goes on
    _, steps = hf_train(callback)
    written = read_log(log.read_bytes())
    assert steps == 6 and written.outcome == "finished"
    assert written.steps is not None and len(written.steps.loss) == 6  # its own steps alone
    assert RECORDING == []


@FRAMEWORK
def test_hugging_face_callback_ends_the_log_of_a_script_that_raised_in_train(
        tmp_path: Path) -> None:
    """transformers calls no callback when train() raises: the log ends as the script does,
    'failed', with the steps it ran."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_watch_integrations import hf_train\n"
        "from gradtrace.integrations.huggingface import GradtraceCallback\n"
        f"hf_train(GradtraceCallback(log={str(tmp_path / 'run.jsonl')!r}), fails_at=3)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1 and "ValueError: a bad batch" in done.stderr, done.stderr
    written = read_log((tmp_path / "run.jsonl").read_bytes())
    assert written.ended and written.outcome == "failed"
    assert written.steps is not None and len(written.steps.loss) == 2
