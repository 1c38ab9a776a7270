"""A scenario's label, FILE or FILE::FUNC (pytest's node-id style): which part is the file.
A bundled example's label, example:NAME[::FUNC], names its file in gradtrace/examples/."""

from __future__ import annotations

import io
import os
import re
import tokenize
from dataclasses import replace

from .examples import example_file
from .records import Source, Trace

# FILE::FUNC or FILE::Class::method: a .py file, then names, which never hold a dot. A label
# that does not end so is all file, `a::b.py` included (re.S: a file name may hold newlines).
_WITH_FUNCTION = re.compile(r"(.+?\.py)::([^.]+)", re.S)


def line_at(file: str, line: int, home: str | None) -> str:
    """`line 12` in the scenario's own file (home: its label), else `blocks.py:12`."""
    if home is not None and file == label_file(home):
        return f"line {line}"
    return f"{os.path.basename(file)}:{line}"


def lines_text(source: Source, library: Source | None, home: str | None) -> str:
    """Where a node was made: `line 12`, `line 12 → modeling_bert.py:431` (a library's model
    code below the script's line), or led by the library: `modeling_bert.py:431 from line 12`."""
    first = line_at(source.file, source.line, home)
    if library is None:
        return first
    if installed_file(library.file):
        return f"{first} → {line_at(library.file, library.line, home)}"
    return f"{first} from {line_at(library.file, library.line, home)}"


def installed_file(file: str) -> bool:
    """Whether file is an installed package's (in site-packages or dist-packages)."""
    return any(part in ("site-packages", "dist-packages") for part in re.split(r"[\\/]", file))


def led_by_library(trace: Trace) -> Trace:
    """trace with each node made in a library's model code led by that library's line (its
    source), the script's line after it (its library field)."""
    if not any(n.library for n in trace.nodes):
        return trace
    return replace(trace, nodes=tuple(n._replace(source=n.library, library=n.source)
                                      if n.library is not None else n for n in trace.nodes))


def label_file(label: str) -> str:
    """FILE of FILE::FUNC; the whole label when no function follows its .py file; the
    example's file of example:NAME[::FUNC]."""
    example = example_file(label)
    if example is not None:
        return example
    match = _WITH_FUNCTION.fullmatch(label)
    return label if match is None else match[1]


def without_comment(code: str) -> str:
    """A line of code without its trailing comment (a `#` in a string stays)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code.strip()
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    return (code if comment is None else code[:comment.start[1]]).strip()


def name_apart(name: str, taken: set[str], line: int | None) -> str:
    """name, or NAME@LINE (then NAME@LINE#2 …) when the trace names another tensor so (a
    name given NAME@LINE already takes #2 …): every name in the trace names one tensor. The
    name given is added to taken."""
    if name in taken:
        base = name if "@" in name else f"{name}@{line if line is not None else '?'}"
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}#{k}"
    taken.add(name)
    return name
