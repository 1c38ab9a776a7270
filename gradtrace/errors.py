"""Errors the user can fix: a message and a hint. The CLI turns them into exit code 2."""

from __future__ import annotations

from typing import Any


class GradtraceError(Exception):
    """A problem in the user's input: a message, and a hint on how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ScenarioError(GradtraceError):
    """The scenario file cannot be read, compiled or run (line: the scenario line, if known;
    printed: what it printed before it stopped, shown with the error when no report shows it;
    brief: the message without the exception's text, said when a report shows it whole)."""

    def __init__(self, message: str, hint: str | None = None, line: int | None = None,
                 printed: str = "", brief: str | None = None) -> None:
        super().__init__(message, hint)
        self.line = line
        self.printed = printed
        self.brief = brief


class ScenarioStopped(ScenarioError):
    """The code raised or ran out of time after recording something: trace holds what was
    recorded up to there (a Trace, plain data, with a finding saying where it stopped)."""

    def __init__(self, stopped: ScenarioError, trace: Any) -> None:  # a model.records.Trace
        super().__init__(stopped.message, stopped.hint, stopped.line, stopped.printed,
                         stopped.brief)
        self.trace = trace
        self.failed_call = False  # a recorded call raised: a backward, grad or gradcheck


class NoGraph(ScenarioError):
    """The target made no autograd graph: nothing to show or draw, in every command alike."""

    def __init__(self, label: str | None, why: str, line: int | None = None) -> None:
        super().__init__(f"{label or 'the code'}: no output to trace: {why}",
                         "an output is a tensor with a grad_fn; see `gradtrace show --help`",
                         line)


class TraceFileError(GradtraceError):
    """A saved trace JSON file is unreadable or not a gradtrace trace."""


class RunLogError(TraceFileError):
    """A run log (`watch --log`) is unreadable, not a gradtrace log, or has an invalid line."""


class ExportError(GradtraceError):
    """An export cannot be made or written: unknown format, unwritable path, no Graphviz."""


class Interrupted(GradtraceError):
    """The user pressed Ctrl-C while a scenario ran, or it raised KeyboardInterrupt itself."""
