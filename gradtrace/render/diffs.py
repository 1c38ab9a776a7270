"""`gradtrace diff` output: the terminal report, JSON, GitHub annotations, the union picture."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from ..diff.union import Union
from ..model.codec import finding_dict, summary_dict
from ..model.diffs import (
    EdgeChange,
    GradientChange,
    NodeChange,
    NodeChangeKind,
    RankGradient,
    TensorChange,
    TraceDiff,
)
from ..model.profile import ModuleCost
from ..model.records import Finding, Node, Ranks
from ..model.texts import duration_text, node_title, number
from .drawing import Drawing, DrawOptions, drawing
from .github import LEVEL, annotation
from .json import json_text

SCHEMA = "gradtrace.diff/1"
SHOWN = 20  # items listed per section on a terminal, unless every=True
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


def verdict(d: TraceDiff) -> str:
    """One line: "same: 11 nodes match, …" or "different: 1 node(s) changed, …"."""
    if d.same:
        return (f"same: {d.matched} nodes match, {d.passes[1]} pass(es), gradients within "
                f"rtol {number(d.rtol)}, atol {number(d.atol)}")
    kinds = [c.kind for c in d.nodes]
    counts = [
        (kinds.count("added"), "node(s) added"), (kinds.count("removed"), "node(s) removed"),
        (kinds.count("changed"), "node(s) changed"), (len(d.edges), "edge(s) added or removed"),
        (len(d.tensors), "tensor(s) changed"), (len(d.gradients), "gradient(s) moved"),
        (len(d.new_findings), "new finding(s)"), (len(d.fixed_findings), "fixed finding(s)"),
    ]
    parts = [f"{n} {what}" for n, what in counts if n]
    if d.passes[0] != d.passes[1]:
        parts.append(f"passes {d.passes[0]} → {d.passes[1]}")
    return "different: " + ", ".join(parts)


def node_text(n: Node) -> str:
    """ "ReluBackward0 in model.1 (n4, line 7)"; a leaf by its tensor."""
    what = node_title(n)  # a node with several named outputs names each: (a, b)
    where = [n.id] + ([f"line {n.source.line}"] if n.source is not None else [])
    return what + (f" in {n.module}" if n.module else "") + f" ({', '.join(where)})"


def node_change_text(c: NodeChange) -> str:
    a, b = c.a, c.b
    if b is None:
        return "- " + node_text(a) if a is not None else ""
    if a is None:
        return "+ " + node_text(b)
    what = a.type if a.type == b.type else f"{a.type} → {b.type}"
    module = a.module if a.module == b.module else f"{a.module} → {b.module}"
    line = f", line {b.source.line}" if b.source is not None else ""
    return f"{what}" + (f" in {module}" if module else "") + f" (A {a.id}, B {b.id}{line})"


def edge_change_text(c: EdgeChange) -> str:
    """ "- A: AddmmBackward0 in model.2 (n2) → input 0 of PowBackward0 (n1)"."""
    def end(n: Node) -> str:
        return n.type + (f" in {n.module}" if n.module else "") + f" ({n.id})"

    side = "+ B" if c.kind == "added" else "- A"
    return f"{side}: {end(c.src)} → input {c.edge.dst_input} of {end(c.dst)}"


def tensor_change_text(c: TensorChange) -> str:
    if c.kind in ("added", "removed"):
        return f"{c.name}: only in {'B' if c.kind == 'added' else 'A'}"
    return f"{c.name}: {c.kind} {c.before} → {c.after}"


def gradient_change_text(c: GradientChange) -> str:
    when = "final .grad" if c.pass_number is None else f"pass {c.pass_number}"
    return f"{c.tensor}, {when}: {c.detail}"


def rank_gradient_text(c: RankGradient, ranks: tuple[Ranks, Ranks]) -> str:
    """ "model.0.weight: .grad norm 0.1666 on both ranks: DDP averaged their gradients"."""
    a, b = (f"norm {number(g.norm)}" if g is not None else "None" for g in (c.a, c.b))
    if c.equal:
        return (f"{c.tensor}: .grad {a} on both ranks: their own gradients were averaged "
                "into it (DDP's allreduce)")
    if any(g is not None and g.local_shard for g in (c.a, c.b)):
        return (f"{c.tensor}: .grad {a} on rank {ranks[0].rank}, {b} on rank "
                f"{ranks[1].rank}: each rank's local shard of it (FSDP's reduce-scatter)")
    return (f"{c.tensor}: .grad {a} on rank {ranks[0].rank}, {b} on rank {ranks[1].rank}: "
            "not reduced across the ranks")


def finding_text(f: Finding) -> str:
    return f"{f.code}: {f.message}"


def diff_report(d: TraceDiff, every: bool = False) -> Group:
    """The terminal report: both sides, the verdict, then each kind of change."""
    ranked = [f" (rank {r.rank} of {r.world})" for r in d.ranks] if d.ranks else ["", ""]
    parts: list[RenderableType] = [Text.assemble(("gradtrace diff  ", "bold"), ("A ", "dim"),
                                                 d.a, ranked[0], ("  →  B ", "dim"), d.b,
                                                 ranked[1])]
    parts.append(Text(verdict(d), style="bold green" if d.same else "bold red"))
    own = "each rank's own gradients (what reached AccumulateGrad) " if d.ranks else ""
    sections = [
        ("nodes", [(node_change_text(c), _NODE_STYLE[c.kind]) for c in d.nodes]),
        ("edges", [(edge_change_text(c), "green" if c.kind == "added" else "red")
                   for c in d.edges]),
        ("modules whose subgraph changed", [(m, "") for m in d.modules]),
        ("tensors", [(tensor_change_text(c), "") for c in d.tensors]),
        (f"{own or 'gradients '}beyond rtol {number(d.rtol)}, atol {number(d.atol)}",
         [(gradient_change_text(c), "yellow") for c in d.gradients]),
        (".grad after the ranks' reduction",
         [(rank_gradient_text(c, d.ranks), "green" if c.equal else "red")
          for c in d.across_ranks] if d.ranks else []),
        ("new findings", [(finding_text(f), SEVERITY_STYLE[f.severity])
                          for f in d.new_findings]),
        ("fixed findings", [(finding_text(f), "green") for f in d.fixed_findings]),
    ]
    for title, items in sections:
        if items:
            parts.append(_section(title, items, None if every else SHOWN))
    if d.costs:
        parts.append(_section("backward time per module (A → B, the largest slow-down first)",
                              [(module_cost_text(c), "") for c in d.costs],
                              None if every else SHOWN))
    return Group(*parts)


def module_cost_text(c: ModuleCost) -> str:
    """ "model.0  1.2 ms → 2.4 ms (+100%)"."""
    a = "-" if c.a_us is None else duration_text(c.a_us)
    b = "-" if c.b_us is None else duration_text(c.b_us)
    change = f" ({c.b_us / c.a_us - 1:+.0%})" if c.a_us and c.b_us is not None else ""
    return f"{c.module}  {a} → {b}{change}"


_NODE_STYLE: dict[NodeChangeKind, str] = {"added": "green", "removed": "red",
                                          "changed": "yellow"}


def _section(title: str, items: list[tuple[str, str]], limit: int | None) -> Text:
    """A section's title with its count, and its items: all of them, or (limit) runs of
    alike items folded into one line each, and the first limit lines of those."""
    text = Text(f"\n{title} ({len(items):,})\n", style="bold")
    runs = [(line, style, 1) for line, style in items] if limit is None else _alike_runs(items)
    for line, style, _ in runs[:limit]:
        text.append(f"  {line}\n", style=style)
    if limit is not None and len(runs) > limit:
        left = len(items) - sum(n for _, _, n in runs[:limit])
        text.append(f"  … {left:,} more (--all lists them, --json too)\n", style="dim")
    text.rstrip()
    return text


NODE_ID = re.compile(r"\b[nr]\d+\b")  # n12 (a trace's node), r3 (a node only A had)
FOLD_FROM = 3  # alike items in a row from which they are one line


def _alike_runs(items: list[tuple[str, str]]) -> list[tuple[str, str, int]]:
    """Items in a row that differ only in their node ids (a chain's 100,000 removed
    MulBackward0s) as one line: the first, "×N alike" and the last one's ids; with counts."""
    runs: list[tuple[str, str, int]] = []
    i = 0
    while i < len(items):
        line, style = items[i]
        shape = NODE_ID.sub("#", line)
        j = i + 1
        while j < len(items) and items[j][1] == style and NODE_ID.sub("#", items[j][0]) == shape:
            j += 1
        if j - i >= FOLD_FROM:
            last = " → ".join(NODE_ID.findall(items[j - 1][0]))
            runs.append((f"{line} … ×{j - i:,} alike, the last {last}", style, j - i))
        else:
            runs += [(text, look, 1) for text, look in items[i:j]]
        i = j
    return runs


