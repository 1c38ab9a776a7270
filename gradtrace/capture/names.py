"""The names a scenario gives its tensors and modules: its globals, and the locals of its own
functions seen on the stack whenever a pass runs (real code keeps tensors in functions)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

_INSTALLED = tuple({os.path.normcase(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def _nameable(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, torch.nn.Module))


class ScenarioNames:
    """Module globals first (bare names), then function locals seen while passes ran: the
    innermost frame first, `func.var` only when the bare name is taken by another object."""

    def __init__(self, path: str | None, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self._folder = None if path is None else os.path.dirname(os.path.abspath(path))
        self._seen: dict[str, Any] = {}  # the latest object under each name
        self._owned: dict[str, bool] = {}  # by file name: asked at every pass of a loop

    def owns(self, filename: str) -> bool:
        """A file of the scenario's own: in its folder and not an installed package."""
        owned = self._owned.get(filename)
        if owned is None:
            full = os.path.normcase(os.path.abspath(filename))
            owned = self._owned[filename] = self._folder is not None \
                and not filename.startswith("<") and full.startswith(self._folder + os.sep) \
                and not full.startswith(_INSTALLED) and "site-packages" not in full
        return owned

    def look(self, frame: FrameType | None) -> None:
        """Name the tensors and modules in the locals of the scenario's frames from frame out."""
        scopes = []
        while frame is not None:
            code = frame.f_code
            if self.owns(code.co_filename):
                if code.co_name != "<module>":
                    scopes.append((code.co_name, frame.f_locals))
                elif frame.f_globals is not self.namespace:  # a with-block's module
                    scopes.append((code.co_name, frame.f_globals))
            frame = frame.f_back
        self.add(scopes)

    def add(self, scopes: list[tuple[str, dict[str, Any]]]) -> None:
        """Name the tensors and modules of (function name, locals) scopes, innermost first."""
        taken = {name: id(v) for name, v in self.namespace.items()
                 if not name.startswith("__") and _nameable(v)}
        snapshot: dict[str, Any] = {}
        for function, scope in scopes:
            for var, value in list(scope.items()):
                if not _nameable(value) or var.startswith("__"):
                    continue
                name = var
                if taken.get(name, id(value)) != id(value):
                    name = f"{function}.{var}"
                    if taken.get(name, id(value)) != id(value):
                        continue  # the same function twice on the stack: outermost unnamed
                taken[name] = id(value)
                snapshot[name] = value
        self._seen.update(snapshot)

    def merged(self) -> dict[str, Any]:
        """Globals, then the locals seen so far under names the globals do not use."""
        merged = dict(self.namespace)
        for name, value in self._seen.items():
            merged.setdefault(name, value)
        return merged

    def narrow(self, keep: Callable[[str, Any], bool]) -> None:
        """Forget the names whose (name, object) keep rejects."""
        for names in (self.namespace, self._seen):
            for name in [n for n, v in names.items() if not keep(n, v)]:
                del names[name]

    def clear(self) -> None:
        """Drop every reference (the scenario's objects die with their run)."""
        self._seen.clear()
        # dunder names stay: torch.compile keeps its own there (__compiled_fn_1,
        # __builtins_dict___0) and deletes them when what they guard dies (a KeyError
        # printed at exit, had they gone)
        for name in [n for n in self.namespace if not n.startswith("__")]:
            del self.namespace[name]
