"""Names through containers: the leaves and nn.Modules a scenario keeps only inside lists,
tuples, dicts and attributes of its own plain objects and in lists of its own modules
(`params[0]`, `cfg["w"]`, `agent.critic`, `net.layers[0]`), found breadth-first from its
named objects, so the shortest path names each; bounded in depth and in the objects looked
at, so naming stays cheap in a loop."""

from __future__ import annotations

import functools
import json
import sys
import types
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
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

# The search touches the scenario's objects only through their types and the C code of
# list, tuple, dict and object: no __getattr__, property, __len__, __iter__, __eq__,
# __hash__ or __class__ of theirs runs (it could fail, or change what the script sees).


def is_tensor(value: Any) -> bool:
    """Whether value is a tensor (a Parameter, a DTensor …), by its type alone."""
    return issubclass(type(value), torch.Tensor)


def is_module(value: Any) -> bool:
    """Whether value is an nn.Module, by its type alone (a weak proxy of one is not)."""
    return issubclass(type(value), torch.nn.Module)


def _plain_type(cls: type) -> bool:
    """Whether instances of cls are plain objects to look into: they have a __dict__ and
    their class is the user's (not the stdlib's, torch's, numpy's …)."""
    try:
        plain = _PLAIN.get(cls)
    except Exception:  # a metaclass without a hash, or whose __eq__ raises: not cached
        return _plain_now(cls)
    if plain is None:
        plain = _PLAIN[cls] = _plain_now(cls)
    return plain


def _plain_now(cls: type) -> bool:
    try:
        return bool(type.__dict__["__dictoffset__"].__get__(cls)) \
            and not issubclass(cls, _NOT_PLAIN) and _own(cls)
    except Exception:  # a class that defies reading: not looked into
        return False


def _own(cls: type) -> bool:
    """Whether cls is the user's (not the stdlib's, torch's, numpy's …), as type reads it."""
    try:
        return str(type.__dict__["__module__"].__get__(cls)).partition(".")[0] not in _FOREIGN
    except Exception:  # a class that defies reading: not looked into
        return False


def _key(key: Any) -> str | None:
    """A dict key as a subscript: ["w"] or [3]; None for keys that do not read well."""
    if issubclass(type(key), str):
        return f"[{json.dumps(str.__str__(key), ensure_ascii=False)}]"
    if issubclass(type(key), int) and not issubclass(type(key), bool):
        return f"[{int.__repr__(key)}]"
    return None


_CLASS_DICT = type.__dict__["__dict__"].__get__  # a class's own dict, as type reads it


def _in_classes(cls: type, name: str) -> Any:
    """name as the first class of cls's MRO defines it, read from the class dicts (no
    metaclass code runs); None where none does."""
    for klass in cls.__mro__:
        found = _CLASS_DICT(klass).get(name)
        if found is not None:
            return found
    return None


def _attributes(value: Any) -> dict[str, Any] | None:
    """value's instance __dict__, read by the C descriptor that makes it (None where a
    class of its own defines __dict__)."""
    descriptor = _in_classes(type(value), "__dict__")
    if type(descriptor) is not types.GetSetDescriptorType:
        return None
    attributes = descriptor.__get__(value, type(value))
    return attributes if type(attributes) is dict else None


