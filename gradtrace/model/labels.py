"""A scenario's label, FILE or FILE::FUNC (pytest's node-id style): which part is the file.
A bundled example's label, example:NAME[::FUNC], names its file in gradtrace/examples/."""

from __future__ import annotations

import os
import re

from .examples import example_file

# FILE::FUNC or FILE::Class::method: a .py file, then names, which never hold a dot. A label
# that does not end so is all file, `a::b.py` included (re.S: a file name may hold newlines).
_WITH_FUNCTION = re.compile(r"(.+?\.py)::([^.]+)", re.S)


def line_at(file: str, line: int, home: str | None) -> str:
    """`line 12` in the scenario's own file (home: its label), else `blocks.py:12`."""
    if home is not None and file == label_file(home):
        return f"line {line}"
    return f"{os.path.basename(file)}:{line}"


def label_file(label: str) -> str:
    """FILE of FILE::FUNC; the whole label when no function follows its .py file; the
    example's file of example:NAME[::FUNC]."""
    example = example_file(label)
    if example is not None:
        return example
    match = _WITH_FUNCTION.fullmatch(label)
    return label if match is None else match[1]
