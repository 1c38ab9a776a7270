"""Which of the code's autograd calls are recorded as passes: one thread's at a time, none of
gradtrace's own, none past the pass limit."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ...model.facts import PassesCapped


class PassLimit(BaseException):
    """Raised at the scenario's pass after the last one to record (--passes N): it stops the
    scenario there (not an Exception: its `except Exception` does not swallow it)."""


class Gate:
    """The state the wrappers on torch read before they record a call."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit  # the scenario's passes to record (--passes N; None: all)
        self.stopped_by: str | None = None  # the finding code that set the limit (--stop-on)
        self.scenario_passes = 0
        self.capped: PassesCapped | None = None  # where the limit stopped the code
        # the thread whose pass is being recorded (backward calls within are not passes);
        # other threads' passes wait for it to end, each recorded whole
        self.thread: int | None = None
        self.one_pass_at_a_time = threading.Lock()
        self.muted = 0  # inside gradcheck or gradtrace's own calls: not the code's passes
        self.first_in_check = False  # the next Function call is the one gradcheck checks
        # the one thread whose calls are the code's (gradtrace.record()'s own, by default:
        # a backward counts for the thread that called it, not autograd's engine threads
        # its hooks run on); None: every thread's (a scenario run records its threads too)
        self.only: int | None = None

    @contextlib.contextmanager
    def own_calls(self) -> Iterator[None]:
        """While the block runs, autograd calls are gradtrace's own (a replay, gradcheck's
        probes, --order 2's derivatives): none is one of the code's passes."""
        self.muted += 1
        try:
            yield
        finally:
            self.muted -= 1

    def elsewhere(self) -> bool:
        """Whether this call comes from a thread the recording does not follow."""
        return self.only is not None and threading.get_ident() != self.only

    def stop_at_next(self, by: str) -> None:
        """The scenario's next pass raises PassLimit: a finding --stop-on asks for fired."""
        if self.stopped_by is None:
            self.limit, self.stopped_by = self.scenario_passes, by

    def count(self, line: int | None, code: str | None) -> None:
        """One more of the scenario's passes: PassLimit when it is past the limit."""
        if self.scenario_passes == self.limit:
            at = f"line {line} `{code}`" if line else "outside its own lines"
            self.capped = PassesCapped(self.limit, at, line, self.stopped_by)
            raise PassLimit
        self.scenario_passes += 1