def _inside(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """The (path, object) pairs one step inside value: items of a list, tuple or dict,
    fields of a named tuple, attributes of a plain object, containers a user's module holds."""
    cls = type(value)
    if issubclass(cls, dict):
        if dict.__len__(value) <= MAX_ITEMS:
            for key, item in list(dict.items(value)):
                sub = _key(key)
                if sub is not None:
                    yield path + sub, item
    elif issubclass(cls, (list, tuple)):
        base = list if issubclass(cls, list) else tuple
        if base.__len__(value) > MAX_ITEMS:
            return
        items = list(base.__iter__(value))
        fields = _in_classes(cls, "_fields") if issubclass(cls, tuple) else None
        if type(fields) is tuple and len(fields) == len(items):  # a named tuple
            yield from ((f"{path}.{f}", item) for f, item in zip(fields, items, strict=True)
                        if type(f) is str)
        else:
            yield from ((f"{path}[{i}]", item) for i, item in enumerate(items))
    elif issubclass(cls, torch.nn.Module):  # a user's: its lists, tuples and dicts (not
        attributes = _attributes(value) if _own(cls) else None  # its parts: its paths name
        if attributes is not None:  # those; not torch's modules' settings, Conv2d's stride)
            for attribute, item in list(islice(dict.items(attributes), MAX_ITEMS)):
                if type(attribute) is str and not attribute.startswith("_") \
                        and issubclass(type(item), (list, tuple, dict)):
                    yield f"{path}.{attribute}", item
    elif _plain_type(cls):
        attributes = _attributes(value)
        if attributes is not None:
            for attribute, item in list(islice(dict.items(attributes), MAX_ITEMS)):
                if type(attribute) is str and not attribute.startswith("__"):
                    yield f"{path}.{attribute}", item


def container(value: Any) -> bool:
    """Whether value may hold tensors or modules worth naming: a list, tuple, dict or a
    plain object of the user's."""
    return issubclass(type(value), (list, tuple, dict)) or _plain_type(type(value))


def reached(roots: list[tuple[str, Any]], late: Sequence[tuple[str, Any]] = ()
            ) -> list[tuple[str, Any]]:
    """The leaves that require grad and the nn.Modules found inside the containers among
    roots, as (path, object): breadth-first, so the shortest path (then the earlier root)
    names each; each object once by identity; nothing a root names itself, and no tensor or
    module that belongs to a named or found module (its module names it). The late roots
    (a method's `self`) are looked into after the others: what those reach is named by them
    (`layers[0]`, not `self`)."""
    seen: set[int] = set()
    todo: deque[tuple[str, Any, int]] = deque()
    modules: list[torch.nn.Module] = []
    found: list[tuple[str, Any]] = []
    looks = 0
    for group in (roots, late):
        for name, value in group:
            if id(value) in seen:
                continue
            seen.add(id(value))
            if is_module(value):
                modules.append(value)
                todo.append((name, value, 0))  # a plain list of layers it keeps
            elif not is_tensor(value) and container(value):
                todo.append((name, value, 0))
        looks = _search(todo, seen, found, looks)
    if not found:
        return found
    owned: set[int] = set()  # what named and found modules hold: named as their parts
    for module in [*modules, *(m for _, m in found if is_module(m))]:
        if id(module) in owned:
            continue
        for sub_module in module.modules():
            if sub_module is not module:
                owned.add(id(sub_module))
        owned.update(map(id, module.parameters()))
    return [(path, item) for path, item in found if id(item) not in owned]


def _search(todo: deque[tuple[str, Any, int]], seen: set[int], found: list[tuple[str, Any]],
            looks: int) -> int:
    """Breadth-first from todo's containers: what each holds, into found (the looks so far,
    and after: the search stops at MAX_LOOKS)."""
    while todo and looks < MAX_LOOKS:
        path, value, depth = todo.popleft()
        try:
            inside = list(_inside(path, value))
        except Exception:  # an object that defies reading: not looked into
            continue
        for sub, item in inside:
            looks += 1
            if id(item) in seen:
                continue
            seen.add(id(item))
            if is_tensor(item):
                if _trained_leaf(item):
                    found.append((sub, item))
            elif is_module(item):
                found.append((sub, item))
                if depth + 1 < MAX_DEPTH:
                    todo.append((sub, item, depth + 1))
            elif depth + 1 < MAX_DEPTH and container(item):
                todo.append((sub, item, depth + 1))
    return looks


def _trained_leaf(tensor: torch.Tensor) -> bool:
    """A leaf that requires grad (False for a subclass whose __torch_function__ fails)."""
    try:
        return bool(tensor.requires_grad and tensor.is_leaf)
    except Exception:
        return False
