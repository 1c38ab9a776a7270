"""Every private name gradtrace relies on — torch's, CPython's, Typer's — and every torch
error text it recognises, declared once in this package, each with the versions it was
checked on and a fallback.

A probe that an installed release lacks costs the feature it serves, never the run and never a
number: its fallback answers, and `missing()` says, in one line each, what is not shown.
GRADTRACE_WITHOUT (probe names, comma-separated) makes probes answer as missing: the tests force
each fallback with it, and a user can rule out a private API when hunting a bug.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["Missing", "declared", "missing", "probe"]

# torch releases the torch probes were checked on: `python3 dev.py matrix` runs the oldest and
# the newest, the suite runs the middle one
TORCH_CHECKED = "2.11, 2.13, 2.15"


class Missing(NamedTuple):
    """A probe this environment lacks: whose it is, its path, what goes without it."""

    owner: str  # "torch 2.15.0", "Python 3.11.7", "typer 0.12.5"
    path: str
    checked: str  # the releases it was checked on
    without: str


_missing: dict[str, Missing] = {}
_declared: list[str] = []  # every probe's path, in the order probed


def forced_missing() -> frozenset[str]:
    """The probes GRADTRACE_WITHOUT names (each answers as missing)."""
    return frozenset(p.strip() for p in os.environ.get("GRADTRACE_WITHOUT", "").split(",")
                     if p.strip())


def probe(owner: str, path: str, find: Callable[[], Any], without: str,
          checked: str = TORCH_CHECKED) -> Any:
    """What find() returns, or None (noted in missing()) when owner lacks path: find raised
    AttributeError or ImportError, or GRADTRACE_WITHOUT names path."""
    _declared.append(path)
    try:
        if path in forced_missing():
            raise AttributeError(f"GRADTRACE_WITHOUT names {path}")
        return find()
    except (AttributeError, ImportError):
        _missing[path] = Missing(owner, path, checked, without)
        return None


def declared() -> list[str]:
    """The path of every probe made so far (each compat module probes as it is imported)."""
    return list(dict.fromkeys(_declared))


def missing() -> list[str]:
    """One line for each private name this environment lacks, and what goes without it."""
    return [f"{m.owner} has no {m.path} (checked on {m.checked}): {m.without}"
            for m in _missing.values()]
