"""The names a scenario gives its tensors and modules: its globals, the locals of its own
functions seen on the stack whenever a pass runs (real code keeps tensors in functions),
and paths through the containers they hold (reach.py)."""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from ...extract.tensors import Named
from ...extract.walk import node_kind
from ...model.labels import name_apart
from ...model.records import LEAF
from .locals_seen import LocalsSeen, TensorBrief
from .reach import container, is_module, is_tensor, reached
from .roots import named_tensors
from .sharded import WeakPairs, fsdp_pairs, holders_now, weak_pairs
from .statements import loop_targets
from .where import absolute

_INSTALLED = tuple({os.path.normcase(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def _installed(path: str) -> bool:
    """Whether path is in Python's installation or an installed package's folder."""
    return path.startswith(_INSTALLED) or "site-packages" in path


# Installed packages whose code is not a model's: torch and what it is built on, gradtrace,
# the test runner. Their lines are never a node's.
_NOT_MODEL_CODE = frozenset({"torch", "functorch", "triton", "numpy", "gradtrace", "_pytest",
                             "pluggy", "typing_extensions"})


def library_file(filename: str) -> bool:
    """Whether filename is an installed package's model code (transformers, timm,
    torchvision…): in site-packages or dist-packages, and not of a package of
    _NOT_MODEL_CODE."""
    parts = os.path.normcase(absolute(filename)).split(os.sep)
    at = next((i for i, part in enumerate(parts) if part in ("site-packages", "dist-packages")),
              None)
    return at is not None and at + 2 < len(parts) \
        and parts[at + 1].removesuffix(".py") not in _NOT_MODEL_CODE


# a name given once, and the object it named (weakly: naming never keeps an object alive)
Given = dict[int, tuple[str, "weakref.ref[Any]"]]


def _nameable(value: Any) -> bool:
    """A tensor or module, or a container that may hold some (a list, a plain object …)."""
    return is_tensor(value) or is_module(value) or container(value)


def _give(given: Given, name: str, value: Any) -> str:
    """The name value was given first (kept while it lives), else name, now given to it."""
    held = given.get(id(value))
    if held is not None and held[1]() is value:
        return held[0]
    try:
        given[id(value)] = (name, weakref.ref(value))
    except TypeError:  # not weakly referable (a weak proxy itself): named, not kept
        pass
    return name


def _alive(given: Given, skip: set[int]) -> list[tuple[str, Any]]:
    """The (name, object) pairs of given whose object lives and is not in skip."""
    out = []
    for key, (name, ref) in given.items():
        value = ref()
        if value is not None and key not in skip:
            out.append((name, value))
    return out


class ScenarioNames:
    """Module globals first (bare names), then function locals seen while passes ran: the
    innermost frame first, `func.var` only when the bare name is taken by another object."""

    def __init__(self, path: str | None, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self._folder = None if path is None else os.path.dirname(absolute(path))
        self._seen = LocalsSeen()  # the latest object under each local name, weakly
        self._owned: dict[str, bool] = {}  # by file name: asked at every pass of a loop
        self._paths: Given = {}  # objects named through containers: each keeps its path
        self._leaves: Given = {}  # leaves named while passes ran: kept after a rebinding
        self._modules: Given = {}  # modules named while passes ran, likewise
        self._named_at: dict[int, int | None] = {}  # id -> the line of the pass that named it
        self._loop_names = loop_targets(path)
        # the leaves the latest full naming found (a light step names no more than these)
        self._leaf_refs: list[tuple[str, weakref.ref[torch.Tensor]]] | None = None
        self._pairs: WeakPairs = {}  # FSDP2's, as the latest full naming found them

    def owns(self, filename: str) -> bool:
        """A file of the scenario's own: in its folder and not an installed package below it
        (a scenario that is itself installed, as gradtrace's examples are, owns its folder)."""
        owned = self._owned.get(filename)
        if owned is None:
            full = os.path.normcase(absolute(filename))
            folder = None if self._folder is None else os.path.normcase(self._folder)
            owned = self._owned[filename] = folder is not None \
                and not filename.startswith("<") and full.startswith(folder + os.sep) \
                and "site-packages" not in full[len(folder):] \
                and (_installed(folder) or not _installed(full))
        return owned

    def look(self, frame: FrameType | None, hold: bool = False) -> None:
        """Name the tensors and modules in the locals of the scenario's frames from frame out
        (hold: held strongly, the frames of an error that ended the run)."""
        scopes = []
        while frame is not None:
            code = frame.f_code
            if self.owns(code.co_filename):
                if code.co_name != "<module>":
                    scopes.append((code.co_name, frame.f_locals))
                elif frame.f_globals is not self.namespace:  # a with-block's module
                    scopes.append((code.co_name, frame.f_globals))
            frame = frame.f_back
        self.add(scopes, hold)

    def add(self, scopes: list[tuple[str, dict[str, Any]]], hold: bool = False) -> None:
        """Name the tensors and modules of (function name, locals) scopes, innermost first."""
        if not scopes:
            return
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
        self._seen.update(snapshot, hold)

    def briefs_of_dead(self) -> dict[str, TensorBrief]:
        """The briefs of the locals with a graph that died since a pass saw them."""
        return self._seen.briefs_of_dead()

    def merged(self) -> dict[str, Any]:
        """Globals, then the locals seen so far under names the globals do not use, then
        the leaves and modules found inside their containers (an object keeps the path it
        was first found by, while it lives: names are stable across passes)."""
        # a module-level loop variable (params[1] under `for p in params`) comes last
        loops = [(n, v) for n, v in self.namespace.items() if n in self._loop_names]
        merged = {n: v for n, v in self.namespace.items() if n not in self._loop_names}
        for name, value in self._seen.alive().items():
            merged.setdefault(name, value)
        roots = [(n, v) for n, v in merged.items() if not n.startswith("__") and _nameable(v)]
        # a method's `self` last: `self.weight` is one name for each layer's own (forward-
        # forward's layers train in a method), `layers[0].weight` one for each
        late = [(n, v) for n, v in roots if n.rpartition(".")[2] == "self"]
        # a loop variable's container (a batch dict) still names what it holds
        roots = [(n, v) for n, v in roots if n.rpartition(".")[2] != "self"] + \
            [(n, v) for n, v in loops if container(v)]
        for path, value in reached(roots, late):
            merged.setdefault(_give(self._paths, path, value), value)
        for name, value in late:  # named by a path from the code's own names too
            if any(v is value and n != name for n, v in merged.items()):
                del merged[name]
        held = {id(v) for v in merged.values()}
        for name, value in loops:  # it names what no other name or path reaches
            if id(value) not in held:
                merged.setdefault(name, value)
        return merged

    def for_pass(self, nodes: list[Any], light: bool, line: int | None) -> tuple[Named, bool]:
        """The tensors a pass names, and whether they are leaves alone: for a light step,
        the leaves the latest full naming found, when they live and every leaf the pass
        reaches is one of them; else every name (remembered, as the pass at line gave it)."""
        named = self._latest_leaves(nodes) if light else None
        if named is not None:
            return named, True
        merged = self.merged()
        pairs = fsdp_pairs(merged.items())
        named = named_tensors(merged, pairs)
        self._pairs = weak_pairs(pairs)
        self.remember(named, merged, line)
        self._leaf_refs = [(n, weakref.ref(t)) for n, t in named
                           if t.is_leaf and t.requires_grad]
        return named, False

    def swapped(self, named: Named, light: bool) -> dict[str, Any]:
        """The names of named that name another tensor as a pass ends (a parameter a hook
        swapped while it ran; the other of FSDP2's two, which holds the .grad now), and what
        they name; a light step's looks at FSDP2's pairs alone."""
        if not light:
            now = dict(named_tensors(self.merged()))
            return {name: now[name] for name, t in named if now.get(name, t) is not t}
        return holders_now(named, self._pairs) if self._pairs else {}

    def _latest_leaves(self, nodes: list[Any]) -> Named | None:
        if self._leaf_refs is None:
            return None
        named = [(name, ref()) for name, ref in self._leaf_refs]
        known = {id(t) for _, t in named if t is not None}
        if len(known) != len(named):
            return None  # one died: a model built anew
        for node in nodes:
            if node_kind(node) == LEAF and id(node.variable) not in known \
                    and id(node.variable) not in self._pairs:
                return None
        return named  # type: ignore[return-value]  # each one lives: checked above

    def name_of(self, value: Any) -> str | None:
        """The name a global or a local seen gives value (a quick look for one object: a
        loop's light step names its root so)."""
        for names in (self.namespace, self._seen.alive()):
            for name, held in names.items():
                if held is value and not name.startswith("__") \
                        and name not in self._loop_names:
                    return name
        return None

    def remember(self, named: Named, merged: dict[str, Any], line: int | None) -> None:
        """Note the names a pass (at line) gave its leaves and modules: a name the code binds
        again later still names, in that pass's graph, what it named then."""
        for name, t in named:
            if t.is_leaf and t.requires_grad:
                self._note(self._leaves, name, t, line)
        for name, value in merged.items():
            if is_module(value) and not name.startswith("__"):
                held = self._modules.get(id(value))
                if held is None or held[1]() is not value:  # its parts too, once
                    for sub, module in value.named_modules():
                        _give(self._modules, f"{name}.{sub}" if sub else name, module)

    def _note(self, given: Given, name: str, value: Any, line: int | None) -> None:
        """_give(), noting the line of the pass that first named value."""
        held = given.get(id(value))
        if held is None or held[1]() is not value:
            self._named_at[id(value)] = line
        _give(given, name, value)

    def earlier(self, named: Named, merged: dict[str, Any]) -> tuple[Named, list[tuple[str, Any]]]:
        """The leaves and modules named while passes ran that named and merged no longer
        name (their names were bound again), while they live, under the names they had; a
        leaf's as NAME@LINE (the line of the pass that named it) where NAME now names another
        tensor. (A module keeps its path: it labels nodes, and names no row.)"""
        return (self._apart(_alive(self._leaves, {id(t) for _, t in named}),
                            {n for n, _ in named}),
                _alive(self._modules, {id(v) for v in merged.values()}))

    def _apart(self, pairs: list[tuple[str, Any]], taken: set[str]) -> list[tuple[str, Any]]:
        """pairs, each name that is taken (or given to one before it) made NAME@LINE, then
        NAME@LINE#2 …: every name in the trace names one object."""
        return [(name_apart(name, taken, self._named_at.get(id(value))), value)
                for name, value in pairs]

    def narrow(self, keep: Callable[[str, Any], bool]) -> None:
        """Forget the names whose (name, object) keep rejects."""
        for name in [n for n, v in self.namespace.items() if not keep(n, v)]:
            del self.namespace[name]
        for name, value in self._seen.alive().items():
            if not keep(name, value):
                self._seen.forget(name)

    def clear(self, namespace: bool = True) -> None:
        """Drop every reference (the scenario's objects die with their run), the scenario's
        globals too unless namespace is False."""
        self._seen.clear()
        # dunder names stay: torch.compile keeps its own there (__compiled_fn_1,
        # __builtins_dict___0) and deletes them when what they guard dies (a KeyError
        # printed at exit, had they gone)
        if namespace:
            for name in [n for n in self.namespace if not n.startswith("__")]:
                del self.namespace[name]
        for given in (self._paths, self._leaves, self._modules):
            given.clear()
        self._named_at.clear()
        self._leaf_refs = None