def _node_ref(n: Node | None) -> dict[str, Any] | None:
    if n is None:
        return None
    return {"id": n.id, "type": n.type, "module": n.module, "tensor": n.tensor,
            "line": None if n.source is None else n.source.line}


def diff_dict(d: TraceDiff) -> dict[str, Any]:
    """The diff as JSON data (schema gradtrace.diff/1); keys in a fixed order."""
    return {
        "schema": SCHEMA,
        "a": d.a,
        "b": d.b,
        "same": d.same,
        "matched": d.matched,
        "passes": {"a": d.passes[0], "b": d.passes[1]},
        "ranks": None if d.ranks is None else {"a": d.ranks[0].rank, "b": d.ranks[1].rank,
                                               "world": d.ranks[1].world},
        "tolerance": {"rtol": d.rtol, "atol": d.atol},
        "nodes": [{"change": c.kind, "a": _node_ref(c.a), "b": _node_ref(c.b)}
                  for c in d.nodes],
        "edges": [{"change": c.kind, "src": c.edge.src, "dst": c.edge.dst,
                   "dst_input": c.edge.dst_input, "src_output": c.edge.src_output,
                   "src_type": c.src.type, "dst_type": c.dst.type} for c in d.edges],
        "modules": list(d.modules),
        "tensors": [{"name": c.name, "change": c.kind, "before": c.before, "after": c.after}
                    for c in d.tensors],
        "gradients": [{"tensor": c.tensor, "pass": c.pass_number, "change": c.kind,
                       "detail": c.detail, "a": summary_dict(c.a), "b": summary_dict(c.b)}
                      for c in d.gradients],
        "across_ranks": [{"tensor": c.tensor, "equal": c.equal, "a": summary_dict(c.a),
                          "b": summary_dict(c.b)} for c in d.across_ranks],
        "findings": {"new": [finding_dict(f) for f in d.new_findings],
                     "fixed": [finding_dict(f) for f in d.fixed_findings]},
        **({"costs": [{"module": c.module, "a_us": c.a_us, "b_us": c.b_us,
                       "a_spread_us": c.a_spread, "b_spread_us": c.b_spread}
                      for c in d.costs]} if d.costs else {}),
    }


