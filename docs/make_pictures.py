"""Regenerate the README's pictures from the real output, so they never drift from it.

    .venv/bin/python docs/make_pictures.py

docs/show.svg: `gradtrace show gradtrace/examples/two_paths_add_up.py` as a terminal shows it.
docs/graph.svg: `gradtrace dot gradtrace/examples/mlp_modules.py --grads -o docs/graph.svg`.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from gradtrace.cli import app
from gradtrace.cli.inputs import load_trace, pick_pass
from gradtrace.render.report import report

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def main() -> None:
    os.chdir(ROOT)  # paths as a user types them
    scenario = "gradtrace/examples/two_paths_add_up.py"
    trace = load_trace(scenario, [], backward=True)
    console = Console(record=True, width=118, force_terminal=True, file=open("/dev/null", "w"))
    console.print(report(trace, pick_pass(trace, None)), crop=False)
    console.save_svg(str(DOCS / "show.svg"), title=f"gradtrace show {scenario}")
    app(["dot", "gradtrace/examples/mlp_modules.py", "--grads", "-o", "docs/graph.svg"],
        standalone_mode=False)
    print("wrote docs/show.svg and docs/graph.svg")


if __name__ == "__main__":
    main()
