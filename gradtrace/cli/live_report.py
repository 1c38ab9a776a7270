"""What `gradtrace watch` tells while the script runs: each finding on stderr as it fires,
with its step; a heartbeat line every few seconds; and the run log, a line at a time."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..findings.live import LiveFindings, LiveLog
from ..model.records import Steps


class LiveReport(LiveLog):
    """The RunListener of a watched run: the log written, each finding said, a heartbeat
    said, and the run stopped at its next pass once a --stop-on code fired."""

    def __init__(self, live: LiveFindings, log: Path | None, heartbeat: float,
                 say: Callable[[str], None], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        super().__init__(live, log, say, stops=True)
        self.heartbeat, self.clock = heartbeat, clock
        self._started = self._beat = clock()

    def read(self, first: int, rows: Steps) -> str | None:
        stop = super().read(first, rows)
        if self.clock() - self._beat >= self.heartbeat:
            self._beat = self.clock()
            self.say(self.live.heartbeat(self._beat - self._started))
        return stop
