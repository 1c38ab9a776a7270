"""`gradtrace examples`: the examples gradtrace ships, by name, or one example's code."""

from __future__ import annotations

import typer

from ..model.examples import FOLDERS, PREFIX, bundled, path_number, resolve
from .core import DEBUG, app
from .output import write_stdout


@app.command(
    epilog="Examples:\n\n"
    "  gradtrace examples                  every example, the learning path first\n\n"
    "  gradtrace examples chain_rule       its code, to read or start from\n\n"
    "  gradtrace show example:chain_rule   run one\n\n"
    "Exit codes: 0 success, 2 no example of that name.",
)
def examples(
    name: str | None = typer.Argument(None, metavar="NAME",
                                      help="Print this example's code (a name the listing "
                                      "shows, e.g. chain_rule or real/gpt_tiny)."),
    debug_flag: bool = DEBUG,  # read by the error boundary
) -> None:
    """List the examples gradtrace ships, each a target as example:NAME, or print one's code."""
    if name is not None:
        write_stdout(resolve(name.removeprefix(PREFIX)).read_text(encoding="utf-8"))
        return
    write_stdout(listing())


def listing() -> str:
    """Every example under its folder's heading: `example:NAME  what it shows`, the learning
    path's examples numbered in teaching order."""
    found = bundled()
    labels = [_label(e.name) for e in found]
    width = max(len(label) for label in labels)
    lines = ["Examples gradtrace ships: run one with `gradtrace show example:NAME`, read its "
             "code with `gradtrace examples NAME`."]
    folder = None
    for example, label in zip(found, labels, strict=True):
        if example.folder != folder:
            folder = example.folder
            about = FOLDERS.get(folder, "")
            lines += ["", f"{folder}/: {about}" if folder else about[:1].upper() + about[1:]]
        lines.append(f"  {label:<{width}}  {example.summary}".rstrip())
    return "\n".join(lines) + "\n"


def _label(name: str) -> str:
    """`example:NAME`, after its number on the learning path (` 4. example:chain_rule`)."""
    number = path_number(name)
    return PREFIX + name if number is None else f"{number:>2}. {PREFIX}{name}"
