"""gradtrace's own imports during a run (torch's profiler imports torch._inductor, and with
it cProfile and `profile`) found as if the script's folder did not lead sys.path: python,
which never makes them, never imports the script's `profile.py` for them."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType

_local = threading.local()  # own: how deep this thread is in own_imports(); shadowed: names


class _OwnFirst:
    """A finder before PathFinder: in own_imports() a top-level name the script's folder
    holds is found on the rest of sys.path; the script's own imports are left alone."""

    def __init__(self, folder: str) -> None:
        self.folder = os.path.realpath(folder)

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if path is not None or not getattr(_local, "own", 0):
            return None
        theirs = [p for p in sys.path if _real(p) == self.folder]
        if not theirs or PathFinder.find_spec(name, theirs) is None:
            return None  # nothing of that name in the folder: found as always
        _local.shadowed.append(name)
        return PathFinder.find_spec(name, [p for p in sys.path if p not in theirs])


def _real(entry: str) -> str:
    return os.path.realpath(entry or os.curdir)


@contextlib.contextmanager
def folder_kept_out(folder: str) -> Iterator[None]:
    """While the block runs (the script's, its folder first on sys.path), own_imports()
    finds nothing in folder."""
    finder = _OwnFirst(folder)
    at = next((i for i, f in enumerate(sys.meta_path) if f is PathFinder), len(sys.meta_path))
    sys.meta_path.insert(at, finder)  # type: ignore[arg-type]
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # the script may have put meta_path back
            sys.meta_path.remove(finder)  # type: ignore[arg-type]


@contextlib.contextmanager
def own_imports(own: bool = True) -> Iterator[None]:
    """gradtrace's own imports in this thread while the block runs; own=False: a block of
    the script's inside one (its backward, its hooks), which imports as under python."""
    before = getattr(_local, "own", 0)
    if not own:
        _forget_shadowed()
    elif not before:
        _local.shadowed = []
    _local.own = before + 1 if own else 0
    try:
        yield
    finally:
        _local.own = before
        if own and not before:
            _forget_shadowed()


def _forget_shadowed() -> None:
    """The modules own imports found elsewhere than the script's folder out of sys.modules
    (those that imported them keep them): the script's own import of such a name finds its
    file, as under python."""
    for name in getattr(_local, "shadowed", ()):
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            sys.modules.pop(loaded, None)
    _local.shadowed = []
