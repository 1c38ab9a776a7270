"""What a command was asked, as one frozen record its helpers read: the options that show, dot
and diff share, and how a command's parameters become its record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .inputs import RunChoices

Asked = TypeVar("Asked", bound="RunOptions")

# a parameter the error boundary reads from the context: never passed to the command (Typer's
# expose_value=False), so its value is the declaration's default
DEBUG_PARAMETER = "debug_flag"


@dataclass(frozen=True)
class RunOptions:
    """How a command runs its scenarios, and the file it writes: alike in show, dot and diff."""

    script_args: list[str] | None
    root: list[str] | None
    out: Path | None
    no_backward: bool
    timeout: float | None
    passes: str
    profile: bool
    fail_on: str | None

    @classmethod
    def given(cls: type[Asked], parameters: dict[str, Any]) -> Asked:
        """The record of a command's parameters (its locals() as it starts), --debug aside: a
        parameter the record lacks, or a field no parameter fills, is a TypeError."""
        return cls(**{name: value for name, value in parameters.items()
                      if name != DEBUG_PARAMETER})

    @property
    def roots(self) -> list[str]:
        """--root NAME, each given (none: the scenario's default roots)."""
        return list(self.root or [])

    def run(self, shown_pass: str | None = None) -> RunChoices:
        """How the scenario is run: its argv, --passes, --timeout, and the pass shown."""
        return RunChoices(self.script_args, self.passes, self.timeout, shown_pass)


@dataclass(frozen=True)
class GraphOptions(RunOptions):
    """What show and dot both ask of one scenario's graph."""

    scenario: str
    saved: bool
    max_nodes: int | None
    pass_number: str | None
    lead_with: str
    strict: bool
