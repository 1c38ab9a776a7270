"""gradtrace.watch() as the training frameworks' own callbacks: `lightning` (Lightning's
Trainer) and `huggingface` (transformers' Trainer). Each module imports its framework."""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterable
from types import FrameType
from typing import Protocol

from ..api import Watching, watch
from ..compat.cpython import caller_frame


def calling_frame(frameworks: frozenset[str]) -> FrameType | None:
    """The frame of the code that called the trainer: the innermost one outside gradtrace,
    torch and the framework's packages (its variables name the parameters)."""
    frame = caller_frame()
    while frame is not None and str(frame.f_globals.get("__name__", "")).partition(".")[0] \
            in frameworks | {"gradtrace", "torch"}:
        frame = frame.f_back
    return frame


class TrainingWatch:
    """One training at a time, watched: started at its beginning, stopped once, at its end
    or at an error (whichever a framework tells first), else as the process exits."""

    def __init__(self, watching: Watching, frameworks: frozenset[str]) -> None:
        self.watching, self.frameworks = watching, frameworks
        self._running = False
        self._error_before: BaseException | None = None

    def begin(self, rank: int) -> None:
        """Record the training from now on, named from the code that called the trainer."""
        self.watching.start(calling_frame(self.frameworks), rank)
        self._running = True
        self._error_before = getattr(sys, "last_value", None)  # an earlier one (IPython's)
        atexit.register(self._exits)

    def end(self, error: BaseException | None) -> None:
        """Stop recording, once (an error after the training's end: already stopped)."""
        if self._running:
            self._running = False
            atexit.unregister(self._exits)
            self.watching.stop(error)

    def _exits(self) -> None:
        # a framework that tells no callback of an error (transformers' train() raising):
        # the log ends as the script does, with the error that ended it
        error = getattr(sys, "last_value", None)
        self.end(error if error is not None and error is not self._error_before
                 else RuntimeError("the process exited while the training ran"))


class Warns(Protocol):
    """A framework's logger, as the callbacks use it."""

    def warning(self, msg: str) -> None: ...


class WatchingCallback:
    """What both frameworks' callbacks are made of: each training's watch, its findings told
    to the framework's logger, named from the code outside the framework's packages."""

    FRAMEWORK: frozenset[str]
    LOGGER: Warns

    def __init__(self, log: str | os.PathLike[str] | None = None,
                 stop_on: str | Iterable[str] | None = None, saved: bool = False,
                 flow: bool = True) -> None:
        super().__init__()
        self.training = TrainingWatch(watch(log, stop_on, self.LOGGER.warning, saved, flow),
                                      self.FRAMEWORK)

    @property
    def watching(self) -> Watching:
        return self.training.watching
