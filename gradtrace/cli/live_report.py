"""What `gradtrace watch` tells while the script runs: each finding on stderr as it fires,
with its step; a heartbeat line every few seconds; and the run log, a line at a time."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..appending import LineFile
from ..findings.live import LiveFindings, said
from ..model.facts import Fact
from ..model.records import Steps
from ..model.run_log import LogFinding, LogRecord, Outcome, log_line


class LiveReport:
    """The RunListener of a watched run: what LiveFindings makes of it, written and said."""

    def __init__(self, live: LiveFindings, log: Path | None, heartbeat: float,
                 say: Callable[[str], None], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.live, self.heartbeat, self.say, self.clock = live, heartbeat, say, clock
        self._log = LineFile(log)
        self._log.write(log_line(live.header))
        self._started = self._beat = clock()

    def told(self, fact: Fact, passes: int) -> str | None:
        return self._tell(self.live.told(fact, passes))

    def read(self, first: int, rows: Steps) -> str | None:
        stop = self._tell(self.live.read(first, rows))
        if self.clock() - self._beat >= self.heartbeat:
            self._beat = self.clock()
            self.say(self.live.heartbeat(self._beat - self._started))
        return stop

    def end(self, outcome: Outcome) -> None:
        """The log's last line: the run ended so."""
        self._tell(self.live.end(outcome))
        self._log.close()

    def _tell(self, records: list[LogRecord]) -> str | None:
        """Write the records, say the findings; the --stop-on code, once one fired."""
        for record in records:
            self._log.write(log_line(record))
            if isinstance(record, LogFinding):
                self.say(said(record))
        return self.live.stop()
