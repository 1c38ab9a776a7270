"""Where a graph was lost, told by the lines that ran: the line that left a pass's root
without a graph, the line that bound a leaf, and the line that cut leaves off every root."""

from __future__ import annotations

import linecache
import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from ...extract.captured import RawPass
from ...findings.graph import unreached
from ...findings.recorded import findings_of
from ...model.facts import CodeCut, LeafCut, PassCut
from ...model.labels import line_at
from ...model.records import Trace
from .statements import Statement, bound_at, function_cuts, graph_cut, leaf_cut

Statements = list[Statement]


def pass_cuts(passes: Sequence[RawPass], lines: list[str],
              statements: Callable[[], Statements]) -> list[PassCut]:
    """For each pass whose root had no graph ("does not require grad"), or was a leaf a
    line made from another tensor's values (`torch.tensor(loss.item(), requires_grad=True)`:
    backward reaches nothing): the line that lost it, from the statements that ran. Said
    once per root and line."""
    found: dict[tuple[str, int], PassCut] = {}
    for number, p in enumerate(passes, 1):
        rebuilt = p.error is None and bool(p.roots) and all(r is None for r in p.roots)
        if p.error_kind not in ("no-grad-fn", "needs-no-grad") and not rebuilt:
            continue
        for name in dict.fromkeys(n for n in p.root_names if n):
            cut = graph_cut(name, statements(), from_values=rebuilt)
            if cut is not None:
                line, why = cut
                found.setdefault((name, line),
                                 PassCut(number, name, line, lines[line - 1].strip(), why))
    return list(found.values())


def place_leaf_findings(trace: Trace, path: str, lines: list[str],
                        statements: Callable[[], Statements],
                        ran: Sequence[tuple[str, int]] = (),
                        paths_of: Callable[[str], list[str]] = lambda qualname: []) -> Trace:
    """Findings about a leaf told where: the line that bound it, and for leaves no root
    reaches, the line that took a value computed from them without its graph: at the
    script's top level, else inside a function that ran (a module's forward; ran: the
    (file, line) of each own line that ran, in any file; paths_of(class) the paths of the
    scenario's modules of that class)."""
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
    unexplained: list[str] = []
    for name, leaves in by_name.items():
        cut = leaf_cut(name, statements())
        if cut is None:
            unexplained += leaves
            continue
        line, why, through = cut
        cuts.append(LeafCut(tuple(leaves), name, line, lines[line - 1].strip(), why, through,
                            path))
    in_code = code_cuts(trace, tuple(unexplained), ran, paths_of) if unexplained else []
    if in_code:  # the cause first: the unreached-leaf finding then points to it
        first = next((i for i, f in enumerate(placed) if f.code == "unreached-leaf"),
                     len(placed))
        lead = in_code[0]
        see = f"{line_at(lead.file, lead.line, trace.scenario)} cut their graph in " \
            f"{lead.function}: see the graph-cut finding"
        placed = [*placed[:first], *findings_of(in_code, trace.scenario),
                  *(replace(f, hint=see) if f.code == "unreached-leaf" else f
                    for f in placed[first:])]
    return replace(trace, findings=(*placed, *findings_of(cuts, trace.scenario)))


def code_cuts(trace: Trace, leaves: tuple[str, ...], ran: Sequence[tuple[str, int]],
              paths_of: Callable[[str], list[str]]) -> list[CodeCut]:
    """The cuts inside functions that ran (a module's forward: `h.detach()`), as the likely
    reason leaves reach no root: each line that cut, with the module whose forward it is when
    the nodes its function made tell, or when one module of the scenario has its class."""
    by_file: dict[str, set[int]] = {}
    for file, line in ran:
        by_file.setdefault(file, set()).add(line)
    found = []
    for file, lines_run in sorted(by_file.items()):
        lines = linecache.getlines(file)
        for cut in function_cuts([line.rstrip("\n") for line in lines], lines_run):
            module = _module_of(trace, file, cut.first, cut.last)
            if module is None and "." in cut.function:
                paths = paths_of(cut.function.rpartition(".")[0])
                module = paths[0] if len(paths) == 1 else None
            found.append(CodeCut(leaves, cut.line, lines[cut.line - 1].strip(), cut.why, file,
                                 cut.function, module))
    return found


def _module_of(trace: Trace, file: str, first: int, last: int) -> str | None:
    """The module whose forward runs lines first…last of file: the one around the modules of
    the nodes those lines made (two at least, so that it is not one of them)."""
    modules = {n.module for n in trace.nodes if n.module and n.source is not None
               and n.source.file == file and first <= n.source.line <= last}
    if len(modules) < 2:
        return None
    common = os.path.commonprefix([m.split(".") for m in sorted(modules)])
    return ".".join(common) or None
