"""What `gradtrace watch` tells while the script runs: each finding as it fires, with its
step; the run log, a line at a time; and on a terminal a live panel of the steps so far, else
a heartbeat line every few seconds."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from ..findings.live import LiveFindings, LiveLog
from ..model.facts import Fact
from ..model.records import Finding, Steps
from ..model.run_log import Outcome
from ..render.escape import Visible
from ..render.live_panel import Pace, RunSparks, live_panel
from .scalars import Scalars

REFRESH = 4  # the panel's redraws a second, at most: never one per pass
# what gradtrace's share of the time covers: the recorder's own work in each pass is not timed
COVERS = "findings, log and panel"
COVERS_SCALARS = "findings, log, panel and TensorBoard"  # with watch --tensorboard


class LivePanel:
    """watch's panel on a terminal (rich's Live), redrawn as rows come, at most REFRESH times
    a second; each finding printed above it, where it stays in the scrollback."""

    def __init__(self, terminal: TextIO, clock: Callable[[], float] = time.monotonic,
                 covers: str = COVERS) -> None:
        self.terminal, self.clock, self.covers = terminal, clock, covers
        self.run = RunSparks()
        self.pace = Pace(0.0, 0.0, covers)
        # redirect nothing: the script's output is captured below (for the report and the
        # trace), and said above the panel a line at a time as it prints (LiveReport)
        self._live = Live(console=Console(file=terminal, highlight=False), auto_refresh=False,
                          redirect_stdout=False, redirect_stderr=False)
        self._drawn = clock()

    @property
    def console(self) -> Console:
        return self._live.console

    def start(self) -> None:
        self._live.start()
        self._draw()

    def say(self, line: str) -> None:
        """A line above the panel."""
        self.console.print(Visible(Text(line)), soft_wrap=True)

    def timed(self, seconds: float, own: float) -> None:
        """seconds into the run, own of them gradtrace's: drawn, unless it was just now."""
        self.pace = Pace(self.run.steps / max(seconds, 1e-9), own / max(seconds, 1e-9),
                         self.covers)
        if self.clock() - self._drawn >= 1 / REFRESH:
            self._draw()

    def close(self) -> None:
        """Leave the panel as last drawn, the cursor on its blank last line; what is said
        from now on is plain lines below it. (Live.stop would draw it again: over the report,
        when that is on the same terminal.)"""
        self.console.clear_live()
        self.console.pop_render_hook()  # the Live's: the console's only one
        self.console.show_cursor(True)

    def _draw(self) -> None:
        with contextlib.suppress(OSError):
            size = os.get_terminal_size(self.terminal.fileno())
            if size.columns and size.lines:  # a new pseudo-terminal says 0 by 0: rich's guess
                self.console.size = size.columns, size.lines
        self._live.update(Visible(live_panel(self.run, self.pace, self.console.height)),
                          refresh=True)
        self._drawn = self.clock()


class LiveReport(LiveLog):
    """The RunListener of a watched run: the log written, each finding said, the panel drawn
    (panel None: a heartbeat said), the rows written as TensorBoard scalars (scalars None:
    none), and the run stopped at its next pass once a --stop-on code fired."""

    def __init__(self, live: LiveFindings, log: Path | None, heartbeat: float,
                 say: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 panel: LivePanel | None = None, scalars: Scalars | None = None,
                 echo: Callable[[str, bool], None] | None = None) -> None:
        super().__init__(live, log, say, stops=True)
        self.heartbeat, self.clock, self.panel, self.scalars = heartbeat, clock, panel, scalars
        self.echo = echo  # the script's own output, onto its streams (no panel)
        self._started = self._beat = clock()
        self.own = 0.0  # seconds spent in told and read: what the panel's share covers
        self._unended = ["", ""]  # of stdout, of stderr: printed since their last newline

    def ended(self, findings: Sequence[Finding]) -> None:
        """The script ended: what it printed is all shown (buffered, or a line not ended)
        before the findings the end tells, and before the report."""
        if self.panel is not None:
            for unended in filter(None, self._unended):
                self.panel.say(unended.rsplit("\r", 1)[-1])
            self._unended = ["", ""]
        elif self.echo is not None:
            self.echo("", False)
            self.echo("", True)
        super().ended(findings)

    def printed(self, text: str, to_stderr: bool) -> None:
        """The script's own output, shown as it prints: above the panel a line at a time (a
        progress bar's line as its last redraw), else onto its stream as it is."""
        if self.panel is None:
            if self.echo is not None:
                self.echo(text, to_stderr)
            return
        *lines, self._unended[to_stderr] = (self._unended[to_stderr] + text).split("\n")
        for line in lines:
            self.panel.say(line.rsplit("\r", 1)[-1])

    def told(self, fact: Fact, passes: int) -> str | None:
        started = self.clock()
        stop = super().told(fact, passes)
        self.own += self.clock() - started
        return stop

    def read(self, first: int, rows: Steps) -> str | None:
        started = self.clock()
        if self.panel is not None:  # before the findings: the panel drawn with them has them
            self.panel.run.add(rows)
        stop = super().read(first, rows)
        if self.scalars is not None:
            self.scalars.write(first, rows)
        now = self.clock()
        if self.panel is not None:
            self.panel.timed(now - self._started, self.own + now - started)
        elif now - self._beat >= self.heartbeat:
            self._beat = now
            self.say(self.live.heartbeat(self._beat - self._started))
        self.own += self.clock() - started
        return stop

    def end(self, outcome: Outcome) -> None:
        """The log ended; the scalars flushed and their file closed, whatever the log did."""
        try:
            super().end(outcome)
        finally:
            if self.scalars is not None:
                self.scalars.close()
