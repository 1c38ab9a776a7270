"""What the code's own lines say once a recording ends: why no tensor is a root, which line
left a pass's root without a graph, what the lines that bound its names say, and the lines
build_trace asks for its leaf findings (naming/ reads them; findings/ phrases the facts)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..extract.captured import SourceCuts
from ..extract.tensors import Named
from ..model.facts import Fact
from .host import ScriptHost
from .modules.tracker import paths_of_class
from .naming.bindings import binding_facts
from .naming.cuts import LineCuts, RanFirst, Statements, made_from_values, pass_cuts
from .naming.roots import no_root_facts
from .naming.statements import statements_run
from .passes.recorder import Recorder


class OwnLines:
    """The recorded file's lines and those of them that ran, read at most once (no file:
    none, but trace(tensors)'s caller's lines, when it was called from a file)."""

    def __init__(self, path: str | None, lines: list[str], host: ScriptHost,
                 recorder: Recorder, caller: SourceCuts | None = None) -> None:
        self.path = path
        self.lines = lines
        self.host = host
        self.recorder = recorder
        self.caller = caller
        self.statements = functools.cache(self._statements)

    def no_root(self, label: str | None, named: Named, empty_ok: bool) -> list[Fact]:
        """Why there is no root: a fact when something else was recorded (or empty_ok),
        else the NoGraph error."""
        recorder = self.recorder
        rebuilt = next((p for p in recorder.passes if made_from_values(p)), None)
        return no_root_facts(label, named, self.lines,
                             self.host.line_log.lines_run(self.path or ""),
                             bool(recorder.passes), bool(recorder.calls or recorder.facts),
                             empty_ok, None if rebuilt is None else next(
                                 (n for n in rebuilt.root_names if n), "its root"))

    def facts(self, named: Named) -> list[Fact]:
        """The lines that left a pass's root without a graph, and what the lines that bound
        the names say (see naming/bindings.py)."""
        passes = self.recorder.passes
        cuts: list[Fact] = [*pass_cuts(passes, self.lines, self.statements,
                                       self._ran_first())]
        if self.path is None:
            return cuts
        return [*cuts, *binding_facts(named, self.host.names.briefs_of_dead(), passes,
                                      self.lines, self.statements(),
                                      self.host.line_log.lines_run(self.path))]

    def cuts(self, objects: Sequence[tuple[str, Any]]) -> SourceCuts | None:
        """The lines build_trace asks for leaf findings and the cuts of leaves no root
        reaches: lines that ran before the default graph's backward (objects: the named
        modules and objects)."""
        if self.path is None:
            return self.caller
        return LineCuts(self.path, self.lines, self.statements, self.host.line_log.own_places,
                        functools.partial(paths_of_class, objects), self._ran_first(),
                        self.recorder.default_roots().line)

    def _ran_first(self) -> RanFirst | None:
        return None if self.path is None else RanFirst(self.host.line_log.first_ran, self.path)

    def _statements(self) -> Statements:
        ran = self.host.line_log.lines_run(self.path) if self.path is not None else None
        return statements_run(self.lines, ran or set())
