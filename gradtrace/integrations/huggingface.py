"""A Hugging Face TrainerCallback that watches the training as gradtrace.watch() does: the
run log written as it goes, each finding told through transformers' logging (the main
process's), and the training stopped (control.should_training_stop) once a stop_on finding
fired."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.utils import logging as transformers_logging

from ..api import Watching, watch
from . import TrainingWatch

FRAMEWORK = frozenset({"transformers", "accelerate"})
LOGGER = transformers_logging.get_logger("transformers.gradtrace")


class GradtraceCallback(TrainerCallback):
    """`Trainer(..., callbacks=[GradtraceCallback(log="run.jsonl")])`: each train()'s
    training watched; `.watching` is its trace once it ends (`.watching.show()`)."""

    def __init__(self, log: str | os.PathLike[str] | None = None,
                 stop_on: str | Iterable[str] | None = None, saved: bool = False,
                 flow: bool = True) -> None:
        self.training = TrainingWatch(watch(log, stop_on, LOGGER.warning, saved, flow),
                                      FRAMEWORK)

    @property
    def watching(self) -> Watching:
        return self.training.watching

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, **kwargs: Any) -> None:
        # transformers has no hook for a train() that raised: its recording ends here
        self.training.end(RuntimeError("the previous train() raised"))
        self.training.begin(args.process_index)

    def on_step_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        if self.watching.stopped is not None:
            control.should_training_stop = True

    def on_train_end(self, args: TrainingArguments, state: TrainerState,
                     control: TrainerControl, **kwargs: Any) -> None:
        self.training.end(None)
