"""The autograd graph as rich trees, one per root; a node met again is referred to, not redrawn."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from ..model import CUSTOM, LEAF, Edge, Node, Trace
from .labels import node_title, saved_text, shape_text

KIND_STYLE = {LEAF: "green", CUSTOM: "magenta", "op": "bold"}


def graph_roots(trace: Trace) -> list[tuple[str, str]]:
    """(node id, caption) of each tree: the outputs, then pass roots not reached from them."""
    roots: dict[str, str] = {}
    for node_id, name in zip(trace.outputs, trace.output_names, strict=False):
        roots.setdefault(node_id, f"output {name}")
    for i, p in enumerate(trace.passes, 1):
        for node_id, name in zip(p.roots, p.root_names or [None] * len(p.roots), strict=False):
            roots.setdefault(node_id, f"root of pass {i}" + (f": {name}" if name else ""))
    return list(roots.items())


def graph_tree(
    trace: Trace, max_depth: int = 30, max_nodes: int = 300, saved: bool = False
) -> RenderableType:
    """Trees of the graph from each root, cut at max_depth levels and max_nodes lines."""
    if not trace.nodes:
        return Text("(no autograd graph)", style="dim")
    nodes = {n.id: n for n in trace.nodes}
    inputs: dict[str, list[Edge]] = defaultdict(list)
    for e in trace.edges:
        inputs[e.dst].append(e)
    tensors = {t.name: t for t in trace.tensors}
    expanded: set[str] = set()
    lines = 0
    cut_depth = False
    trees: list[RenderableType] = []
    for root_id, caption in graph_roots(trace):
        if lines >= max_nodes:
            break
        tree = Tree(Text(caption, style="bold cyan"), guide_style="dim")
        # Iterative preorder: the stack holds (parent, edge into the node or None, node, depth).
        stack: list[tuple[Tree, Edge | None, str, int]] = [(tree, None, root_id, 0)]
        while stack and lines < max_nodes:
            parent, edge, node_id, depth = stack.pop()
            node = nodes[node_id]
            lines += 1
            seen = node_id in expanded
            branch = parent.add(_label(node, edge, seen, saved, tensors))
            if seen:
                continue
            expanded.add(node_id)
            children = sorted(inputs.get(node_id, ()), key=lambda e: e.dst_input)
            if children and depth + 1 >= max_depth:
                cut_depth = True
                branch.add(Text(f"… {len(children)} input(s) below --max-depth {max_depth}",
                                style="yellow"))
                continue
            for child in reversed(children):
                stack.append((branch, child, child.src, depth + 1))
        trees.append(tree)
    notes = []
    hidden = len(trace.nodes) - len(expanded)
    if lines >= max_nodes and hidden > 0:
        notes.append(Text(f"… {hidden} more nodes not shown (--max-nodes {max_nodes})",
                          style="yellow"))
    elif cut_depth:
        notes.append(Text(f"… {hidden} more nodes below --max-depth {max_depth}",
                          style="yellow"))
    return Group(*trees, *notes)


def _label(node: Node, edge: Edge | None, seen: bool, saved: bool, tensors: dict) -> Text:
    text = Text()
    if edge is not None:
        text.append(f"[{edge.dst_input}] ", style="dim")
    text.append(node_title(node), style=KIND_STYLE.get(node.kind, ""))
    if edge is not None and edge.src_output:
        text.append(f" output {edge.src_output}", style="dim")
    if node.kind == LEAF and node.tensor in tensors:
        t = tensors[node.tensor]
        text.append("  " + shape_text(t.dtype, t.shape), style="dim")
    if node.kind == CUSTOM:
        text.append("  custom Function", style="magenta")
    text.append(f"  {node.id}", style="dim")
    if seen:
        text.append("  ↑ shown above", style="dim italic")
    elif saved:
        text.append("\n" + saved_text(node.saved), style="dim")
    return text
