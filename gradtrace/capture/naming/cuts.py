"""Where a graph was lost, told by the lines that ran: the line that left a pass's root
without a graph, the line that bound a leaf, and the line that cut leaves off every root."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ...extract.captured import RawPass
from ...findings.graph import unreached
from ...findings.recorded import findings_of
from ...model.facts import LeafCut, PassCut
from ...model.records import Trace
from .statements import Statement, bound_at, graph_cut, leaf_cut

Statements = list[Statement]


def pass_cuts(passes: Sequence[RawPass], lines: list[str],
              statements: Callable[[], Statements]) -> list[PassCut]:
    """For each pass whose root had no graph ("does not require grad"): the line that lost
    it, from the statements that ran."""
    found = []
    for number, p in enumerate(passes, 1):
        if p.error_kind not in ("no-grad-fn", "needs-no-grad"):
            continue
        for name in dict.fromkeys(n for n in p.root_names if n):
            cut = graph_cut(name, statements())
            if cut is not None:
                line, why = cut
                found.append(PassCut(number, name, line, lines[line - 1].strip(), why))
    return found


def place_leaf_findings(trace: Trace, path: str, lines: list[str],
                        statements: Callable[[], Statements]) -> Trace:
    """Findings about a leaf told where: the line that bound it, and for leaves no root
    reaches, the line that took a value computed from them without its graph."""
    lost = unreached(trace)
    if not lost and not any(f.tensor and f.line is None for f in trace.findings):
        return trace  # the common case: no scan of the lines that ran
    placed = [replace(f, file=path, line=line)
              if f.tensor and f.line is None and (line := bound_at(f.tensor, statements()))
              else f for f in trace.findings]
    cuts: list[LeafCut] = []
    by_name: dict[str, list[str]] = {}  # model -> model.0.weight, model.0.bias, …
    for leaf in lost:
        by_name.setdefault(leaf.partition(".")[0], []).append(leaf)
    for name, leaves in by_name.items():
        cut = leaf_cut(name, statements())
        if cut is None:
            continue
        line, why, through = cut
        cuts.append(LeafCut(tuple(leaves), name, line, lines[line - 1].strip(), why, through,
                            path))
    return replace(trace, findings=(*placed, *findings_of(cuts)))
