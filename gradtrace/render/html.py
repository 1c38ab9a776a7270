"""The interactive page: the Graphviz SVG inlined, each box's details as JSON keyed by its
SVG id, and a small script of our own for pan, zoom, search, a details panel, folded boxes
and module clusters. One self-contained file: nothing is fetched."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from ..model.records import Node, Trace
from ..model.texts import (
    duration_text,
    grad_text,
    node_names,
    received_text,
    shape_text,
    size_text,
)
from ..model.values import json_float
from .dot import render, to_dot
from .drawing import Drawing, DrawOptions, drawing
from .escape import visible
from .json import json_text
from .report import by_severity
from .series import (
    bucket_bounds,
    bucketed,
    first_non_finite,
    grad_series,
    loss_series,
    mean,
)
from .steps import MIN_PASSES

MEMBERS_LISTED = 200  # a folded box lists its first nodes; the count says how many in all
STEPS_POINTS = 300  # the steps panel's points per line at most: a long run's buckets
_PROLOG = re.compile(r"\A.*?(?=<svg)", re.DOTALL)  # the XML declaration, DOCTYPE, comments


def to_html(trace: Trace, options: DrawOptions, rankdir: str) -> bytes:
    """The page for trace, drawn as options say."""
    picture = drawing(trace, options)
    svg = render(to_dot(picture, rankdir, ids=True), "svg").decode("utf-8")
    data = page_data(trace, picture)
    folder = resources.files(__package__)
    page = (folder / "page.html").read_text(encoding="utf-8")
    parts = {
        "STYLE": (folder / "page.css").read_text(encoding="utf-8"),
        "SCRIPT": (folder / "page.js").read_text(encoding="utf-8"),
        "DATA": script_json(data),
        "SVG": _PROLOG.sub("", svg, count=1),
        "TITLE": _html_text(f"gradtrace: {trace.scenario or 'trace'}"),
    }
    # one pass over the template: a value is never searched for another placeholder
    return re.sub(r"<!--gradtrace:(\w+)-->", lambda m: parts[m[1]], page).encode("utf-8")


def script_json(data: Any) -> str:
    """JSON safe inside <script>: no "<", ">" or "&" that could end or open a tag."""
    text = json_text(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _html_text(text: str) -> str:
    return visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def page_data(trace: Trace, picture: Drawing) -> dict[str, Any]:
    """What the script reads: each drawn box by its SVG id (its kind, label, module cluster
    and the nodes it stands for), and the passes to choose from."""
    nodes = {n.id: n for n in trace.nodes}
    shapes = {t.name: shape_text(t.dtype, t.shape) for t in trace.tensors}
    boxes = {}
    for box_id, lines, kind, cluster in picture.boxes:
        members = picture.members.get(box_id) or ([box_id] if box_id in nodes else [])
        boxes[box_id] = {
            "kind": kind, "label": list(lines), "cluster": cluster, "count": len(members),
            "nodes": [_node_data(nodes[m], trace, shapes) for m in members[:MEMBERS_LISTED]],
            "mark": None if box_id not in picture.marks else
            {"level": picture.marks[box_id].level, "note": picture.marks[box_id].note},
        }
    passes = [f"pass {i}: {p.kind}" + (f" at line {p.line} {p.code}" if p.line else "")
              + ("" if p.by == "scenario" else " (by gradtrace)")
              for i, p in enumerate(trace.passes, 1)]
    return {"boxes": boxes, "passes": passes, "scenario": trace.scenario,
            "steps": steps_data(trace), "findings": findings_data(trace, picture)}


def findings_data(trace: Trace, picture: Drawing) -> list[dict[str, Any]]:
    """The findings panel's rows, most severe first: each with the box drawn for the node
    or tensor it names (None: it names none, or that node is not drawn)."""
    drawn = {box_id for box_id, _, _, _ in picture.boxes}
    box_of = {node_id: box_id for box_id, members in picture.members.items()
              for node_id in members}
    node_of = {t.name: t.node for t in trace.tensors if t.node is not None}
    rows = []
    for f in by_severity(trace.findings):
        node = f.node or (node_of.get(f.tensor) if f.tensor else None)
        box = None if node is None else box_of.get(node, node)
        rows.append({"code": f.code, "severity": f.severity, "message": f.message,
                     "hint": f.hint, "box": box if box in drawn else None,
                     "where": None if f.line is None else
                     f"{(f.file or '').rsplit('/', 1)[-1]}:{f.line}"})
    return rows


def steps_data(trace: Trace) -> dict[str, Any] | None:
    """The steps panel's lines: each module's gradient norm (a leaf outside any module stands
    for itself) and the loss, in at most STEPS_POINTS buckets (a norm's largest, the loss's
    mean) centred on their passes; None for fewer than MIN_PASSES passes."""
    steps = trace.steps
    if steps is None or len(steps.grads) < MIN_PASSES:
        return None
    passes = len(steps.grads)
    loss = loss_series(steps)
    return {
        "passes": passes,
        "optimizer_steps": steps.optimizer_steps_taken,
        "x": [(start + end - 1) / 2 + 1 for start, end in bucket_bounds(passes, STEPS_POINTS)],
        "loss": None if loss is None else
        [json_float(x) for x in bucketed(loss.values, STEPS_POINTS, mean)],
        "series": [{"name": s.name, "leaves": list(s.leaves), "first_bad": first_non_finite(s),
                    "values": [json_float(x) for x in bucketed(s.values, STEPS_POINTS)]}
                   for s in grad_series(steps, by_module=True)],
    }


def _node_data(n: Node, trace: Trace, shapes: dict[str, str]) -> dict[str, Any]:
    grads = []
    for p in trace.passes:
        f = p.flow.get(n.id)
        grads.append(None if f is None else [received_text(f.grad_outputs),
                                             [grad_text(g) for g in f.grad_inputs]])
    return {
        # a node with several named outputs shows each ("a, b"), and no one output's shape
        "id": n.id, "type": n.type, "kind": n.kind, "tensor": node_names(n),
        "shape": shapes.get(n.tensor) if n.tensor and not n.output_tensors else None,
        "module": n.module,
        "source": None if n.source is None else
        {"file": n.source.file, "line": n.source.line, "code": n.source.code},
        "library": None if n.library is None else
        {"file": n.library.file, "line": n.library.line, "code": n.library.code},
        "saved": [[s.name, shape_text(s.dtype, s.shape) if s.status == "ok" else s.status,
                   size_text(s.bytes) if s.status == "ok" else ""] for s in n.saved],
        "grads": grads,
        "cost": _cost_text(n, trace),
    }


def _cost_text(n: Node, trace: Trace) -> str | None:
    """ "412 µs ± 30 µs, 16.0 KB allocated, 8.0 KB freed" (--profile), else None."""
    cost = None if trace.costs is None else trace.costs.nodes.get(n.id)
    if cost is None:
        return None
    return (f"{duration_text(cost.time_us)} ± {duration_text(cost.spread_us)}, "
            f"{size_text(cost.allocated)} allocated, {size_text(cost.freed)} freed")

