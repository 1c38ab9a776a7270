"""Every export format in one table: suffixes, how it is made, and what it needs.

The CLI's dispatch, its help text and its error hints all read FORMATS; adding a format is
a renderer module and one row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ExportError
from ..model.records import Trace
from .bounded import MERMAID_BOXES
from .dot import render, to_dot
from .drawing import Drawing, DrawOptions, drawing
from .html import to_html
from .json import to_json
from .mermaid import to_mermaid

# a drawing, layout direction -> the file's bytes
Drawer = Callable[[Drawing, str], bytes]
# the trace, what to draw, layout direction -> the file's bytes
Exporter = Callable[[Trace, DrawOptions, str], bytes]


@dataclass(frozen=True, slots=True)
class ExportFormat:
    """One output format of `gradtrace dot` (and of `gradtrace diff -o`)."""

    name: str
    suffixes: tuple[str, ...]
    description: str
    draw: Drawer | None  # a picture of a Drawing; None: made from the whole trace
    binary: bool = False  # not for a terminal: only written to a file
    graphviz: bool = False  # laid out by Graphviz's `dot` program
    whole: Exporter | None = None  # made from the whole trace (the JSON, the page)
    max_boxes: int | None = None  # the format's own bound, below a picture's

    @property
    def whole_trace(self) -> bool:
        """Whether it holds every recorded fact (saved tensors, gradient flow)."""
        return self.whole is not None

    def export(self, trace: Trace, options: DrawOptions, rankdir: str) -> bytes:
        """The file's bytes for trace."""
        if self.whole is not None:
            return self.whole(trace, options, rankdir)
        assert self.draw is not None  # each row has one or the other
        if self.max_boxes is not None and options.max_boxes is not None:
            options = replace(options, max_boxes=min(options.max_boxes, self.max_boxes))
        return self.draw(drawing(trace, options), rankdir)


def _dot(picture: Drawing, rankdir: str) -> bytes:
    return to_dot(picture, rankdir).encode("utf-8")


def _mermaid(picture: Drawing, rankdir: str) -> bytes:
    return to_mermaid(picture, rankdir).encode("utf-8")


def _json(trace: Trace, options: DrawOptions, rankdir: str) -> bytes:
    return to_json(trace).encode("utf-8")


def _laid_out(fmt: str) -> Drawer:
    def draw(picture: Drawing, rankdir: str) -> bytes:
        return render(to_dot(picture, rankdir), fmt)

    return draw


FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat("dot", (".dot", ".gv"), "Graphviz DOT text", _dot),
    ExportFormat("svg", (".svg",), "SVG picture", _laid_out("svg"), graphviz=True),
    ExportFormat("png", (".png",), "PNG picture", _laid_out("png"), binary=True,
                 graphviz=True),
    ExportFormat("pdf", (".pdf",), "PDF document", _laid_out("pdf"), binary=True,
                 graphviz=True),
    ExportFormat("json", (".json",), "the whole trace as JSON", None, whole=_json),
    ExportFormat("mmd", (".mmd", ".mermaid"), "Mermaid flowchart (GitHub renders it)",
                 _mermaid, max_boxes=MERMAID_BOXES),
    ExportFormat("html", (".html", ".htm"), "interactive page: pan, zoom, search, details",
                 None, graphviz=True, whole=to_html),
)
DEFAULT = FORMATS[0]


def suffix_list() -> str:
    """ ".dot .svg .png .pdf .json .mmd": the main suffix of each format."""
    return " ".join(f.suffixes[0] for f in FORMATS)


def find_format(path: Path | None, name: str | None) -> ExportFormat:
    """The format named (any case, with or without a dot), else the file's suffix's, else DOT."""
    if name is not None:
        wanted = name.lower().lstrip(".")
        for f in FORMATS:
            if f.name == wanted:
                return f
        raise ExportError(f"unknown format {name!r}",
                          "formats: " + ", ".join(sorted(f.name for f in FORMATS)))
    if path is None:
        return DEFAULT
    for f in FORMATS:
        if path.suffix.lower() in f.suffixes:
            return f
    raise ExportError(
        f"cannot tell the format of {path} from its suffix {path.suffix or '(none)'!r}",
        f"use {', '.join(f.suffixes[0] for f in FORMATS)}, or name a format",
    )
