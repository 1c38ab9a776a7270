"""Names through containers: the leaves and nn.Modules a scenario keeps only inside lists,
tuples, dicts and attributes of its own plain objects (`params[0]`, `cfg["w"]`,
`agent.critic`), found breadth-first from its named objects, so the shortest path names
each; bounded in depth and in the objects looked at, so naming stays cheap in a loop."""

from __future__ import annotations

import functools
import json
import sys
import types
import weakref
from collections import deque
from collections.abc import Iterator
from itertools import islice
from typing import Any

import torch

MAX_DEPTH = 4  # steps from a named object: `a.b[0]["c"].d` at most
# a list, tuple or dict longer than this is not looked into (a dataset, or hundreds of
# alike leaves that pictures fold into one box, is not a model's parameters); an object's
# attributes are read up to it
MAX_ITEMS = 64
MAX_LOOKS = 2000  # objects looked at in one search

# Objects of these packages are never looked into: their state is not the scenario's
# (an optimizer's param_groups, a DataLoader, numpy, the stdlib's loggers and namespaces).
_FOREIGN = frozenset({*sys.stdlib_module_names, "builtins", "torch", "numpy", "gradtrace",
                      "typer", "click", "rich", "pandas", "scipy", "sklearn", "matplotlib",
                      "PIL", "tqdm", "IPython", "_pytest", "pytest", "pluggy", "functorch"})
_NOT_PLAIN = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
              types.MethodType, functools.partial, torch.Tensor, torch.nn.Module,
              BaseException)


# by class, weakly: a scenario's class holds its module's globals, which die with its run
_PLAIN: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def _plain_type(cls: type) -> bool:
    """Whether instances of cls are plain objects to look into: they have a __dict__ and
    their class is the user's (not the stdlib's, torch's, numpy's …)."""
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = bool(cls.__dictoffset__) and not issubclass(cls, _NOT_PLAIN) \
            and str(getattr(cls, "__module__", "")).partition(".")[0] not in _FOREIGN
    return plain


def _key(key: Any) -> str | None:
    """A dict key as a subscript: ["w"] or [3]; None for keys that do not read well."""
    if isinstance(key, str):
        return f"[{json.dumps(key, ensure_ascii=False)}]"
    if isinstance(key, int):
        return f"[{key}]"
    return None


def _inside(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """The (path, object) pairs one step inside value: items of a list, tuple or dict,
    fields of a named tuple, attributes of a plain object."""
    if isinstance(value, (list, tuple, dict)) and len(value) > MAX_ITEMS:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            sub = _key(key)
            if sub is not None:
                yield path + sub, item
    elif isinstance(value, (list, tuple)):
        fields = getattr(type(value), "_fields", None)
        if isinstance(fields, tuple) and len(fields) == len(value):  # a named tuple
            yield from ((f"{path}.{f}", item) for f, item in zip(fields, value, strict=True))
        else:
            yield from ((f"{path}[{i}]", item) for i, item in enumerate(value))
    elif _plain_type(type(value)):
        attributes = getattr(value, "__dict__", None)
        if isinstance(attributes, dict):
            for attribute, item in islice(attributes.items(), MAX_ITEMS):
                if isinstance(attribute, str) and not attribute.startswith("__"):
                    yield f"{path}.{attribute}", item


def container(value: Any) -> bool:
    """Whether value may hold tensors or modules worth naming: a list, tuple, dict or a
    plain object of the user's."""
    return isinstance(value, (list, tuple, dict)) or _plain_type(type(value))


def reached(roots: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The leaves that require grad and the nn.Modules found inside the containers among
    roots, as (path, object): breadth-first, so the shortest path (then the earlier root)
    names each; each object once by identity; nothing a root names itself, and no tensor or
    module that belongs to a named or found module (its module names it)."""
    seen: set[int] = set()
    todo: deque[tuple[str, Any, int]] = deque()
    modules: list[torch.nn.Module] = []
    for name, value in roots:
        if id(value) in seen or type(value) in weakref.ProxyTypes:
            continue
        seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            modules.append(value)
        elif not isinstance(value, torch.Tensor) and container(value):
            todo.append((name, value, 0))
    found: list[tuple[str, Any]] = []
    looks = 0
    while todo and looks < MAX_LOOKS:
        path, value, depth = todo.popleft()
        for sub, item in _inside(path, value):
            looks += 1
            # a weak proxy (Lightning's trainer keeps one of its module) passes for what it
            # stands for, but is not it: what it stands for is named where it is held
            if id(item) in seen or type(item) in weakref.ProxyTypes:
                continue
            seen.add(id(item))
            if isinstance(item, torch.Tensor):
                if item.requires_grad and item.is_leaf:
                    found.append((sub, item))
            elif isinstance(item, torch.nn.Module):
                found.append((sub, item))
            elif depth + 1 < MAX_DEPTH and container(item):
                todo.append((sub, item, depth + 1))
    if not found:
        return found
    owned: set[int] = set()  # what named and found modules hold: named as their parts
    for module in [*modules, *(m for _, m in found if isinstance(m, torch.nn.Module))]:
        if id(module) in owned:
            continue
        for sub_module in module.modules():
            if sub_module is not module:
                owned.add(id(sub_module))
        owned.update(map(id, module.parameters()))
    return [(path, item) for path, item in found if id(item) not in owned]
