"""Errors the user can fix, and the exit codes the CLI turns them into."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, as promised in the README."""

    OK = 0
    FINDINGS = 1  # a check, diff or --strict finding failed
    USAGE = 2  # bad usage, or a scenario that cannot run


class GradtraceError(Exception):
    """A problem in the user's input: a message, and a hint on how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ScenarioError(GradtraceError):
    """The scenario file cannot be read, compiled or run."""


class TraceFileError(GradtraceError):
    """A saved trace JSON file is unreadable or not a gradtrace trace."""


class ExportError(GradtraceError):
    """An export cannot be made or written: unknown format, unwritable path, no Graphviz."""
