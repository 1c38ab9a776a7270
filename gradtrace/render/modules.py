"""`show --by-module`: one row per nn.Module — its nodes, parameters, the gradient that came
into it and went out of it in a pass, and the bytes its nodes saved for backward (those of
checkpointed nodes apart: backward recomputes them)."""

from __future__ import annotations

import math
import re
from collections import defaultdict

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..model.records import PACKED, Pass, Trace
from ..model.texts import size_text
from .table import compact

NO_MODULE = "(no module)"


def _held(size: int, packed: bool) -> str:
    """The bytes a module's nodes saved; "not read" where they are nothing read but what a
    hook of the code packed (never unpacked: that would run the hook)."""
    return "not read" if packed and not size else size_text(size)


def _prefixes(path: str | None) -> list[str]:
    """ "a.b.c" -> ["a", "a.b", "a.b.c"]: a node counts for every module around it."""
    if path is None:
        return [NO_MODULE]
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _natural(path: str) -> list[object]:
    """Sort key: h.2 before h.10, the no-module row last."""
    return [path == NO_MODULE] + [int(p) if p.isdigit() else p
                                  for p in re.split(r"(\d+)", path)]


def module_table(trace: Trace, flow: Pass | None, max_rows: int | None = 40) -> Group:
    """The per-module table; gradient norms are those of pass `flow` (none without one)."""
    module_of = {n.id: n.module for n in trace.nodes}
    nodes: dict[str, int] = defaultdict(int)
    saved: dict[str, int] = defaultdict(int)
    recomputed: dict[str, int] = defaultdict(int)  # saved in a checkpoint: made again later
    params: dict[str, int] = defaultdict(int)
    shapes = {t.name: t.shape for t in trace.tensors}
    unread: set[tuple[bool, str]] = set()  # (recomputed, path): a hook packed what it saved
    for n in trace.nodes:
        held = sum(s.bytes or 0 for s in n.saved if s.status == "ok")
        packed = any(s.status == PACKED for s in n.saved)
        for path in _prefixes(n.module):
            nodes[path] += 1
            (recomputed if n.recomputed else saved)[path] += held
            if packed:
                unread.add((n.recomputed, path))
            if n.kind == "leaf" and n.tensor in shapes:
                sizes = [d for d in shapes[n.tensor] if isinstance(d, int)]
                if len(sizes) == len(shapes[n.tensor]):  # a ragged (nested) one has no count
                    params[path] += math.prod(sizes)
    into: dict[str, float] = defaultdict(float)
    out: dict[str, float] = defaultdict(float)
    if flow is not None:
        for e in trace.edges:
            sent = flow.sent(e)
            if sent is None or sent.norm is None or not math.isfinite(sent.norm):
                continue
            giver, taker = _prefixes(module_of.get(e.dst)), _prefixes(module_of.get(e.src))
            for path in set(taker) - set(giver) - {NO_MODULE}:
                into[path] += sent.norm ** 2  # norms of the parts add as squares
            for path in set(giver) - set(taker) - {NO_MODULE}:
                out[path] += sent.norm ** 2
    table = Table(title="modules", title_justify="left", header_style="bold")
    # saved bytes only when the saved tensors were read (--saved, --by-module, --json)
    columns = ["module", "nodes", "parameters", "grad in", "grad out"] + \
        (["saved"] if trace.saved_read else [])
    if recomputed:
        columns.append("recomputed")
    for column in columns:
        table.add_column(column, no_wrap=True, overflow="ellipsis",
                         justify="left" if column == "module" else "right")
    rows = sorted(nodes, key=_natural)
    shown = rows if max_rows is None else rows[:max_rows]
    for path in shown:
        cells: list[Text | str] = [Text(path, style="cyan" if path != NO_MODULE else "dim"),
                 str(nodes[path]), f"{params[path]:,}" if params[path] else "-",
                 _norm(into, path), _norm(out, path)]
        if trace.saved_read:
            cells.append(_held(saved[path], (False, path) in unread))
        if recomputed:
            cells.append(_held(recomputed[path], (True, path) in unread))
        table.add_row(*cells)
    parts: list[Table | Text] = [table]
    if len(shown) < len(rows):
        parts.append(Text(f"… {len(rows) - len(shown)} more modules (--all)", style="yellow"))
    if not trace.nodes or all(n.module is None for n in trace.nodes):
        parts.append(Text("no node was made inside an nn.Module's forward", style="dim"))
    return Group(*parts)


def _norm(sums: dict[str, float], path: str) -> str:
    return compact(math.sqrt(sums[path])) if path in sums else "-"
