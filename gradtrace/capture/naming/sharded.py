"""The nn.Modules a scenario names, part by part; FSDP2's two tensors of each parameter, and
which of them holds its .grad."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from ...compat.torch import fsdp_loaded, fsdp_parameters
from ...extract.walk import readable_grad
from .reach import is_module


def submodules(named: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, torch.nn.Module]]:
    """Every submodule of the named nn.Modules, once, under its first dotted path."""
    seen: set[int] = set()
    for name, value in list(named):
        if is_module(value) and not name.startswith("__"):
            for sub, module in value.named_modules():
                if id(module) not in seen:
                    seen.add(id(module))
                    yield (f"{name}.{sub}" if sub else name), module


def module_objects(named: Iterable[tuple[str, Any]]) -> dict[int, str]:
    """id(module) -> its dotted path, for every submodule of the named nn.Modules."""
    return {id(module): path for path, module in submodules(named)}


# FSDP2's (sharded, unsharded) parameter pairs, by the id of each of the two
Pairs = dict[int, tuple[torch.Tensor, torch.Tensor]]


def fsdp_pairs(named: Iterable[tuple[str, Any]]) -> Pairs:
    """The FSDP2 (fully_shard) parts of the named nn.Modules: each parameter's sharded
    DTensor (the module's between passes, the optimizer's) and its unsharded one (the
    module's from forward to the end of backward: the graph's leaf), by the id of each."""
    if not fsdp_loaded():
        return {}
    pairs: Pairs = {}
    for _, module in submodules(named):
        for sharded, unsharded in fsdp_parameters(module):
            pairs[id(sharded)] = pairs[id(unsharded)] = (sharded, unsharded)
    return pairs


def grad_holder(t: torch.Tensor, pairs: Pairs) -> torch.Tensor:
    """The tensor that holds the .grad of t's parameter now: t, or the one of FSDP2's two."""
    pair = pairs.get(id(t))
    return t if pair is None else holder_of(*pair)


def holder_of(sharded: torch.Tensor, unsharded: torch.Tensor) -> torch.Tensor:
    """The unsharded one while it holds a .grad (a pass without gradient sync left it
    there), else the sharded one (the reduce-scatter's)."""
    return unsharded if readable_grad(unsharded) is not None else sharded


# fsdp_pairs' pairs held weakly (a model let go of dies as under python)
WeakPairs = dict[int, tuple["weakref.ref[torch.Tensor]", "weakref.ref[torch.Tensor]"]]


def weak_pairs(pairs: Pairs) -> WeakPairs:
    """pairs, each tensor held weakly."""
    return {key: (weakref.ref(s), weakref.ref(u)) for key, (s, u) in pairs.items()}


def holders_now(named: Iterable[tuple[str, torch.Tensor]], pairs: WeakPairs
                ) -> dict[str, torch.Tensor]:
    """The names of named whose FSDP2 parameter's .grad the other of its two tensors holds
    now, and that tensor."""
    swapped = {}
    for name, t in named:
        refs = pairs.get(id(t))
        if refs is None:
            continue
        sharded, unsharded = refs[0](), refs[1]()
        if sharded is not None and unsharded is not None and (t is sharded or t is unsharded):
            holder = holder_of(sharded, unsharded)
            if holder is not t:
                swapped[name] = holder
    return swapped