def diff_json(d: TraceDiff) -> str:
    """diff_dict as JSON text (non-finite numbers spelled as strings, as in traces)."""
    return json_text(diff_dict(d), indent=2) + "\n"


def diff_annotations(d: TraceDiff) -> str:
    """Each difference as a GitHub Actions annotation, on its B line where it has one (A's
    for what was removed)."""
    out = []
    for c in d.nodes:
        n = c.b or c.a
        where = (n.source.file, n.source.line) if n is not None and n.source else (None, None)
        out.append(annotation("error", f"gradtrace diff: node {c.kind}",
                              node_change_text(c), *where))
    out += [annotation("error", f"gradtrace diff: edge {c.kind}", edge_change_text(c))
            for c in d.edges]
    out += [annotation("error", "gradtrace diff: tensor", tensor_change_text(c))
            for c in d.tensors]
    out += [annotation("error", f"gradtrace diff: gradient {c.kind}", gradient_change_text(c))
            for c in d.gradients]
    out += [annotation(LEVEL[f.severity], f"gradtrace diff: new {f.code}", f.message, f.file,
                       f.line) for f in d.new_findings]
    out += [annotation("notice", f"gradtrace diff: fixed {f.code}", f.message)
            for f in d.fixed_findings]
    if d.passes[0] != d.passes[1]:
        out.append(annotation("error", "gradtrace diff: passes",
                              f"A recorded {d.passes[0]} pass(es), B {d.passes[1]}"))
    return "".join(out)


def diff_drawing(union: Union, options: DrawOptions = DrawOptions()) -> Drawing:  # noqa: B008
    """The union graph drawn: added boxes green, removed red, changed amber; an arrow between
    nodes of both sides that only one side has says "added" or "removed"."""
    picture = drawing(union.trace, options)
    picture.boxes = [(box_id, lines, union.nodes.get(box_id, kind), cluster)
                     for box_id, lines, kind, cluster in picture.boxes]
    if union.edges:
        picture.arrows = [(src, dst, label) if (src, dst) not in union.edges else
                          (src, dst, f"{label or ''} {union.edges[src, dst]}".strip())
                          for src, dst, label in picture.arrows]
    return picture
