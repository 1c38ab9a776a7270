"""Regenerate the docs' pictures from the real output, so they never drift from it.

    .venv/bin/python docs/make_pictures.py

docs/show.svg: `gradtrace show example:two_paths_add_up` as a 118-column terminal shows it.
docs/graph.svg: `gradtrace dot example:mlp_modules --grads -o docs/graph.svg`.

tests/test_pictures.py compares the text of both with what these commands print today.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from gradtrace.cli import app
from gradtrace.cli.inputs import load_trace, pick_pass
from gradtrace.render.report import report

DOCS = Path(__file__).resolve().parent
SHOW = "example:two_paths_add_up"
SHOW_WIDTH = 118  # columns of the terminal in the picture
GRAPH = ["dot", "example:mlp_modules", "--grads"]


def show_console() -> Console:
    """A terminal that recorded `gradtrace show SHOW`, in colour."""
    trace = load_trace(SHOW, [], backward=True).trace
    console = Console(record=True, width=SHOW_WIDTH, force_terminal=True,
                      file=open(os.devnull, "w"))  # the console keeps it open
    console.print(report(trace, pick_pass(trace, None)), crop=False)
    return console


def draw_graph(path: Path) -> None:
    """`gradtrace dot GRAPH -o path`."""
    app([*GRAPH, "-o", str(path)], standalone_mode=False)


def main() -> None:
    show_console().save_svg(str(DOCS / "show.svg"), title=f"gradtrace show {SHOW}")
    draw_graph(DOCS / "graph.svg")
    print("wrote docs/show.svg and docs/graph.svg")


if __name__ == "__main__":
    main()
