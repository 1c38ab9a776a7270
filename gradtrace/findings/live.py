"""A watched run as it goes, in run-log records: the steps' rows as they are read, each
finding once, as it fires (a fact's at its pass; the gradients' health as rows come), and the
first of them a --stop-on code asks to stop at. Torch-free: `gradtrace watch` and the
integrations write what it returns."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from .._version import __version__
from ..appending import LineFile
from ..errors import GradtraceError
from ..model.facts import Fact
from ..model.records import Finding, LeafStep, Steps
from ..model.run_log import (
    LogEnd,
    LogFinding,
    LogHeader,
    LogLeaves,
    LogRecord,
    LogSteps,
    Outcome,
    about_one_pass,
    log_line,
    rejudged,
    told_as,
)
from .health import StepHealth
from .recorded import findings_of


def stop_codes(asked: str | Iterable[str] | None, option: str) -> frozenset[str]:
    """The finding codes a --stop-on (option: how it was asked) names: "a,b" or a list;
    a code no finding has is an error."""
    from .registry import CODES

    codes = frozenset(c.strip() for c in (asked.split(",") if isinstance(asked, str)
                                          else asked or ()) if c.strip())
    unknown = sorted(codes - set(CODES))
    if unknown:
        raise GradtraceError(f"{option}: no finding has the code {', '.join(unknown)}",
                             "codes: " + ", ".join(CODES))
    return codes


class LiveFindings:
    """What a run told so far, and the records each new piece adds to its log."""

    def __init__(self, script: str, argv: list[str], torch_version: str,
                 stop_on: frozenset[str] = frozenset()) -> None:
        self.script, self.torch_version, self.stop_on = script, torch_version, stop_on
        self.header = LogHeader(__version__, torch_version, script, tuple(argv),
                                LogHeader.started_now())
        self.stopped: Finding | None = None  # the --stop-on finding that fired first
        self._stop_asked = False
        # told_as(...) of each finding told, and it as it was last told
        self._seen: dict[tuple[str | int | None, ...], Finding] = {}
        self._leaves: tuple[str, ...] = ()
        # the gradients' health, judged a row at a time: what it keeps does not grow with
        # the run, and a finding is told in the batch whose rows make it
        self._health = StepHealth()
        self.steps = 0  # the rows read so far
        self._last: tuple[float | None, tuple[LeafStep | None, ...]] = (None, ())  # loss, row
        self._after = 0  # optimizer steps since the last row read
        self._scale_free: tuple[bool | None, ...] = ()  # the latest rows' Steps.scale_free
        self._optimized: tuple[bool | None, ...] = ()  # and their Steps.optimized

    def told(self, fact: Fact, passes: int) -> list[LogRecord]:
        """A fact met at that many passes: its finding, when it is new."""
        return self._fired(findings_of([fact], self.script), passes or None)

    def read(self, first: int, rows: Steps) -> list[LogRecord]:
        """Rows read (first: the first's pass): their columns first seen, the rows, and the
        health findings the steps so far newly make."""
        records: list[LogRecord] = []
        if len(rows.leaves) > len(self._leaves):
            records.append(LogLeaves(len(self._leaves), rows.leaves[len(self._leaves):],
                                     rows.modules[len(self._leaves):]))
            self._leaves = rows.leaves
            self._health.extend(rows.leaves, rows.modules)
        records.append(LogSteps(first, rows.loss, rows.optimizer_steps, rows.grads,
                                rows.loss_scale if any(rows.loss_scale) else (),
                                rows.loss_divisor if any(rows.loss_divisor) else (),
                                rows.closure_call))
        calls = rows.closure_call or (None,) * len(rows.loss)
        for loss, stepped, row, call in zip(rows.loss, rows.optimizer_steps, rows.grads, calls,
                                            strict=True):
            self._health.add(self.steps, row, loss, stepped, None, call)
            self.steps += 1
        if rows.grads:
            self._last = (rows.loss[-1], rows.grads[-1])
        self._after = rows.optimizer_steps_after
        self._scale_free = rows.scale_free or self._scale_free
        self._optimized = rows.optimized or self._optimized
        return records + self._fired(self._judged(), self.steps)

    def judged(self, findings: Sequence[Finding], passes: int) -> list[LogRecord]:
        """Findings judged from a pass's detail at that many passes: each new one."""
        return self._fired(list(findings), passes or None)

    def ended(self, findings: Sequence[Finding]) -> list[LogRecord]:
        """The trace's findings as the code ended: each not told yet (judged only now: the
        graph's, a frozen layer's, a stop's), none of them a stop (the run is over). One
        told as it fired is not told again for the node, file and line the trace adds."""
        told = list(self._seen)
        return self._fired([f for f in findings if rejudged(f) or not any(
            _told_before(f, key) for key in told)], None, again=True, stops=False)

    def stop(self) -> str | None:
        """The --stop-on code that fired, the first time it is asked (the run stops once)."""
        if self.stopped is None or self._stop_asked:
            return None
        self._stop_asked = True
        return self.stopped.code

    def end(self, outcome: Outcome) -> list[LogRecord]:
        """The log's last records: the health findings of every row (again, those whose
        counts grew: a log's reader keeps a finding's last words), and that the run ended so."""
        late = self._fired(self._judged(), self.steps, again=True)
        return [*late, LogEnd(self.steps, self._after, "stopped" if self.stopped else outcome)]

    def heartbeat(self, seconds: float) -> str:
        """step N  loss L  |g| G  S steps/s: the latest row read, seconds into the run."""
        if not self.steps:
            return "step 0"
        loss, row = self._last
        norms = [g.norm for g in row if g is not None]
        total = math.sqrt(sum(n * n for n in norms)) if norms else None
        return (f"step {self.steps}  loss {_number(loss)}  |g| {_number(total)}  "
                f"{self.steps / max(seconds, 1e-9):.1f} steps/s")

    def _judged(self) -> list[Finding]:
        """The health findings of the rows so far, each leaf's optimizer as the rows say."""
        return self._health.findings((), self._optimized, self._scale_free)

    def _fired(self, findings: list[Finding], step: int | None, again: bool = False,
               stops: bool = True) -> list[LogRecord]:
        """Each finding not told before (again: and each told in other words, its counts
        grown); the first --stop-on one is the run's stop (stops: while it runs)."""
        new: list[LogRecord] = []
        for finding in findings:
            key = told_as(finding)
            before = self._seen.get(key)
            if before is not None and finding.line is None and before.line is not None:
                # the health judged live: the line the trace placed it at stays
                finding = replace(finding, file=before.file, line=before.line)
            if before is None or again and (before.message, before.line) != (
                    finding.message, finding.line):
                self._seen[key] = finding
                new.append(LogFinding(step, finding))
                if before is None and stops and finding.code in self.stop_on \
                        and self.stopped is None:
                    self.stopped = finding
        return new


class LiveLog:
    """A RunListener: the log (None: none) written a line at a time, each finding said as it
    fires; stops: a --stop-on code that fired is returned, to end the code at its next pass."""

    def __init__(self, live: LiveFindings, log: Path | str | None,
                 say: Callable[[str], None], stops: bool = False) -> None:
        self.live, self.say, self.stops = live, say, stops
        self._log = LineFile(log)
        self._log.write(log_line(live.header))

    def told(self, fact: Fact, passes: int) -> str | None:
        self.tell(self.live.told(fact, passes))
        return self.live.stop() if self.stops else None

    def read(self, first: int, rows: Steps) -> str | None:
        self.tell(self.live.read(first, rows))
        return self.live.stop() if self.stops else None

    def printed(self, text: str, to_stderr: bool) -> None:
        """The code's own output is not the log's (a with-block's goes where it goes)."""

    def judged(self, findings: Sequence[Finding], passes: int) -> str | None:
        self.tell(self.live.judged(findings, passes))
        return self.live.stop() if self.stops else None

    def ended(self, findings: Sequence[Finding]) -> None:
        self.tell(self.live.ended(findings))

    def tell(self, records: list[LogRecord]) -> None:
        """Write the records; say the findings."""
        for record in records:
            self._log.write(log_line(record))
            if isinstance(record, LogFinding):
                self.say(said(record))

    def end(self, outcome: Outcome) -> None:
        """The log's last lines: the findings the end judged, and that the run ended so."""
        self.tell(self.live.end(outcome))
        self._log.close()


def _told_before(end: Finding, key: tuple[str | int | None, ...]) -> bool:
    """Whether a finding the end judged is one told as the run went (key: its told_as), about
    the same tensor in the same words or more of them, whatever node, file and line the trace
    adds. One about a pass, or about nothing placed, is the same by its key alone, and told
    again in the trace's words."""
    placed = (end.tensor, end.node, end.file, end.line) != (None,) * 4
    return about_one_pass(end) is None and placed and key[0] == end.code \
        and key[1] == end.tensor and str(told_as(end)[5]).startswith(str(key[5]))


def said(record: LogFinding) -> str:
    """A finding as one line, as it fires: `step 5: error [nan-value] …`."""
    finding = record.finding
    at = "" if record.step is None else f"step {record.step}: "
    return f"{at}{finding.severity} [{finding.code}] {finding.message}"


def _number(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"
