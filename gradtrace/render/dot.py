"""Graphviz DOT text of a Drawing, and its rendering by the system's `dot` binary."""

from __future__ import annotations

from collections import defaultdict

from ..errors import ExportError
from ..gcpause import gc_paused
from .drawing import Box, Drawing, nested
from .escape import visible
from .heat import SCALE, Heat
from .marks import Mark
from .palette import CUT_STROKE, MARK_LOOKS, PALETTE, Look

FONT = "Helvetica"


def _style(look: Look) -> str:
    words = ["rounded"] * look.rounded + ["filled"] + ([look.border] if look.border else [])
    color = f', color="{look.stroke}"' if look.border else ""
    return f'shape={look.shape}, style="{",".join(words)}", fillcolor="{look.fill}"{color}'


STYLE = {kind: _style(look) for kind, look in PALETTE.items()}
CUT_ARROW = f'style=dashed, color="{CUT_STROKE}", penwidth=1.5'
# appended to a marked box's attributes: a later attribute wins in Graphviz
MARK_STYLE = {level: f'color="{look.stroke}", penwidth={look.width:g}'
              for level, look in MARK_LOOKS.items()}
# Past this many boxes, Graphviz's spline routing and crossing minimisation dominate (a
# 50-layer diamond with shared weights took minutes): straight edges and bounded layout
# passes draw it in about a second.
BIG = 150
BIG_LAYOUT = "splines=line, nslimit=1, nslimit1=1, mclimit=0.05, remincross=false, "


def _escape(text: str) -> str:
    text = visible(text)  # no control character reaches Graphviz, the SVG or a terminal
    if "\\" in text or '"' in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"')
        text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return text


def quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as \\n escapes."""
    return '"' + _escape(text) + '"'


def _boxes(boxes: list[Box], indent: str, tooltips: dict[str, str],
           marks: dict[str, Mark], heat: Heat | None = None) -> list[str]:
    # kind -> lines -> DOT attributes: big graphs repeat few labels (two small keys hash
    # faster than one (lines, kind) pair)
    attributes: defaultdict[str, dict[tuple[str, ...], str]] = defaultdict(dict)

    def made(box: Box) -> str:
        _, lines, kind, _ = box
        text = attributes[kind][lines] = f"[label={quote(chr(10).join(lines))}, {STYLE[kind]}];"
        return text

    # the hot loop of a big graph: box fields by position
    drawn = [f"{indent}{box[0]} {attributes[box[2]].get(box[1]) or made(box)}" for box in boxes]
    if tooltips:  # hovering a box in an SVG shows the scenario line that made it
        drawn = [text[:-2] + f", tooltip={quote(tip)}];" if (tip := tooltips.get(box[0]))
                 else text for box, text in zip(boxes, drawn, strict=True)]
    if heat is not None and heat.boxes:  # --heat: the fill says the cost (a later one wins)
        drawn = [text[:-2] + f', fillcolor="{look[0]}", fontcolor="{look[1]}"];'
                 if (look := heat.boxes.get(box[0])) else text
                 for box, text in zip(boxes, drawn, strict=True)]
    if marks:  # a NaN or Inf was born or passed here: a red border
        drawn = [text[:-2] + f", {MARK_STYLE[mark.level]}];" if (mark := marks.get(box[0]))
                 else text for box, text in zip(boxes, drawn, strict=True)]
    return drawn


@gc_paused
def to_dot(drawing: Drawing, rankdir: str = "TB", legend: bool = True,
           ids: bool = False) -> str:
    """DOT text; the same drawing gives the same bytes. ids: each box's SVG element takes
    its box id, each arrow's "src->dst", each cluster's "cluster_<module>" (for the page)."""
    big = BIG_LAYOUT if len(drawing.boxes) > BIG else ""
    lines = [
        "digraph gradtrace {",
        f'  graph [{big}rankdir={rankdir}, fontname="{FONT}", fontsize=10, newrank=true];',
        f'  node [fontname="{FONT}", fontsize=10, margin="0.12,0.05"];',
        f'  edge [fontname="{FONT}", fontsize=9, color="#555555"];',
    ]
    if ids:
        lines.append('  node [id="\\N"]; edge [id="\\E"];')
    depth = 1
    for what, item in nested(drawing):
        indent = "  " * depth
        if what == "boxes":
            lines.extend(_boxes(item, indent, drawing.tooltips, drawing.marks, drawing.heat))
        elif what == "open":
            lines.append(f"{indent}subgraph {quote('cluster_' + item)} {{")
            lines.append(f'{indent}  label={quote(item)}; style="rounded,dashed"; '
                         'color="#90a4ae"; fontcolor="#546e7a";'
                         + (f" id={quote('cluster_' + item)};" if ids else ""))
            depth += 1
        else:
            depth -= 1
            lines.append("  " * depth + "}")
    quoted: dict[str, str] = {}  # arrows repeat few labels ("input 0", "input 1"): quote each once

    def label_of(label: str) -> str:
        return quoted.get(label) or quoted.setdefault(label, quote(label))

    lines.extend([f"  {src} -> {dst} [label={label_of(label)}];" if label
                  else f"  {src} -> {dst};" for src, dst, label in drawing.arrows])
    lines.extend(f"  {src} -> {dst} [{CUT_ARROW}];" for src, dst, _ in drawing.cuts)
    if legend and drawing.boxes:
        lines.append('  subgraph cluster_legend {')
        lines.append('    label="legend"; style="rounded"; color="#cfd8dc"; fontsize=9;')
        for kind in drawing.kinds():
            lines.append(f"    legend_{kind} [label={quote(PALETTE[kind].caption)}, "
                         f"{STYLE[kind]}, fontsize=8];")
        if drawing.direction is not None:  # which way the arrows go, and the gradients
            lines.append(f"    legend_arrows [label={quote(drawing.direction)}, "
                         "shape=plaintext, fontsize=8];")
        for level, look in MARK_LOOKS.items():
            if any(mark.level == level for mark in drawing.marks.values()):
                lines.append(f"    legend_{level} [label={quote(look.caption)}, shape=box, "
                             f'style="rounded", {MARK_STYLE[level]}, fontsize=8];')
        if drawing.heat is not None:
            # Graphviz lays a cluster's boxes out right to left: dark first reads light → dark
            for i, (fill, caption) in reversed(list(enumerate(drawing.heat.legend))):
                font = SCALE[i][1]
                lines.append(f"    legend_heat{i} [label={quote(caption)}, shape=box, "
                             f'style="filled", fillcolor="{fill}", fontcolor="{font}", '
                             "fontsize=8];")
        lines.append("  }")
    lines += ("}", "")  # the empty line ends the text with a newline (no copy of it all)
    return "\n".join(lines)


def render(dot_text: str, fmt: str) -> bytes:
    """SVG, PNG or PDF bytes from DOT text, laid out by Graphviz's `dot` program."""
    import graphviz  # type: ignore[import-untyped]  # only pictures need it

    try:
        return graphviz.pipe("dot", fmt, dot_text.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound:
        raise ExportError(
            f"{fmt.upper()} export needs Graphviz's `dot` program, which is not installed",
            "install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
            "graphviz), or export .dot, .mmd or .json, which need nothing more",
        ) from None
    except graphviz.CalledProcessError as exc:
        stderr = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) \
            else str(exc.stderr or "")
        # Debian's Graphviz runs out of its limits on a ~30,000-node PNG (malloc() fails)
        raise ExportError(f"Graphviz failed to render {fmt.upper()}: {stderr.strip()}",
                          "a big graph can be past what Graphviz lays out: draw fewer nodes "
                          "(fold them: no --no-fold; --max-nodes N; --focus NAME), or export "
                          ".dot or .json, which need no layout") from None
