"""Where a graph was lost, told by the lines that ran, as facts (findings/cuts.py phrases
them): the line that left a pass's root without a graph, the line that bound a leaf, and the
line that cut leaves off every root."""

from __future__ import annotations

import ast
import functools
import linecache
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import NamedTuple

from ...extract.captured import RawPass
from ...model.facts import CodeCut, Cut, LeafCut, PassCut
from ...model.records import Edge, Node
from .forward_cuts import function_cuts
from .statements import (
    Statement,
    bound_at,
    graph_cut,
    ran_to,
    rebuilt_leaf,
    statements_run,
)

Statements = list[Statement]


class RanFirst(NamedTuple):
    """Which lines may have cut what a backward lost: those that first ran before its line
    first did (or are that line). A cut is blamed only on a line that ran before the backward
    it explains: a loop's logging after backward() (`loss.data.numpy()`) first ran after it."""

    order: Callable[[tuple[str, int]], int | None]  # a (file, line)'s rank as lines first ran
    path: str  # the scenario's file, the backward's line's

    def before(self, backward: int | None) -> Callable[[tuple[str, int]], bool]:
        """Whether a (file, line) first ran before the backward at that line of the
        scenario (every line that ran, when that line is not known)."""
        at = None if backward is None else self.order((self.path, backward))
        if at is None:
            return lambda place: True
        return lambda place: (rank := self.order(place)) is not None and rank <= at


def pass_cuts(passes: Sequence[RawPass], lines: list[str],
              statements: Callable[[], Statements], ran_first: RanFirst | None = None
              ) -> list[PassCut]:
    """For each pass whose root had no graph ("does not require grad"), or was a leaf a
    line made from another tensor's values (`torch.tensor(loss.item(), requires_grad=True)`:
    backward reaches nothing): the line that lost it, from the statements that ran before
    it. Said once per root and line."""
    found: dict[tuple[str, int], PassCut] = {}
    for number, p in enumerate(passes, 1):
        rebuilt = made_from_values(p)
        # run by a library (a Trainer's backward): no frame of the code named its roots
        by_library = p.error is None and (rebuilt or p.lone_leaf) and not any(p.root_names)
        if p.error_kind not in ("no-grad-fn", "needs-no-grad") and not rebuilt \
                and not by_library:
            continue
        cuts = rebuilt_leaf(statements(), lines) if by_library else [
            (name, graph_cut(name, _before(statements(), ran_first, p.line),
                             from_values=rebuilt))
            for name in dict.fromkeys(n for n in p.root_names if n)]
        for name, cut in cuts:
            if cut is not None:
                line, how = cut
                found.setdefault((name, line),
                                 PassCut(number, name, line, lines[line - 1].strip(), how))
    return list(found.values())


def made_from_values(p: RawPass) -> bool:
    """Whether a pass ran from roots that are leaves (no grad_fn, yet they require grad): made
    from values, backward from them reaches nothing."""
    return p.error is None and p.from_leaves and bool(p.root_names)


def _before(statements: Statements, ran_first: RanFirst | None, backward: int | None
            ) -> Statements:
    """The statements of the scenario that first ran before the backward at that line."""
    if ran_first is None:
        return statements
    early = ran_first.before(backward)
    return [s for s in statements if early((ran_first.path, s.line))]


@dataclass(frozen=True)
class LineCuts:
    """The code's own lines, which build_trace asks (extract's SourceCuts) once the graph is
    built: the line that bound a tensor, and for leaves no root reaches, the line that took a
    value computed from them without its graph: at the file's top level, else inside a
    function that ran (a module's forward). Only lines that first ran before the backward at
    line `backward` cut (ran_first tells)."""

    file: str  # the file whose statements these are
    lines: list[str]
    statements: Callable[[], Statements]
    # the (file, line) of each own line that ran, in any file (none known: no function cut)
    ran: Callable[[], Sequence[tuple[str, int]]] = tuple
    # the paths of the code's modules of a class (Block: model.0, model.1)
    paths_of: Callable[[str], list[str]] = lambda qualname: []
    ran_first: RanFirst | None = None
    backward: int | None = None

    def bound_at(self, tensor: str) -> int | None:
        """The first line that ran and bound tensor (model for model.fc.weight)."""
        return bound_at(tensor, self.statements())

    def cuts(self, lost: Sequence[str], copies: frozenset[str], nodes: Sequence[Node],
             edges: Sequence[Edge]) -> list[LeafCut | CodeCut]:
        """The cuts of the lost leaves (not copies: a target or EMA copy, which updated-copy
        tells, was cut on purpose): each owner's line of the file, else the lines inside
        functions that cut the leaves no line of the file explains."""
        by_name: dict[str, list[str]] = {}  # model -> model.0.weight, model.0.bias, …
        for leaf in lost:
            if leaf not in copies:
                by_name.setdefault(leaf.partition(".")[0], []).append(leaf)
        early = _before(self.statements(), self.ran_first, self.backward) if by_name else []
        found: list[LeafCut | CodeCut] = []
        unexplained: list[str] = []
        root = frozenset(re.findall(r"[A-Za-z_]\w*", self.lines[self.backward - 1])) \
            if self.backward and 0 < self.backward <= len(self.lines) else frozenset()
        for name, leaves in by_name.items():
            cut = leaf_cut(name, early, root)
            if cut is None:
                unexplained += leaves
                continue
            line, how, through = cut
            found.append(LeafCut(tuple(leaves), name, line, self.lines[line - 1].strip(), how,
                                 through, self.file,
                                 _used_at(nodes, edges, self.file, _users(early, line))))
        if not unexplained:
            return found
        ran = self.ran()
        if self.ran_first is not None:
            before = self.ran_first.before(self.backward)
            ran = [place for place in ran if before(place)]
        return [*code_cuts(nodes, edges, tuple(unexplained), ran, self.paths_of), *found]


