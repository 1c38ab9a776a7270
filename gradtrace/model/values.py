"""Nested lists of numbers: flattening, and the JSON spelling of non-finite floats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def flat_values(values: Any) -> list[Any]:
    """The items of a nested list, in order (iteratively); a non-list is one item."""
    out, todo = [], [values]
    while todo:
        item = todo.pop()
        if isinstance(item, list):
            todo.extend(reversed(item))
        else:
            out.append(item)
    return out


def map_leaves(v: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply fn to every non-list item of a nested list (iteratively), returning a copy."""
    if not isinstance(v, list):
        return fn(v)
    out: list[Any] = []
    todo: list[tuple[list[Any], list[Any]]] = [(v, out)]
    while todo:
        src, dst = todo.pop()
        for item in src:
            if isinstance(item, list):
                child: list[Any] = []
                dst.append(child)
                todo.append((item, child))
            else:
                dst.append(fn(item))
    return out


def json_float(x: float | None) -> float | str | None:
    """x, or "nan", "inf", "-inf" for non-finite x."""
    # JSON has no NaN or Infinity; strict parsers (jq, browsers) reject Python's extension.
    if x is None or x == x and x not in (float("inf"), float("-inf")):
        return x
    return "nan" if x != x else ("inf" if x > 0 else "-inf")


def json_values(v: Any) -> Any:
    """A nested list with non-finite floats spelled as JSON strings."""
    return map_leaves(v, lambda x: json_float(x) if isinstance(x, float) else x)


_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def py_float(x: float | str | None) -> float | None:
    """Inverse of json_float."""
    return _SPECIAL[x] if isinstance(x, str) else x


def py_values(v: Any) -> Any:
    """Inverse of json_values."""
    return map_leaves(v, py_float)
