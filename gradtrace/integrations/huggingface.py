"""A Hugging Face TrainerCallback that watches the training as gradtrace.watch() does: the
run log written as it goes, each finding told through transformers' logging (the main
process's), and the training stopped (control.should_training_stop) once a stop_on finding
fired."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.utils import logging as transformers_logging

from . import WatchingCallback

FRAMEWORK = frozenset({"transformers", "accelerate"})
LOGGER = transformers_logging.get_logger("transformers.gradtrace")


class GradtraceCallback(WatchingCallback, TrainerCallback):
    """`Trainer(..., callbacks=[GradtraceCallback(log="run.jsonl")])`: each train()'s
    training watched; `.watching` is its trace once it ends (`.watching.show()`)."""

    FRAMEWORK, LOGGER = FRAMEWORK, LOGGER

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
