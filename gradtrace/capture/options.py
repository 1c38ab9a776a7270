"""How a capture session records: one record of options, given when the session starts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from ..model.facts import Fact
from ..model.records import Finding, Steps


class RunListener(Protocol):
    """Told while the code runs (gradtrace watch): facts as they are met, and the steps'
    rows as their numbers are read (in batches: never a device synchronisation of its own).
    Called on the code's own thread, between its passes."""

    def told(self, fact: Fact, passes: int) -> str | None:
        """A fact, met when the code had run that many passes. A finding code returned
        stops the code at its next pass (--stop-on)."""

    def read(self, first: int, rows: Steps) -> str | None:
        """Rows read since the last call: rows.grads[0] is pass first's (1-based); the
        leaves are every column so far. A finding code returned stops the code too."""

    def printed(self, text: str, to_stderr: bool) -> None:
        """What the code printed through Python's streams, as it prints it (its capture for
        the trace is unchanged)."""

    def judged(self, findings: Sequence[Finding], passes: int) -> str | None:
        """Findings judged from a pass's detail as the code runs (a nan-gradient, once its
        pass's row was read), when it had run that many passes. A code returned stops it."""

    def ended(self, findings: Sequence[Finding]) -> None:
        """The code ended: every finding of its trace (those judged only now among them:
        the graph's, a frozen layer's, a stop's), as the report will show them."""


@dataclass(frozen=True)
class CaptureOptions:
    """What a capture records and does besides what the captured code does."""

    roots: tuple[str, ...] = ()  # the roots asked for by name (--root)
    backward: bool = True  # gradtrace's own backward from the roots when the code ran none
    derivative_order: int = 1  # 2: second derivatives of the first pass's (scalar) root
    saved: bool = True  # read the tensors each node saved for backward
    flow: bool = True  # record the gradient that flowed through every node
    pass_limit: int | None = None  # stop the code at its pass after this many (None: never)
    # whose graph the trace shows: None, the latest pass over each distinct graph (a loop's
    # last step); N, pass N's; "all", every pass's (their detail all kept)
    graph_pass: int | Literal["all"] | None = None
    profile: bool = False  # time and measure the memory of each backward node (--profile)
    listener: RunListener | None = None  # told while the code runs (gradtrace watch)
