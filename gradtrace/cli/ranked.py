"""`show` as one rank of a multi-process run (torchrun): one report, not N interleaved. The
shown rank prints its report and a line for each other rank; `--ranks all` prints every
rank's report in rank order; `-o trace-{rank}.json` writes one file per rank."""

from __future__ import annotations

import atexit
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import typer

from ..capture.script.ranks import RankStore, launched
from ..errors import GradtraceError
from ..model.records import Trace
from ..render.ranks import rank_line, rank_summary, whole_norms_line
from .output import flush_streams, stdout_silenced

RANKS = typer.Option("0", "--ranks", metavar="N|all",
                     help="Under torchrun (RANK and WORLD_SIZE set): the rank whose report is "
                     "printed, with a line for each other rank, or all: every rank's report "
                     "in rank order. Put {rank} in -o FILE for one file per rank.")
RANK_FIELD = "{rank}"
# {rank}, or {rank:SPEC} with a format spec of Python's: trace-{rank:02d}.json
_RANK_FIELDS = re.compile(r"\{rank(?::([^{}]*))?\}")
_NUMBER_SPEC = re.compile(r"0?\d*[dxXob]?")  # a width and a base: a file name's characters


def templated(out: Path | None) -> bool:
    """Whether the file name has a {rank} field."""
    return out is not None and _RANK_FIELDS.search(str(out)) is not None


def _with_rank(out: Path, rank: int) -> Path:
    """out with each {rank} field made the rank's number."""
    def number(field: re.Match[str]) -> str:
        if not _NUMBER_SPEC.fullmatch(field[1] or ""):
            raise GradtraceError(f"{field[0]} in {out}: not a format for a number",
                                 "e.g. {rank} or {rank:02d}")
        return format(rank, field[1] or "")
    return Path(_RANK_FIELDS.sub(number, str(out)))


def rank_file(out: Path | None, option: str = "-o", every_rank_writes: bool = True
              ) -> Path | None:
    """out with {rank} made this rank's number; under a launcher of several ranks, when
    every rank writes, a file name without {rank} is refused before anything runs."""
    if out is None:
        return None
    ranks = launched()
    if every_rank_writes and ranks is not None and not templated(out) \
            and not str(out).startswith("/dev/"):
        raise GradtraceError(f"{option} {out}: each of the {ranks.world} ranks would write it",
                             f"one file per rank: put {RANK_FIELD} in the name, e.g. "
                             f"{option} {out.stem}-{RANK_FIELD}{out.suffix}")
    return _with_rank(out, ranks.rank if ranks else 0)


def quiet_unless_shown() -> bool:
    """Whether this process prints (on stdout, and its findings): alone, or rank 0 of a
    launcher's ranks; another rank falls silent on stdout (its output would interleave)."""
    ranks = launched()
    shown = ranks is None or ranks.rank == 0
    stdout_silenced(not shown)
    return shown


class RankedShow:
    """What this process prints and writes as one rank of many (as it always did alone)."""

    def __init__(self, which: str, out: Path | None, printed: str) -> None:
        self.ranks = launched()
        self.every = which == "all"
        self.shown = 0 if self.every or not which.isdigit() else int(which)
        if not self.every and not which.isdigit():
            raise GradtraceError(f"--ranks {which!r}: give a rank number (0, 1, …) or all",
                                 "e.g. --ranks 1, or --ranks all")
        world = self.ranks.world if self.ranks else 1
        if not 0 <= self.shown < max(world, 1) and self.ranks is not None:
            raise GradtraceError(f"--ranks {which}: this run has ranks 0 to {world - 1}")
        if self.every and self.ranks and out is None and printed != "text":
            raise GradtraceError(f"--ranks all with {printed} on stdout mixes {world} "
                                 "documents", "write one file per rank: -o trace-{rank}.json")
        self.rank = self.ranks.rank if self.ranks else 0
        self.templated = templated(out)
        # with --ranks all every rank writes -o FILE; else only the shown one, or each its own
        self.target = rank_file(out, every_rank_writes=self.every)
        self.store = RankStore() if self.ranks else None
        self._told = ""
        if self.store is not None and self.store.reachable:
            atexit.register(self._leave_together)

    @property
    def prints(self) -> bool:
        """Whether this rank's report goes to stdout."""
        return self.ranks is None or self.every or self.rank == self.shown

    @property
    def writes(self) -> bool:
        """Whether this rank writes -o FILE: its own ({rank} in the name), or the shown one's."""
        return self.target is not None and (self.templated or self.prints)

    def tell(self, trace: Trace | None, failed: str | None) -> None:
        """Say to the other ranks what this one recorded (before printing: none waits long);
        nothing when there are none to hear it."""
        if self.store is not None:
            self._told = rank_summary(trace, failed)
            self.store.set(f"summary/{self.rank}", self._told)

    @property
    def said(self) -> bool:
        """Whether the other ranks heard this one (torchrun's store carried its summary)."""
        return self.store is not None and self.store.reachable

    @contextlib.contextmanager
    def in_turn(self) -> Iterator[None]:
        """With --ranks all, wait for the rank before this one to have printed."""
        if self.store is not None and self.every and self.rank > 0:
            self.store.get(f"printed/{self.rank - 1}")
        try:
            yield
        finally:
            if self.store is not None and self.every:
                self.store.set(f"printed/{self.rank}", "1")

    def _leave_together(self) -> None:
        """At exit, after all this rank printed: wait for every other rank to get there too.
        torchrun stops all ranks once one exits with an error, so a rank that failed first
        would cut the shown rank's report (or another rank's -o file) short."""
        flush_streams()
        assert self.store is not None and self.ranks is not None
        self.store.set(f"left/{self.rank}", "1")
        for other in range(self.ranks.world):
            if other != self.rank:
                self.store.get(f"left/{other}")

    def heading(self) -> str | None:
        """'rank 1 of 2' above a rank's report."""
        return f"rank {self.rank} of {self.ranks.world}" if self.ranks else None

    def others(self) -> list[str]:
        """The shown rank's line for each other rank (nothing from --ranks all, or alone)."""
        if self.ranks is None or self.every or self.store is None or not self.prints:
            return []
        if not self.store.reachable:
            return ["other ranks: not shown (only torchrun's store carries their summaries)"]
        told = [self._told if r == self.rank else self.store.get(f"summary/{r}")
                for r in range(self.ranks.world)]
        lines = [rank_line(r, told[r], self.rank, self._told)
                 for r in range(self.ranks.world) if r != self.rank]
        whole = whole_norms_line(told, self.rank)
        return lines if whole is None else [*lines, whole]
