"""What `gradtrace watch` tells while the script runs: each finding as it fires, with its
step; a heartbeat line every few seconds; and the run log, a whole JSON line at a time, so a
run killed at any moment leaves a log whose every complete line is valid."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path

from .._version import __version__
from ..findings.health import step_findings
from ..findings.recorded import findings_of
from ..model.facts import Fact
from ..model.records import Finding, LeafStep, Steps, Trace
from ..model.run_log import (
    LogEnd,
    LogFinding,
    LogHeader,
    LogLeaves,
    LogSteps,
    Outcome,
    log_line,
)


class LiveReport:
    """The RunListener of a watched run: findings and steps as the capture tells them."""

    def __init__(self, script: str, argv: list[str], torch_version: str, log: Path | None,
                 stop_on: frozenset[str], heartbeat: float, say: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.script, self.stop_on, self.say, self.clock = script, stop_on, say, clock
        self.heartbeat = heartbeat
        self.torch_version = torch_version
        self._fd = None if log is None else os.open(
            log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._write(LogHeader(__version__, torch_version, script, tuple(argv),
                              LogHeader.started_now()))
        self._seen: set[tuple[str, str]] = set()  # (code, message) of the findings told
        self.stopped: Finding | None = None  # the --stop-on finding that stopped the run
        self._leaves: tuple[str, ...] = ()
        self._modules: tuple[str | None, ...] = ()
        self._loss: list[float | None] = []
        self._optimizer_steps: list[int] = []
        self._grads: list[tuple[LeafStep | None, ...]] = []
        self._after = 0  # optimizer steps since the last row read
        self._started = self._beat = clock()

    def told(self, fact: Fact, passes: int) -> str | None:
        return self._fired(findings_of([fact], self.script), passes or None)

    def read(self, first: int, rows: Steps) -> str | None:
        if len(rows.leaves) > len(self._leaves):  # columns first seen in these rows
            self._write(LogLeaves(len(self._leaves), rows.leaves[len(self._leaves):],
                                  rows.modules[len(self._leaves):]))
            self._leaves, self._modules = rows.leaves, rows.modules
        self._write(LogSteps(first, rows.loss, rows.optimizer_steps, rows.grads,
                             rows.loss_scale if any(rows.loss_scale) else (),
                             rows.loss_divisor if any(rows.loss_divisor) else ()))
        self._loss.extend(rows.loss)
        self._optimizer_steps.extend(rows.optimizer_steps)
        self._grads.extend(rows.grads)
        self._after = rows.optimizer_steps_after
        stop = self._fired(step_findings(self._trace()), len(self._grads))
        if self.clock() - self._beat >= self.heartbeat:
            self._beat = self.clock()
            self.say(self.heartbeat_line())
        return stop

    def heartbeat_line(self) -> str:
        """step N · loss L · |g| G · S steps/s: the latest row read."""
        steps = len(self._grads)
        if not steps:
            return "step 0"
        norms = [g.norm for g in self._grads[-1] if g is not None]
        total = math.sqrt(sum(n * n for n in norms)) if norms else None
        rate = steps / max(self.clock() - self._started, 1e-9)
        loss = self._loss[-1]
        return (f"step {steps}  loss {_number(loss)}  |g| {_number(total)}  "
                f"{rate:.1f} steps/s")

    def end(self, outcome: Outcome) -> None:
        """The log's last line: the run ended (finished, stopped or failed)."""
        self._write(LogEnd(len(self._grads), self._after, outcome))
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _fired(self, findings: list[Finding], step: int | None) -> str | None:
        """Tell and log each finding not told before; the first --stop-on code among them."""
        stop = None
        for finding in findings:
            key = (finding.code, finding.message)
            if key in self._seen:
                continue
            self._seen.add(key)
            self._write(LogFinding(step, finding))
            at = "" if step is None else f"step {step}: "
            self.say(f"{at}{finding.severity} [{finding.code}] {finding.message}")
            if finding.code in self.stop_on and stop is None and self.stopped is None:
                self.stopped, stop = finding, finding.code
        return stop

    def _trace(self) -> Trace:
        """The steps read so far, as the trace step_findings judges (no graph)."""
        steps = Steps(self._leaves, self._modules, tuple(self._loss),
                      tuple(self._optimizer_steps),
                      tuple(row + (None,) * (len(self._leaves) - len(row))
                            for row in self._grads))
        return Trace(self.script, __version__, self.torch_version, (), (), "", (), (), (), (),
                     (), steps=steps)

    def _write(self, record: LogHeader | LogLeaves | LogSteps | LogFinding | LogEnd) -> None:
        """One whole line, in one write (appended: a kill leaves whole lines, at most the
        last one cut)."""
        if self._fd is not None:
            os.write(self._fd, log_line(record).encode("ascii"))


def _number(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"
