"""Mermaid flowchart text of a Drawing: GitHub renders it in Markdown, no Graphviz needed."""

from __future__ import annotations

from ..gcpause import gc_paused
from .drawing import Drawing, nested
from .escape import visible
from .heat import SCALE, Heat
from .palette import CUT_STROKE, MARK_LOOKS, PALETTE, Look

_BORDER = {"bold": ",stroke-width:2px", "dashed": ",stroke-dasharray:4 2", None: ""}


def _class_style(look: Look) -> str:
    return f"fill:{look.fill},stroke:{look.stroke}{_BORDER[look.border]}"


CLASS_STYLE = {kind: _class_style(look) for kind, look in PALETTE.items()}
DIRECTION = {"TB": "TB", "BT": "BT", "LR": "LR", "RL": "RL"}


def text(label: str) -> str:
    """A Mermaid quoted label: quotes, angle brackets, braces and pipes as entities."""
    label = visible(label)
    for raw, entity in (("&", "#amp;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"),
                        ("{", "#123;"), ("}", "#125;"), ("|", "#124;"), ("`", "#96;")):
        label = label.replace(raw, entity)
    lines = label.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return '"' + "<br/>".join(lines) + '"'


@gc_paused
def to_mermaid(drawing: Drawing, rankdir: str = "TB") -> str:
    """Mermaid text; the same drawing gives the same bytes."""
    out = [f"flowchart {DIRECTION.get(rankdir, 'TB')}"]
    depth, opened = 1, 0
    for what, item in nested(drawing):
        indent = "  " * depth
        if what == "boxes":
            out.extend(f"{indent}{box_id}[{text(chr(10).join(lines))}]:::{kind}"
                       for box_id, lines, kind, _ in item)
        elif what == "open":
            opened += 1
            out.append(f"{indent}subgraph cluster{opened}[{text(item)}]")
            depth += 1
        else:
            depth -= 1
            out.append("  " * depth + "end")
    for src, dst, label in drawing.arrows:
        shown = f"|{text(label)}|" if label else ""
        out.append(f"  {src} -->{shown} {dst}")
    for i, (src, dst, _) in enumerate(drawing.cuts, len(drawing.arrows)):  # dashed, red
        out.append(f"  {src} -.-> {dst}")
        out.append(f"  linkStyle {i} stroke:{CUT_STROKE}")
    out.extend(f"  classDef {kind} {CLASS_STYLE[kind]}" for kind in drawing.kinds())
    if drawing.heat is not None and drawing.heat.boxes:  # after the kinds' fills: it wins
        out.extend(_heat(drawing.heat))
    for level, look in MARK_LOOKS.items():  # a NaN or Inf was born or passed: a red border
        marked = [box_id for box_id, mark in drawing.marks.items() if mark.level == level]
        if marked:
            out.append(f"  classDef nonfinite_{level} stroke:{look.stroke},"
                       f"stroke-width:{look.width:g}px")
            out.append(f"  class {','.join(marked)} nonfinite_{level}")
    out.append("")  # the text ends with a newline
    return "\n".join(out)


def _heat(heat: Heat) -> list[str]:
    """--heat: each costed box in its step's class, and the scale as a legend of boxes."""
    step = {fill: i for i, (fill, _) in enumerate(SCALE)}
    lines = ['  subgraph heat_legend["legend"]']
    lines += [f"    heat_legend{i}[{text(caption)}]:::heat{i}"
              for i, (_, caption) in enumerate(heat.legend)]
    lines.append("  end")
    for i, (fill, font) in enumerate(SCALE):
        lines.append(f"  classDef heat{i} fill:{fill},color:{font}")
        boxes = [box for box, look in heat.boxes.items() if step[look[0]] == i]
        if boxes:
            lines.append(f"  class {','.join(boxes)} heat{i}")
    return lines
