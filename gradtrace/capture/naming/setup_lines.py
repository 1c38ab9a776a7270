"""The script's lines and names the optimizer findings point at: the line that froze
parameters (and whether the code says it means to), the line that set the attribute a
parameter hangs on, and names for parameters kept in plain lists and dicts."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

import torch

from .sharded import submodules

Where = tuple[int | None, str | None]  # a line of the code and its text
_ON_PURPOSE = re.compile(r"freez|frozen|fine.?tun|backbone", re.IGNORECASE)
# ... unless the same words say it is a mistake ("# BUG: frozen, but still in the optimizer")
_A_MISTAKE = re.compile(r"\b(bug|mistakes?|wrong|oops|fixme|todo|accident\w*|forg[eo]t\w*|"
                        r"unintended|by accident)\b", re.IGNORECASE)


def name_head(name: str) -> str:
    """The first part of a dotted or indexed name: model for model.blocks[0].weight."""
    return re.split(r"[.\[]", name, maxsplit=1)[0]


def attribute_line(lines: list[str], names: tuple[str, ...], built: Where) -> Where:
    """The line that set the attribute the first of names hangs on (the list of layers, the
    tensor; the head set again after the optimizer was built at built), if one does."""
    _, _, rest = names[0].partition(".")
    attribute = name_head(rest) if rest else ""
    if not attribute:
        return None, None
    assigned = re.compile(rf"\.{re.escape(attribute)}\s*(:[^=]+)?=[^=]")
    found = [i for i, text in enumerate(lines, 1) if assigned.search(text)]
    later = [i for i in found if built[0] is not None and i > built[0]]
    line = (later or found or [0])[0]
    return (line, lines[line - 1].strip()) if line else (None, None)


def freezing_line(lines: list[str], frozen: tuple[str, ...]) -> Where:
    """The statement that most likely froze them: one that sets requires_grad to False (or
    loads frozen weights: from_pretrained), naming their module if one does; never a line
    of a string or a comment."""
    candidates = sorted(_freezing_statements(lines))
    if not candidates:
        return None, None
    parts = {part for name in frozen for part in name.split(".")[1:-1] if not part.isdigit()}
    best = next((i for i in candidates
                 if any(re.search(rf"\b{re.escape(p)}\b", lines[i - 1]) for p in parts)),
                candidates[0])
    return best, lines[best - 1].strip()


def _freezing_statements(lines: list[str]) -> set[int]:
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_false(node.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                for t in node.targets):
            found.add(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "from_pretrained"
                or node.func.attr == "requires_grad_" and (
                    any(_is_false(a) for a in node.args[:1])
                    or any(k.arg == "requires_grad" and _is_false(k.value)
                           for k in node.keywords))
                or any(k.arg == "freeze" and isinstance(k.value, ast.Constant)
                       and k.value.value is True for k in node.keywords)):
            found.add(node.lineno)
    return found


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def on_purpose(lines: list[str], line: int | None) -> bool:
    """Whether the code says it freezes on purpose: a word for it on the line (beyond
    from_pretrained's default), in a comment on the two lines above, or in the enclosing
    function's name; and none there calls it a mistake."""
    if line is None:
        return False
    above = [text for text in lines[max(0, line - 3):line - 1] if text.lstrip().startswith("#")]
    near = [text.replace("from_pretrained", "") for text in (*above, lines[line - 1])]
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    enclosing = next((text for text in reversed(lines[:line - 1]) if text.strip()
                      and len(text) - len(text.lstrip()) < indent
                      and text.lstrip().startswith("def ")), "") if indent else ""
    return any(_ON_PURPOSE.search(text) for text in (*near, enclosing)) \
        and not any(_A_MISTAKE.search(text) for text in near)


def names_in_containers(objects: Sequence[tuple[str, Any]], wanted: dict[int, Any]) -> list[str]:
    """Names for the wanted parameters found in the plain lists, tuples and dicts a named
    module keeps as attributes (`model.blocks[0].weight`), else their shape and class."""
    found: dict[int, str] = {}  # in the order the modules hold them
    for path, module in submodules(objects):
        for attribute, value in vars(module).items():
            items = value.items() if isinstance(value, dict) else \
                enumerate(value) if isinstance(value, (list, tuple)) else ()
            for key, item in items:
                if isinstance(item, torch.nn.Module):
                    for name, param in item.named_parameters():
                        if id(param) in wanted:
                            found.setdefault(id(param), f"{path}.{attribute}[{key!r}].{name}")
    return [*found.values(), *(f"a {tuple(t.shape)} {type(t).__name__}"
                               for i, t in wanted.items() if i not in found)]
