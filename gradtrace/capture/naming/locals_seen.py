"""The locals of the scenario's functions seen as passes ran: their tensors held weakly (a
function's tensors and graphs die when it returns, as under python), with a brief of each
tensor that holds a graph (what the findings on bindings read once it died: a running
total); the latest module and optimizer under each name held until the run ends."""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from .reach import is_tensor

# the nodes of a conversion (`.double()`, `.to(device)`): one of a leaf is a leaf copied
COPY_NODES = frozenset({"ToCopyBackward0", "CopyBackwards", "CloneBackward0"})


class TensorBrief(NamedTuple):
    """What the findings on bindings read of a tensor with a graph."""

    grad_fn: str  # its node's class
    leaf_copy: bool  # a conversion of a leaf: its node's one input is an AccumulateGrad
    requires_grad: bool
    retains_grad: bool


def brief(t: Any) -> TensorBrief | None:
    """t's brief (None: no graph)."""
    node = t.grad_fn
    if node is None:
        return None
    kind = type(node).__name__
    inputs = [f for f, _ in node.next_functions if f is not None] if kind in COPY_NODES \
        else []
    return TensorBrief(kind, len(inputs) == 1 and type(inputs[0]).__name__ == "AccumulateGrad",
                       t.requires_grad, t.retains_grad)


def _held(value: Any) -> Callable[[], Any]:
    """A weak reference to value; value itself for a module or an optimizer (what the
    trace says of a model a function trained: its names, DDP's averaging, its optimizer;
    they hold parameters, never a graph) and for a list or dict (not weakly referable)."""
    if not isinstance(value, (torch.nn.Module, torch.optim.Optimizer)):
        with contextlib.suppress(TypeError):
            return weakref.ref(value)
    return functools.partial(_itself, value)


def _itself(value: Any) -> Any:
    return value


class LocalsSeen:
    """The latest object under each local name, and the brief of each tensor with a graph."""

    def __init__(self) -> None:
        self._held: dict[str, Callable[[], Any]] = {}
        self._briefs: dict[str, TensorBrief] = {}

    def update(self, snapshot: dict[str, Any], hold: bool = False) -> None:
        """The latest objects under these names (hold: strongly)."""
        for name, value in snapshot.items():
            self._held[name] = functools.partial(_itself, value) if hold else _held(value)
            made = brief(value) if is_tensor(value) else None
            if made is None:
                self._briefs.pop(name, None)
            else:
                self._briefs[name] = made

    def alive(self) -> dict[str, Any]:
        """The locals seen, those alive."""
        alive = {name: held() for name, held in self._held.items()}
        return {name: value for name, value in alive.items() if value is not None}

    def briefs_of_dead(self) -> dict[str, TensorBrief]:
        """The briefs of the tensors with a graph that died since they were seen."""
        return {name: b for name, b in self._briefs.items() if self._held[name]() is None}

    def forget(self, name: str) -> None:
        del self._held[name]
        self._briefs.pop(name, None)

    def clear(self) -> None:
        self._held.clear()
        self._briefs.clear()
