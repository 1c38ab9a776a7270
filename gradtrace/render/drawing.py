"""What a picture of the graph shows, before any syntax: boxes, arrows, clusters.

DOT and Mermaid both draw a Drawing, so focus, folding and cutting are decided once. Arrows
point the way the forward pass went (input -> consumer), as torchviz draws them; gradients
flow against them, and the words say so: an arrow's label names what it carries ("input 1"
for the consumer's slot, "grad 0.6" for what flowed back along it), the legend says which
way gradients go (DIRECTION), and with gradients shown a named leaf's box shows its total
.grad (".grad 1.6" where two arrows bring 0.6 and 1).
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter
from typing import Any

from ..errors import ExportError, GradtraceError
from ..gcpause import gc_paused
from ..model.labels import line_at
from ..model.profile import CostMeasure
from ..model.records import (
    CUSTOM,
    LEAF,
    Edge,
    Node,
    Pass,
    TensorInfo,
    Trace,
    custom_kind_label,
)
from ..model.texts import grad_text, node_names, shape_text
from .bounded import MAX_BOXES, Capped, cap_boxes
from .heat import Heat, heat
from .marks import Mark, non_finite_nodes
from .palette import PALETTE, BoxKind

FOLD_MIN_REPEATS = 3
FOLD_MAX_PERIOD = 4
# the legend's lines on the arrows: without gradients, and with them (--grads)
DIRECTION = ("arrows: the forward pass (input → op)\n"
             "gradients flow back against them, from the output to the leaves")
DIRECTION_GRADS = ("arrows: the forward pass (input → op)\n"
                   "grad: what flowed back against an arrow, from the output to the leaves\n"
                   ".grad: a leaf's total, the sum of the grads it received")


# One drawn node: (id, lines, kind, cluster); kind picks its style (op | leaf | custom |
# gradient | output | folded | more), cluster is a module path or None. And one arrow: (src,
# dst, label or None). Plain tuples, read by unpacking: a big picture makes 100,000s, and
# zip() makes plain tuples several times faster than named ones.
Box = tuple[str, tuple[str, ...], BoxKind, "str | None"]
Arrow = tuple[str, str, "str | None"]


@dataclass
class Drawing:
    boxes: list[Box] = field(default_factory=list)  # a box's cluster is a module path
    arrows: list[Arrow] = field(default_factory=list)
    tooltips: dict[str, str] = field(default_factory=dict)  # box id -> the line that made it
    members: dict[str, list[str]] = field(default_factory=dict)  # folded box -> its node ids
    marks: dict[str, Mark] = field(default_factory=dict)  # box id -> NaN/Inf born or passed
    # a graph cut's arrows: from its box to where the value without a graph is used (dashed)
    cuts: list[Arrow] = field(default_factory=list)
    heat: Heat | None = None  # --heat: each costed box's fill, and the scale's legend
    direction: str | None = None  # the legend's line on which way gradients flow (DIRECTION)

    def kinds(self) -> list[BoxKind]:
        """The kinds drawn, in a fixed order (for the legend)."""
        present = {kind for _, _, kind, _ in self.boxes}
        return [k for k in PALETTE if k in present]


@dataclass(frozen=True)
class DrawOptions:
    saved: bool = False
    grads: Pass | None = None
    max_nodes: int | None = None
    fold: bool = True
    focus: str | None = None
    radius: int = 2
    module_depth: int | None = None
    lines: bool = False  # each op's scenario line ("line 12")
    heat: CostMeasure | None = None  # fill boxes by backward time or memory (--heat)
    max_boxes: int | None = MAX_BOXES  # past this many boxes the rest are left out, said
    more_hint: str | None = None  # how to draw more, as the caller's user asks (a flag)


@gc_paused
def drawing(trace: Trace, options: DrawOptions = DrawOptions()) -> Drawing:  # noqa: B008
    """Decide what to draw: focus, then folding, then the --max-nodes cut."""
    # Ids are written into DOT and Mermaid as they are: letters and digits cannot inject
    # anything (loaded traces are held to n0, n1, … already). One test over all, at C speed.
    ids = "".join(map(attrgetter("id"), trace.nodes))
    if not (ids.isascii() and (ids.isalnum() or not ids)):
        raise ExportError("node ids must be letters and digits (n0, n1, …) to be drawn",
                          "regenerate the trace with `gradtrace show SCENARIO --json`")
    keep: list[str] | None = None  # None: every node (the common case, kept cheap)
    if options.focus is not None:
        keep = _neighbourhood(trace, focus_node(trace, options.focus), options.radius)
    if options.max_nodes is not None and len(trace.nodes if keep is None else keep) \
            > options.max_nodes:
        keep = (keep if keep is not None else [n.id for n in trace.nodes])[:options.max_nodes]
    nodes: Sequence[Node]
    edges: Sequence[Edge]
    if keep is None:
        kept: Container[str] = _Everything()
        nodes, edges = trace.nodes, trace.edges
    else:
        kept = set(keep)
        by_id = {n.id: n for n in trace.nodes}
        nodes = [by_id[n] for n in keep]
        edges = [e for e in trace.edges if e.src in kept and e.dst in kept]
    # Nodes made while a create_graph=True pass ran belong to a gradient's own graph.
    in_grad_graph = {n.id for n in nodes if n.grad_graph}
    tensors = {t.name: t for t in trace.tensors}

    out = Drawing()
    # Boxes in stages: what each node shows, then the style of gradients' graphs, then folding.
    out.boxes = _boxes(nodes, tensors, options.saved, options.module_depth, options.lines)
    if options.grads is not None:
        out.boxes = _leaf_grads(out.boxes, nodes, tensors)
    if in_grad_graph:
        out.boxes = [(box_id, lines, "gradient", cluster) if box_id in in_grad_graph
                     else (box_id, lines, kind, cluster)
                     for box_id, lines, kind, cluster in out.boxes]
    folded_into = _fold(trace, [n.id for n in nodes], edges) if options.fold else {}
    if folded_into:  # a chain's first node is drawn as the whole chain; the others not
        for node_id, (box_id, _) in folded_into.items():
            out.members.setdefault(box_id, []).append(node_id)
        out.boxes = [(box_id, lines, kind, cluster) if box_id not in folded_into else
                     (box_id, folded_into[box_id][1], "folded", cluster)
                     for box_id, lines, kind, cluster in out.boxes
                     if folded_into.get(box_id, (box_id,))[0] == box_id]

    out.tooltips = {n.id: "; ".join(f"{os.path.basename(s.file)}:{s.line}: {s.code}"
                                    for s in (n.source, n.library) if s is not None)
                    for n in nodes if n.source is not None and n.id not in folded_into}

    def drawn(node_id: str) -> str:
        return folded_into[node_id][0] if node_id in folded_into else node_id

    if options.heat is not None:
        out.heat = heat(trace, options.heat, out.members, [box[0] for box in out.boxes])
        out.boxes = [(box_id, (*lines, out.heat.boxes[box_id][2]), kind, cluster)
                     if box_id in out.heat.boxes else (box_id, lines, kind, cluster)
                     for box_id, lines, kind, cluster in out.boxes]
    marked = {node_id: mark for node_id, mark in non_finite_nodes(trace, options.grads).items()
              if node_id in kept}
    if marked:
        _mark(out, {node_id: (drawn(node_id), mark) for node_id, mark in marked.items()})

    # Arrows in stages (the hot loops of a big picture): input indexes, then gradients, then
    # folding.
    out.arrows = _arrows(edges, {e.dst for e in trace.edges if e.dst_input})
    if options.grads is not None:
        sent = map(options.grads.sent, edges)
        out.arrows = [(src, dst, label) if g is None else
                      (src, dst, f"{label} · grad {grad_text(g)}" if label
                       else f"grad {grad_text(g)}")
                      for (src, dst, label), g in zip(out.arrows, sent, strict=True)]
    if folded_into:
        out.arrows = _merged([(drawn(src), drawn(dst), label) for src, dst, label in out.arrows
                              if drawn(src) != drawn(dst)])  # not inside a folded chain
    ends = dict(zip(trace.outputs, trace.output_names, strict=False))
    for p in trace.passes:  # named roots of passes too: "x.grad" for a create_graph gradient
        for node_id, name in zip(p.roots, p.root_names, strict=False):
            if name and node_id not in ends:
                ends[node_id] = name
    for i, (node_id, name) in enumerate(ends.items()):
        if node_id in kept:
            t = tensors.get(name)
            shape = [shape_text(t.dtype, t.shape)] if t is not None else []
            out.boxes.append((f"out{i}", (name, *shape), "output", None))
            out.arrows.append((drawn(node_id), f"out{i}", None))
    _cuts(out, trace, kept, drawn)
    if out.arrows:
        out.direction = DIRECTION if options.grads is None else DIRECTION_GRADS
    left_out = 0 if keep is None else len(trace.nodes) - len(keep)
    capped = cap_boxes(out, options.max_boxes) if options.max_boxes is not None else None
    if capped is not None and not capped.boxes:
        capped = None  # the common case: within the bound
    if left_out or capped:
        _more(out, left_out, capped, options)
        if left_out:
            for e in trace.edges:  # one arrow from the cut to each kept node it feeds
                if e.src not in kept and e.dst in kept:
                    out.arrows.append(("more", drawn(e.dst), None))
        out.arrows = list(dict.fromkeys(out.arrows))
    return out


def _more(out: Drawing, left_out: int, capped: Capped | None, options: DrawOptions) -> None:
    """The box that says what was not drawn: the nodes a cut (max_nodes, focus) left out and
    those past the box cap, with an arrow to each kept box that lost an input to the cap."""
    lines = [f"… {left_out + (capped.nodes if capped else 0):,} more nodes not drawn"]
    if capped:
        lines.append(f"(in {capped.boxes:,} boxes past the first {options.max_boxes:,}: "
                     "a picture's bound)")
        out.arrows += [("more", box_id, None) for box_id in capped.fed]
    if capped and capped.mark is not None:  # a NaN/Inf among them is said, not lost
        out.marks["more"] = capped.mark
        lines.append(capped.mark.note.replace(" here", "") + " among them")
    if options.more_hint:
        lines.append(options.more_hint)
    out.boxes.append(("more", tuple(lines), "more", None))


def _cuts(out: Drawing, trace: Trace, kept: Container[str], drawn: Callable[[str], str]
          ) -> None:
    """A box for each line a graph-cut finding names, with an arrow to the node drawn where
    the value without a graph is used (the finding's node); its tooltip is the finding."""
    cuts = [(f.node, f.line, f) for f in trace.findings
            if f.code == "graph-cut" and f.node is not None and f.line is not None]
    if not cuts:
        return  # the common case: no scan of the nodes
    ids = {n.id for n in trace.nodes}
    for i, (node, line, f) in enumerate((node, line, f) for node, line, f in cuts
                                        if node in ids and node in kept):
        where = line_at(f.file or "", line, trace.scenario)
        out.boxes.append((f"cut{i}", (f"✂ graph cut at {where}",), "cut", None))
        out.cuts.append((f"cut{i}", drawn(node), None))
        out.tooltips[f"cut{i}"] = f.message


def _mark(out: Drawing, marked: dict[str, tuple[str, Mark]]) -> None:
    """A note line in each box where a NaN or Inf was born or passed, and in its tooltip; a
    folded box takes the strongest mark of the nodes it stands for."""
    notes: dict[str, Mark] = {}
    for node_id, (box_id, mark) in marked.items():
        if mark.level == "born" and box_id != node_id:  # in a fold: say which of its nodes
            mark = mark._replace(note=mark.note.replace(" here", f" at {node_id}"))
        if box_id not in notes or (mark.level == "born" and notes[box_id].level != "born"):
            notes[box_id] = mark
    out.marks = {box[0]: notes[box[0]] for box in out.boxes if box[0] in notes}
    out.boxes = [(box_id, (*lines, notes[box_id].note), kind, cluster) if box_id in notes
                 else (box_id, lines, kind, cluster)
                 for box_id, lines, kind, cluster in out.boxes]
    for box_id, mark in notes.items():
        tip = out.tooltips.get(box_id)
        out.tooltips[box_id] = f"{tip}\n{mark.note}" if tip else mark.note


def _boxes(nodes: Sequence[Node], tensors: dict[str, TensorInfo], saved: bool,
           depth: int | None, source_lines: bool = False) -> list[Box]:
    """A box per node. Most show only their type (one tuple of lines per type): the boxes
    are zipped from the nodes' fields, and only the others' lines made one by one."""
    types = list(map(attrgetter("type"), nodes))
    plain = {node_type: _lines(node._replace(tensor=None, output_tensors=(), recomputed=False),
                               tensors, False, False)
             for node_type, node in dict(zip(types, nodes, strict=True)).items()}
    lines = list(map(plain.__getitem__, types))
    special: Iterable[Any] = map(attrgetter("tensor"), nodes)  # named: the common case, cheap
    if saved or source_lines or any(map(attrgetter("recomputed"), nodes)):
        special = (n.tensor or n.recomputed or (saved and n.saved) or (source_lines and n.source)
                   for n in nodes)
    for i in compress(range(len(nodes)), special):
        lines[i] = _lines(nodes[i], tensors, saved, source_lines)
    clusters: Iterable[str | None] = repeat(None)
    if any(map(attrgetter("module"), nodes)):  # made by nn.Modules
        clusters = [_cluster(n, depth) if n.module else None for n in nodes]
    return list(zip(map(attrgetter("id"), nodes), lines, map(attrgetter("kind"), nodes),
                    clusters, strict=False))  # repeat() never ends


def _leaf_grads(boxes: list[Box], nodes: Sequence[Node], tensors: dict[str, TensorInfo]
                ) -> list[Box]:
    """A named leaf's box with its total .grad as the run left it (".grad 1.6": the sum of
    what its arrows brought, over every pass), where the trace has one."""
    totals = {n.id: f".grad {grad_text(t.grad)}" for n in nodes
              if n.kind == LEAF and n.tensor
              and (t := tensors.get(n.tensor)) is not None and t.grad is not None}
    if not totals:
        return boxes
    return [(box_id, (*lines, totals[box_id]), kind, cluster) if box_id in totals
            else (box_id, lines, kind, cluster) for box_id, lines, kind, cluster in boxes]


def _arrows(edges: Sequence[Edge], several_inputs: set[str]) -> list[Arrow]:
    """An arrow per edge, labelled "input 1" (the consumer's slot it feeds) where its
    consumer has several inputs.

    Zipped from the edges' fields: a big graph has 100,000s of edges.
    """
    dsts = list(map(attrgetter("dst"), edges))
    labels: list[str | None] = [None] * len(dsts)
    for i in compress(range(len(dsts)), map(several_inputs.__contains__, dsts)):
        labels[i] = f"input {edges[i].dst_input}"
    return list(zip(map(attrgetter("src"), edges), dsts, labels, strict=True))


class _Everything:
    """`x in kept` when every node is drawn."""

    def __contains__(self, item: object) -> bool:
        return True


def nested(drawing: Drawing) -> list[tuple[str, Any]]:
    """The boxes in drawing order, with clusters nested by module path.

    Events: ("boxes", [Box, …]), ("open", path), ("close", path). Boxes outside any cluster
    come first; a cluster "model.layers.0" sits inside "model.layers", inside "model".
    """
    if not any(cluster for _, _, _, cluster in drawing.boxes):  # no box is in a cluster
        return [("boxes", drawing.boxes)]
    members: dict[str | None, list[Box]] = {}
    children: dict[str | None, list[str]] = {}
    known: set[str] = set()
    for box in drawing.boxes:
        path = box[3]
        members.setdefault(path, []).append(box)
        while path is not None and path not in known:  # register it and its parents
            known.add(path)
            parent = path.rsplit(".", 1)[0] if "." in path else None
            children.setdefault(parent, []).append(path)
            path = parent
    events: list[tuple[str, Any]] = []
    todo: list[tuple[str, Any]] = [("cluster", None)]
    while todo:  # depth first, without recursion
        what, item = todo.pop()
        if what != "cluster":
            events.append((what, item))
            continue
        if item is not None:
            events.append(("open", item))
        if item in members:
            events.append(("boxes", members[item]))
        if item is not None:
            todo.append(("close", item))
        todo.extend(("cluster", child) for child in reversed(children.get(item, ())))
    return events


def focus_node(trace: Trace, focus: str) -> str:
    """The node id that --focus names: a node id ("n12") or a named tensor."""
    if any(n.id == focus for n in trace.nodes):
        return focus
    for t in trace.tensors:
        if t.name == focus and t.node is not None:
            return t.node
    raise GradtraceError(
        f"--focus {focus!r} is neither a node id nor a named tensor in the graph",
        "node ids are n0, n1, … (see `gradtrace show`); tensors: "
        + ", ".join(t.name for t in trace.tensors if t.node is not None),
    )


def _neighbourhood(trace: Trace, center: str, radius: int) -> list[str]:
    near: dict[str, list[str]] = defaultdict(list)
    for e in trace.edges:
        near[e.src].append(e.dst)
        near[e.dst].append(e.src)
    seen = {center: 0}
    queue = deque([center])
    while queue:
        node = queue.popleft()
        if seen[node] == radius:
            continue
        for other in near[node]:
            if other not in seen:
                seen[other] = seen[node] + 1
                queue.append(other)
    return [n.id for n in trace.nodes if n.id in seen]  # in id order, for stable output


def _lines(node: Node, tensors: dict[str, TensorInfo], saved: bool,
           source_lines: bool) -> tuple[str, ...]:
    if node.kind == LEAF:
        t = tensors.get(node.tensor) if node.tensor else None
        lines = [node.tensor or "AccumulateGrad"]
        if t is not None:
            lines.append(shape_text(t.dtype, t.shape))
    else:
        lines = [node.type]
        if node.tensor:  # each output's tensor where they are named apart: (a, b)
            lines.append(f"({node_names(node)})")
        if node.kind == CUSTOM:
            lines.append(custom_kind_label(node.type))
        if node.recomputed:
            lines.append("checkpointed: recomputed in backward")
        if source_lines and node.source is not None:
            lines.append(f"line {node.source.line}")
    if saved:
        for s in node.saved:
            status = shape_text(s.dtype, s.shape) + f" {s.bytes} B" if s.status == "ok" \
                else s.status
            lines.append(f"saved {s.name}: {status}")
    return tuple(lines)


def _cluster(node: Node, depth: int | None) -> str | None:
    parts = (node.module or "").split(".")
    if depth is not None:
        parts = parts[:depth]
    return ".".join(parts) if parts else None


def _fold(trace: Trace, keep: list[str], edges: Sequence[Edge]) -> dict[str, tuple[str, tuple]]:
    """Parallel identical branches into one node, then runs of a repeated op or short op
    pattern along a linear chain, each folded into one box.

    Returns node id -> (id of the box drawn for its run, the box's lines).
    """
    consumers: dict[str, list[Edge]] = defaultdict(list)
    inputs: dict[str, list[Edge]] = defaultdict(list)
    for e in edges:
        consumers[e.src].append(e)
        inputs[e.dst].append(e)
    outputs = set(trace.outputs)
    types = {n.id: n.type for n in trace.nodes}
    # a named tensor's node is always drawn (a model's parameters side by side stay apart)
    shown = outputs | {n.id for n in trace.nodes if n.tensor is not None}
    folded = _fold_fans(keep, consumers, inputs, shown, types)

    def linear(node_id: str) -> bool:
        return (len(inputs[node_id]) == 1 and len(consumers[node_id]) == 1
                and node_id not in outputs and node_id not in folded)

    for start in keep:
        if not linear(start):
            continue
        before = inputs[start][0].src
        if linear(before) and consumers[before][0].dst == start:
            continue  # not the first of its chain
        chain = [start]
        while True:  # follow consumers: iterative, one pass per chain
            nxt = consumers[chain[-1]][0].dst
            if not linear(nxt) or inputs[nxt][0].src != chain[-1]:
                break
            chain.append(nxt)
        _fold_chain(chain, [types[c] for c in chain], folded)
    return folded


def _fold_fans(keep: list[str], consumers: dict[str, list[Edge]],
               inputs: dict[str, list[Edge]], shown: set[str],
               types: dict[str, str]) -> dict[str, tuple[str, tuple]]:
    """Branches of the same op types that feed one node side by side (a stack of 10,000
    leaves, each through mul → sin → exp), folded into one box: ×10000 (AccumulateGrad →
    MulBackward0 → …). A branch goes up from an input of a node with several, through nodes
    with one consumer each and no tensor name (shown); each node is on at most one branch,
    so this is linear."""
    groups: dict[tuple[Any, ...], list[list[str]]] = defaultdict(list)
    for node_id in keep:
        if len(consumers[node_id]) != 1 or node_id in shown:
            continue
        consumer = consumers[node_id][0].dst
        if len(inputs[consumer]) < FOLD_MIN_REPEATS:
            continue
        branch = [node_id]
        while len(inputs[branch[-1]]) == 1:
            nxt = inputs[branch[-1]][0].src
            if len(consumers[nxt]) != 1 or nxt in shown:
                break
            branch.append(nxt)
        far = tuple(e.src for e in inputs[branch[-1]])  # what the branches share, if any
        groups[consumer, tuple(types[b] for b in branch), far].append(branch)
    folded: dict[str, tuple[str, tuple]] = {}
    for (_, kinds, _), branches in groups.items():
        if len(branches) < FOLD_MIN_REPEATS:
            continue
        names = list(reversed(kinds))  # from the far end, the way the arrows go
        if len(names) > 4:
            names = [*names[:2], "…", names[-1]]
        lines = (f"×{len(branches)} ({' → '.join(names)})", "identical branches side by side")
        for branch in branches:
            for node_id in branch:
                folded[node_id] = (branches[0][0], lines)
    return folded


def _merged(arrows: list[Arrow]) -> list[Arrow]:
    """One arrow per (from, to) pair: the branches of a folded fan arrive as one, "×N"."""
    count: dict[tuple[str, str], int] = defaultdict(int)
    for src, dst, _ in arrows:
        count[src, dst] += 1
    if len(count) == len(arrows):
        return arrows  # the common case: no fan was folded
    first: dict[tuple[str, str], Arrow] = {}
    for src, dst, label in arrows:
        n = count[src, dst]
        first.setdefault((src, dst), (src, dst, label if n == 1 else f"×{n}"))
    return list(first.values())


def _fold_chain(chain: list[str], kinds: list[str], folded: dict) -> None:
    i = 0
    while i < len(chain):
        best_period, best_repeats = 0, 0
        for period in range(1, FOLD_MAX_PERIOD + 1):
            pattern = kinds[i: i + period]
            if len(pattern) < period:
                break
            repeats = 1
            while kinds[i + repeats * period: i + (repeats + 1) * period] == pattern:
                repeats += 1
            if repeats >= FOLD_MIN_REPEATS and repeats * period > best_repeats * best_period:
                best_period, best_repeats = period, repeats
        if not best_period:
            i += 1
            continue
        run = chain[i: i + best_period * best_repeats]
        pattern = kinds[i: i + best_period]
        name = pattern[0] if best_period == 1 else "(" + " → ".join(pattern) + ")"
        lines = (f"{name} ×{best_repeats}", f"{run[0]} … {run[-1]}")
        for node_id in run:
            folded[node_id] = (run[0], lines)
        i += len(run)