def caller_cuts(frame: FrameType) -> LineCuts | None:
    """The lines of the caller's file for trace(tensors) (None: code with no file). No line
    log ran: the lines that ran are those each frame of that file on the stack passed
    through straight (not a branch, loop or handler that may not have run); which lines of
    other files and functions ran is not known, so no cut inside a forward is told."""
    path = frame.f_code.co_filename
    lines = "".join(linecache.getlines(path)).splitlines()  # as a scenario's are read
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    ran: set[int] = set()
    at: FrameType | None = frame
    while at is not None:
        if at.f_code.co_filename == path:
            ran |= ran_to(tree, at.f_lineno)
        at = at.f_back
    if not ran:
        return None
    return LineCuts(path, lines, functools.cache(functools.partial(statements_run, lines, ran)))


def code_cuts(nodes: Sequence[Node], edges: Sequence[Edge], leaves: tuple[str, ...],
              ran: Sequence[tuple[str, int]], paths_of: Callable[[str], list[str]]
              ) -> list[CodeCut]:
    """The cuts inside functions that ran (a module's forward: `h.detach()`), as the likely
    reason leaves reach no root: each line that cut, with the module whose forward holds it
    (of the scenario's modules of its class, the one the nodes its lines made tell). A value
    taken of the module's own tensor (`self.log_scale.exp().item()`) counts where that
    tensor is one of the leaves."""
    by_file: dict[str, set[int]] = {}
    for file, line in ran:
        by_file.setdefault(file, set()).add(line)
    found = []
    for file, lines_run in sorted(by_file.items()):
        lines = linecache.getlines(file)
        for cut in function_cuts([line.rstrip("\n") for line in lines], lines_run):
            owner = cut.function.rpartition(".")[0]
            module = _module_of(nodes, file, cut.first, cut.last, paths_of(owner) if owner
                                else [])
            if cut.reads and not (module and any(
                    leaf == f"{module}.{a}" or leaf.startswith(f"{module}.{a}.")
                    for a in cut.reads for leaf in leaves)):
                continue  # a value of another tensor (a count, a logged number)
            found.append(CodeCut(leaves, cut.line, lines[cut.line - 1].strip(), cut.cut, file,
                                 cut.function, module, _used_at(nodes, edges, file,
                                                                {cut.line})))
    return found


def _module_of(nodes: Sequence[Node], file: str, first: int, last: int, paths: list[str]
               ) -> str | None:
    """The module whose forward runs lines first…last of file. Of paths (the scenario's
    modules of the forward's class): the one around the modules of the nodes those lines
    made (a child's, when they called a child: model.head is inside model), or the only
    one. Without paths: the one around those modules (two at least, so that it is not one
    of them)."""
    modules = {n.module for n in nodes if n.module and n.source is not None
               and n.source.file == file and first <= n.source.line <= last}
    if paths:
        around = [p for p in paths if any(m == p or m.startswith(p + ".") for m in modules)]
        return around[0] if len(around) == 1 else paths[0] if len(paths) == 1 else None
    if len(modules) < 2:
        return None
    common = os.path.commonprefix([m.split(".") for m in sorted(modules)])
    return ".".join(common) or None


def _users(statements: Statements, line: int) -> set[int]:
    """The line that cut, and the later lines that read what it bound: where the value
    without a graph is used."""
    bound = frozenset().union(*(s.bound for s in statements if s.line == line))
    return {line} | {s.line for s in statements if s.line > line and bound.intersection(s.read)}


def _used_at(nodes: Sequence[Node], edges: Sequence[Edge], file: str, lines: set[int]
             ) -> str | None:
    """The node of the graph shown where a cut value is used: of the ops those lines of file
    made, the first made (the last found from the roots) with an input that needs no
    gradient before one that does (autograd leaves no edge where an input has no graph:
    `self.ln(h.detach())`), else the first made of them."""
    made = [n.id for n in nodes if n.kind != "leaf" and n.source is not None
            and n.source.file == file and n.source.line in lines]
    if not made:
        return None
    slots: dict[str, set[int]] = {node: set() for node in made}
    for e in edges:
        if e.dst in slots:
            slots[e.dst].add(e.dst_input)
    gapped = [n for n in made if slots[n] and len(slots[n]) <= max(slots[n])]
    return (gapped or made)[-1]


def leaf_cut(leaf: str, statements: list[Statement], root: frozenset[str] = frozenset()
             ) -> tuple[int, Cut, str] | None:
    """(line, cut, through) for the first statement that ran and took a value computed from
    leaf (through that name) without its graph, of those whose value goes on into root (the
    names the backward's line reads: not a loop's logging of `value.item()`), else of all;
    None when none did.

    Follows the names each statement binds from the names it reads, in line order.
    """
    reached, cuts = {leaf}, []
    for k, s in enumerate(statements):
        through = next((n for n in s.read if n in reached), None)
        if through is None:
            continue
        cut = next((n for n in s.taken if n in reached), None) if s.taken else through
        if s.cut is not None and cut is not None:
            if not root or _flows(s.bound, statements[k + 1:], root):
                return s.line, s.cut, cut
            cuts.append((s.line, s.cut, cut))
        reached |= s.bound
    return cuts[0] if cuts else None


def _flows(names: frozenset[str], statements: list[Statement], into: frozenset[str]) -> bool:
    """Whether a value bound to names goes on, through the statements, into one of into."""
    reached = set(names)
    for s in statements:
        if reached.intersection(s.read):
            reached |= s.bound
    return bool(reached & into)
