"""The docs' pictures are today's output: the text each draws is what the command that made it
(docs/make_pictures.py) prints now. When a change moves them, run that script and commit.

What is normalised: in the terminal picture, the non-breaking spaces rich writes for spaces and
the spaces that end a line (the picture pads every line to its width); in the graph, nothing —
its words are compared in order, not its layout, which belongs to the Graphviz version."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from helpers import ROOT, module_from, needs_dot

DOCS = ROOT / "docs"
SVG = "{http://www.w3.org/2000/svg}"
AGAIN = "run `.venv/bin/python docs/make_pictures.py` and commit the pictures"


def make_pictures() -> ModuleType:
    return module_from(DOCS / "make_pictures.py")


def terminal_lines(path: Path) -> tuple[str, list[str]]:
    """The title and the lines of text of a terminal picture rich saved: each <text> piece
    put at its column (x over the width of a cell; rich draws no piece for plain spaces)."""
    root = ET.parse(path).getroot()
    rows: dict[float, list[tuple[int, str]]] = defaultdict(list)
    title = ""
    pieces = [t for t in root.iter(f"{SVG}text") if "title" not in (t.get("class") or "")]
    sized = next(t for t in pieces if t.get("textLength") and t.text)
    cell = float(sized.get("textLength", 1)) / len(sized.text or " ")
    for text in root.iter(f"{SVG}text"):
        if text not in pieces:
            title = text.text or ""
            continue
        rows[float(text.get("y", 0))].append((round(float(text.get("x", 0)) / cell),
                                               text.text or ""))
    lines = []
    for _, row in sorted(rows.items()):
        line = ""
        for column, words in sorted(row):
            line = line.ljust(column) + words
        lines.append(line.replace("\xa0", " ").rstrip())
    return title.replace("\xa0", " "), lines


def test_the_terminal_picture_is_what_show_prints_now() -> None:
    pictures = make_pictures()
    title, drawn = terminal_lines(DOCS / "show.svg")
    assert title == f"gradtrace show {pictures.SHOW}", AGAIN
    printed = pictures.show_console().export_text(clear=False).splitlines()
    assert drawn == [line.rstrip() for line in printed], AGAIN
    assert any("grad in 1.6" in line for line in drawn)  # the picture's point: two paths add up


def graph_words(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    return [re.sub(r"\s+", " ", t.text or "").strip() for t in root.iter(f"{SVG}text")]


@needs_dot
def test_the_graph_picture_is_what_dot_draws_now(tmp_path: Path) -> None:
    pictures = make_pictures()
    pictures.draw_graph(tmp_path / "graph.svg")
    assert graph_words(DOCS / "graph.svg") == graph_words(tmp_path / "graph.svg"), AGAIN
    assert "model.0.weight" in " ".join(graph_words(DOCS / "graph.svg"))


def test_the_readme_shows_the_terminal_picture() -> None:
    assert "![gradtrace show in a terminal](docs/show.svg)" in \
        (ROOT / "README.md").read_text(encoding="utf-8")
