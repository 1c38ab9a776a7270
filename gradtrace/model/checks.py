"""Results of `gradtrace check`: plain records, like the Trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Verdict = Literal["pass", "fail", "error", "skipped", "timed out", "straight-through",
                  "not applicable"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Where a Function's analytical Jacobian disagrees with the numerical one (for
    gradgradcheck: backward's own, over the inputs and then the incoming gradients)."""

    output: int
    input: int
    numerical: Any  # nested lists (rows: input elements, columns: output elements)
    analytical: Any
    max_abs: float
    # Largest |analytical - numerical| / |numerical| over the entries that disagree; None
    # where one of them has a numerical value within atol of 0 (a 0-against-x mismatch:
    # a relative error there means nothing).
    max_rel: float | None
    worst: tuple[int, int]  # (input element, output element) of the largest difference
    rows: tuple[int, ...] | None = None  # the input elements checked, when sampled
    cols: tuple[int, ...] | None = None  # the output elements checked, when sampled
    check: Literal["gradcheck", "gradgradcheck"] = "gradcheck"
    worst_values: tuple[float, float] = (0.0, 0.0)  # (numerical, analytical) at worst
    zero_numerical: bool = False  # the worst entry's numerical value is within atol of 0
    # The shapes of the input and the output the block is of, to name elements by their
    # position ([28, 17]) instead of their flat index (913); None where not known.
    input_shape: tuple[int, ...] | None = None
    output_shape: tuple[int, ...] | None = None
    # At which inputs the check failed: the recorded values, or random ones (seeded) that
    # find what the recorded values hide (a factor of 1.0 forgotten)
    inputs: Literal["recorded", "random"] = "recorded"


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
    sampled: str | None = None  # which coordinates were checked, when not all of them
    call: int = 0  # which of the scenario's Function calls (1-based; 0: not known)
    # What the verdict rests on, besides it: which inputs were tried, what they may hide
    notes: tuple[str, ...] = ()
    backward: tuple[str, int] | None = None  # the file and line of `def backward`

    @property
    def ok(self) -> bool:
        """Both checks passed (or do not apply) and nothing smells."""
        return self.gradcheck in ("pass", "skipped") and not self.smells \
            and self.gradgradcheck in ("pass", "skipped", "not applicable")

    @property
    def outcome(self) -> str:
        """What the run counts it as: passed, failed, smell, straight-through, skipped,
        timed out."""
        if self.gradcheck in ("skipped", "timed out", "straight-through"):
            return self.gradcheck
        if self.gradgradcheck == "timed out":
            return "timed out"
        if not self.ok:
            return "smell" if self.smells and self.gradcheck == "pass" and \
                self.gradgradcheck != "fail" else "failed"
        return "passed"


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
    notes: tuple[str, ...] = ()  # what was left out and why (a test that takes fixtures)

    @property
    def failed(self) -> bool:
        return any(not r.ok for r in self.results)

    @property
    def timed_out(self) -> bool:
        return any(r.outcome == "timed out" for r in self.results)
