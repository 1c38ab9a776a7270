"""Results of `gradtrace check`: plain records, like the Trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Verdict = Literal["pass", "fail", "error", "skipped", "timed out"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Where a Function's analytical Jacobian disagrees with the numerical one."""

    output: int
    input: int
    numerical: Any  # nested lists (rows: input elements, columns: output elements)
    analytical: Any
    max_abs: float
    max_rel: float
    worst: tuple[int, int]  # (input element, output element) of the largest difference


@dataclass(frozen=True, slots=True)
class CheckResult:
    """gradcheck and gradgradcheck of one custom Function at one input signature."""

    scenario: str
    function: str
    line: int | None
    inputs: tuple[str, ...]
    gradcheck: Verdict
    gradgradcheck: Verdict
    message: str | None = None
    from_float32: bool = False
    smells: tuple[str, ...] = ()
    mismatch: Mismatch | None = None

    @property
    def ok(self) -> bool:
        """Both checks passed (or the second was skipped) and nothing smells."""
        return self.gradcheck in ("pass", "skipped") \
            and self.gradgradcheck in ("pass", "skipped") and not self.smells


@dataclass(frozen=True, slots=True)
class CannotRun:
    """A scenario `gradtrace check` could not run: what went wrong and how to fix it."""

    scenario: str
    message: str
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class CheckRun:
    """Everything one `gradtrace check` found, file by file."""

    results: tuple[CheckResult, ...]
    cannot_run: tuple[CannotRun, ...] = ()

    @property
    def passed(self) -> int:
        return sum(r.ok for r in self.results)

    @property
    def failed(self) -> bool:
        return any(not r.ok for r in self.results)

    @property
    def timed_out(self) -> bool:
        return any(r.gradcheck == "timed out" for r in self.results)
