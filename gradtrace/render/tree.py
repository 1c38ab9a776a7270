"""The autograd graph as text trees, one per root; a node met again is referred to, not redrawn."""

from __future__ import annotations

from collections import defaultdict

from rich.text import Text

from ..model.gradients import hook_replaced, same_gradient, scalar
from ..model.labels import lines_text
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
from ..model.texts import (
    grad_text,
    node_title,
    number,
    output_title,
    received_text,
    saved_text,
    sent_text,
    shape_text,
)
from .numbers import number_text

KIND_STYLE = {LEAF: "green", CUSTOM: "magenta", "op": "bold"}
# Three-column guides: a 30-deep tree still fits in 100 columns. Lines never get cropped.
BRANCH, LAST, PIPE, SPACE = "├─ ", "└─ ", "│  ", "   "


def graph_roots(trace: Trace) -> list[tuple[str, str, int | None]]:
    """(node id, caption, its own pass number) of each tree: the outputs (no pass of their
    own: the one shown), then the roots of passes not reached from them, each with its pass."""
    roots: dict[str, tuple[str, int | None]] = {}
    for node_id, name in zip(trace.outputs, trace.output_names, strict=False):
        roots.setdefault(node_id, (f"output {name}", None))
    for i, p in enumerate(trace.passes, 1):
        names: tuple[str | None, ...] = p.root_names or (None,) * len(p.roots)
        for node_id, root_name in zip(p.roots, names, strict=False):
            caption = f"root of pass {i}" + (f": {root_name}" if root_name else "")
            roots.setdefault(node_id, (caption, i))
    return [(node_id, caption, i) for node_id, (caption, i) in roots.items()]


def graph_tree(trace: Trace, max_depth: int = 30, max_nodes: int | None = 300,
               saved: bool = False, shown_pass: Pass | None = None, cut: bool = True) -> Text:
    """Trees of the graph from each root, cut at max_depth levels and max_nodes node lines
    (None: all); with cut, each line is cut at the width it is drawn in, with "…".

    With shown_pass, each node shows the gradient it received in that pass, and each edge what
    was sent along it (for scalars also the local derivative: sent / received).
    """
    out = Text(no_wrap=True, overflow="ellipsis" if cut else "ignore")
    if max_nodes is None:
        max_nodes = len(trace.nodes) + len(trace.edges)  # a line is a root or an edge
    if not trace.nodes:
        out.append("(no autograd graph)", style="dim")
        return out
    nodes = {n.id: n for n in trace.nodes}
    inputs: dict[str, list[Edge]] = defaultdict(list)
    for e in trace.edges:
        inputs[e.dst].append(e)
    tensors = {t.name: t for t in trace.tensors}
    fan_in: dict[tuple[str, int], int] = defaultdict(int)
    for e in trace.edges:
        fan_in[(e.src, e.src_output)] += 1
    expanded: set[str] = set()
    lines = 0
    cut_depth = False
    for root_id, caption, pass_number in graph_roots(trace):
        if lines >= max_nodes:
            break
        # an earlier pass's graph shows that pass's gradients, not the shown pass's
        own = None if pass_number is None else trace.passes[pass_number - 1]
        root_pass = own if shown_pass is not None and own is not None else shown_pass
        out.append(caption, style="bold cyan")
        if root_pass is not shown_pass:
            out.append(f"  ·  gradients of pass {pass_number}", style="dim")
        out.append("\n")
        # Iterative preorder; each entry: (guide before it, connector, edge in, node, depth).
        stack: list[tuple[str, str, Edge | None, str, int]] = [("", "", None, root_id, 0)]
        while stack and lines < max_nodes:
            guide, connector, edge, node_id, depth = stack.pop()
            node = nodes[node_id]
            lines += 1
            seen = node_id in expanded
            out.append(guide + connector, style="dim")
            out.append_text(_label(node, edge, seen, tensors, trace.scenario))
            if root_pass is not None:
                single = edge is None or fan_in[(edge.src, edge.src_output)] == 1
                out.append_text(_flow_label(root_pass, node_id, edge, seen, single))
            out.append("\n")
            if seen:
                continue
            expanded.add(node_id)
            below = guide + {"": "", LAST: SPACE, BRANCH: PIPE}[connector]
            children = sorted(inputs.get(node_id, ()), key=lambda e: e.dst_input)
            if node.hooks:
                out.append(below + (PIPE if children else SPACE), style="dim")
                out.append_text(hook_label(root_pass, node))
                out.append("\n")
            if saved:
                out.append(below + (PIPE if children else SPACE) + saved_text(node.saved)
                           + (" (recomputed in backward)" if node.recomputed else "") + "\n",
                           style="dim")
            if children and depth + 1 >= max_depth:
                cut_depth = True
                out.append(below + LAST, style="dim")
                out.append(f"… {len(children)} input(s) below --max-depth {max_depth}\n",
                           style="yellow")
                continue
            for i, child in enumerate(reversed(children)):
                stack.append((below, LAST if i == 0 else BRANCH, child, child.src, depth + 1))
    hidden = len(trace.nodes) - len(expanded)
    if lines >= max_nodes and hidden > 0:
        out.append(f"… {hidden:,} more nodes not shown (--max-nodes N, or --all)\n",
                   style="yellow")
    elif cut_depth:
        out.append(f"… {hidden:,} more nodes below --max-depth {max_depth}\n", style="yellow")
    out.rstrip()
    return out


