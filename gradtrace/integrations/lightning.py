"""A Lightning callback that watches the training as gradtrace.watch() does: the run log
written as it goes, each finding told through Lightning's logger (rank 0's), and the fit
stopped (trainer.should_stop) once a stop_on finding fired."""

from __future__ import annotations

import logging
from typing import Any

import lightning.pytorch as pl

from . import WatchingCallback

FRAMEWORK = frozenset({"lightning", "pytorch_lightning", "lightning_fabric"})
LOGGER = logging.getLogger("lightning.pytorch.callbacks.gradtrace")


class GradtraceCallback(WatchingCallback, pl.Callback):
    """`Trainer(callbacks=[GradtraceCallback(log="run.jsonl")])`: each fit's training
    watched; `.watching` is its trace once the fit ends (`.watching.show()`)."""

    FRAMEWORK, LOGGER = FRAMEWORK, LOGGER

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.training.begin(trainer.global_rank)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.watching.stopped is not None:
            trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.training.end(None)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        self.training.end(exception)
