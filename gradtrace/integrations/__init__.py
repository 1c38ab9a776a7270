"""gradtrace.watch() as the training frameworks' own callbacks: `lightning` (Lightning's
Trainer) and `huggingface` (transformers' Trainer). Each module imports its framework."""

from __future__ import annotations

from types import FrameType

from ..compat.cpython import caller_frame


def calling_frame(frameworks: frozenset[str]) -> FrameType | None:
    """The frame of the code that called the trainer: the innermost one outside gradtrace,
    torch and the framework's packages (its variables name the parameters)."""
    frame = caller_frame()
    while frame is not None and str(frame.f_globals.get("__name__", "")).partition(".")[0] \
            in frameworks | {"gradtrace", "torch"}:
        frame = frame.f_back
    return frame
