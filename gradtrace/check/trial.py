"""A call's checks at the recorded inputs, then at random ones where those pass: a backward
right only at the recorded values (a factor forgotten while it is 1.0) is wrong there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .jacobian import differentiable
from .orders import CheckOptions, CheckOutcome, Inputs, first_order, second_order
from .varied import NEAR, hiding, random_inputs, unusable


class Trial:
    """gradcheck and gradgradcheck of one call, each at the recorded inputs and, where they
    pass, at random ones (varied.py). Random inputs the Function cannot take (its forward
    raises or gives NaN there, or its backward raises) are left out with a note: they never
    make a failure of their own."""

    def __init__(self, fn: Callable[..., Any], inputs: list[Any], args: tuple[Any, ...],
                 options: CheckOptions, scenario: str, sample: int | None) -> None:
        """inputs: the float64 copies checked; args: the values the scenario passed."""
        self.fn, self.options, self.scenario, self.sample = fn, options, scenario, sample
        self.recorded, self.args = Inputs(inputs), args
        self.hidden = hiding(args)
        self.varied: Inputs | None = None
        self.left_out: str | None = None  # why random inputs were not (all) tried
        self.failed_at_random = False
        self.narrowed: str | None = None  # why random inputs are near the recorded ones
        if differentiable(inputs):
            varied = random_inputs(inputs)
            self.left_out = unusable(fn, varied)
            if self.left_out is not None and unusable(fn, near := random_inputs(
                    inputs, near=True)) is None:  # a narrower domain: acos, probabilities
                varied, self.narrowed, self.left_out = near, self.left_out, None
            if self.left_out is None:
                self.varied = Inputs(varied, random=True, hidden=self.hidden)

    def first_order(self) -> tuple[CheckOutcome, list[Any]]:
        """gradcheck's outcome, and the inputs it is about."""
        first = first_order(self.fn, self.recorded, self.options, self.scenario, self.sample)
        if first.verdict != "pass" or self.varied is None:
            return first, self.recorded.values
        varied = self.varied.values
        again = first_order(self.fn, self.varied, self.options, self.scenario, self.sample)
        return self._judged(first, again), varied

    def second_order(self, out: tuple[Any, ...]) -> CheckOutcome:
        """gradgradcheck's outcome (out: the outputs at the recorded inputs)."""
        second = second_order(self.fn, self.recorded, out, self.options, self.scenario)
        if second.verdict != "pass" or self.varied is None:
            return second
        again = second_order(self.fn, self.varied, out, self.options, self.scenario)
        return self._judged(second, again)

    def _judged(self, recorded: CheckOutcome, again: CheckOutcome) -> CheckOutcome:
        """The outcome at random inputs where it failed, else the recorded one's."""
        if again.verdict == "fail":
            self.failed_at_random = True
            return again
        if again.verdict != "pass":  # raised there: a domain the Function checks, say
            self.left_out, self.varied = f"{again.message}", None
        return recorded

    def notes(self) -> tuple[str, ...]:
        """What the verdict rests on: whether random inputs were tried, and the recorded
        values that hide a wrong backward where nothing else was tried (told in the message
        where random inputs failed)."""
        if self.failed_at_random:
            return ()
        if self.left_out is None:  # tensors were varied: numbers never are
            (low, _), (_, top) = NEAR
            narrowed = () if self.narrowed is None else (
                f"random inputs near the recorded ones (each scaled by {low:g} to {top:g}): at "
                f"wider ones, {self.narrowed}",)
            hidden = hiding(self.args, numbers_only=True)
            return (*narrowed, *(() if hidden is None else (hidden,)))
        notes = [f"checked at the recorded inputs only: at random ones, {self.left_out}"]
        return (*notes, self.hidden) if self.hidden is not None else tuple(notes)
