"""Which nn.Module's forward created each autograd node: for clusters in pictures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from ...compat.torch import (
    compiled_module,
    compiling,
    never_compiled,
    next_sequence_number,
)
from ...extract.walk import made_since
from ..naming.sharded import fsdp_pairs, submodules
from .global_hooks import ModuleCalls


class ModuleTracker:
    """Global forward hooks: a node belongs to the innermost module whose forward made it.

    Autograd numbers nodes in creation order; a node made between a module's forward pre-hook
    and its forward hook, and reachable from its output, was made by that forward. Inner
    modules finish first, so they claim their nodes before the modules around them.

    Inside torch.compile the hooks do nothing where Dynamo traces a forward (no graph break,
    no warning): torch.compile(module) runs its module's hooks outside the compiled code, so
    the compiled region's node (CompiledFunctionBackward) is claimed by that module.
    """

    def __init__(self, calls: ModuleCalls) -> None:
        self.owner: dict[int, tuple[Any, torch.nn.Module]] = {}  # id(node) -> (node, module)
        self._starts: list[int] = []
        calls.subscribe(self._pre, self._post, paused=self._starts.clear)

    def forget(self, nodes: list[Any]) -> None:
        """Let go of nodes (a loop step whose detail is no longer kept)."""
        for node in nodes:
            self.owner.pop(id(node), None)

    @never_compiled
    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        if not compiling():
            self._starts.append(next_sequence_number())

    @never_compiled
    def _post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if compiling():
            return
        start = self._starts.pop() if self._starts else 0
        module = compiled_module(module)  # torch.compile(model)'s nodes are model's
        for node in made_since(output, start):
            self.owner.setdefault(id(node), (node, module))


def module_paths(named: Iterable[tuple[str, Any]],
                 tracker: ModuleTracker | None) -> dict[int, str]:
    """id(node) -> dotted module path, and id(parameter) -> its module's path, for the
    named nn.Modules of a scenario ((name, object) pairs: a module under its first name)."""
    path_of: dict[int, str] = {}
    paths: dict[int, str] = {}
    for path, module in submodules(named):
        path_of[id(module)] = path
        for param in module.parameters(recurse=False):
            paths.setdefault(id(param), path)
    if tracker is not None:
        for key, (_, module) in tracker.owner.items():
            if id(module) in path_of:
                paths[key] = path_of[id(module)]
    return paths


def unsharded_aliases(named: Iterable[tuple[str, Any]]) -> dict[int, int]:
    """id(unsharded parameter) -> id(its sharded parameter), for FSDP2's (fsdp_pairs')."""
    return {key: id(sharded) for key, (sharded, unsharded) in fsdp_pairs(named).items()
            if key == id(unsharded)}


def paths_of_class(named: Iterable[tuple[str, Any]], qualname: str) -> list[str]:
    """The dotted paths of the named nn.Modules' submodules whose class is qualname."""
    return [path for path, module in submodules(named) if type(module).__qualname__ == qualname]