def _flow_label(pass_: Pass, node_id: str, edge: Edge | None, seen: bool,
                single: bool) -> Text:
    """ "  grad in 0.6 = 0.008 × 75": what arrived in pass_, and how the chain rule made it."""
    text = Text()
    mine = pass_.flow.get(node_id)
    parent = pass_.flow.get(edge.dst) if edge is not None else None
    if mine is None and parent is None:
        return Text("  (no gradient in this pass)", style="dim")
    if mine is not None and not seen:
        text.append("  grad in ", style="dim")
        text.append_text(number_text(received_text(mine.grad_outputs), "bold yellow"))
    if edge is None or parent is None:
        return text
    sent, received = pass_.sent(edge), pass_.received(edge)
    came = parent.grad_outputs[0] if len(parent.grad_outputs) == 1 else None
    local = None
    if scalar(sent) is not None and scalar(came):
        local = scalar(sent) / scalar(came)  # type: ignore[operator]
    product = f" = {number(scalar(came))} × {number(local)}" if local is not None else ""
    if single and not seen and same_gradient(sent, received):
        text.append_text(number_text(product, "dim"))
    elif single and not seen and received is not None:
        text.append_text(number_text(f"  (sent {grad_text(sent)}{product}; a hook changed it)",
                                     "magenta"))
    else:
        text.append_text(number_text(f"  this edge {grad_text(sent)}{product}", "dim"))
    return text


def hook_label(pass_: Pass | None, node: Node) -> Text:
    """ "⚓ module hook relu_hook of model.1 sent on [1, 0] (the node itself sent [1, -1])":
    the module backward hooks on a node, what they sent on in pass_, and what the node itself
    computed when a hook replaced it (a BackwardHookFunctionBackward node computes nothing:
    it passes on what it received)."""
    text = Text("⚓ module hook " + ", ".join(node.hooks), style="magenta")
    mine = None if pass_ is None else pass_.flow.get(node.id)
    if mine is None:
        return text
    own = hook_replaced(node, mine)
    text.append(" sent on " if own is None else " changed what it sends: ", style="magenta")
    text.append(sent_text(mine.grad_inputs), style="bold magenta")
    if own is not None:
        text.append(f" (the node itself sent {sent_text(own)})", style="magenta")
    return text


def _label(node: Node, edge: Edge | None, seen: bool, tensors: dict[str, TensorInfo],
           home: str | None) -> Text:
    text = Text()
    if edge is not None:
        text.append(f"[{edge.dst_input}] ", style="dim")
    # a node met again through one of its several named outputs is named by that output's
    # tensor: `a, b = x.chunk(2)` is "SplitBackward0 (a, b)", then "SplitBackward0 (b) output 1"
    title = output_title(node, edge.src_output) if seen and edge is not None \
        else node_title(node)
    text.append(title, style=KIND_STYLE.get(node.kind, ""))
    if node.module and node.kind != LEAF:  # a leaf's name already says its module
        text.append(f" · {node.module}", style="blue")
    if edge is not None and (edge.src_output or node.output_tensors):
        text.append(f" output {edge.src_output}", style="dim")
    if node.kind == LEAF and node.tensor in tensors:
        t = tensors[node.tensor]
        text.append("  " + shape_text(t.dtype, t.shape), style="dim")
    if node.kind == CUSTOM:
        text.append(f"  {custom_kind_label(node.type)}", style="magenta")
    if node.recomputed:
        text.append("  ↻ checkpointed", style="magenta")
    if node.hooks:
        text.append("  ⚓", style="magenta")
    text.append(f"  {node.id}", style="dim")
    if node.source is not None and not seen:
        text.append(f"  {lines_text(node.source, node.library, home)}", style="dim")
    if seen:
        text.append("  ↑ shown above", style="dim italic")
    return text
