"""Graphs the code lets go of. When every root tensor of a pass dies, python frees its graph
(what the code holds no more of), and with it the leaves only the graph held; gradtrace lets
go of it then too, once it is plain data (frozen), so that a script's memory and its weak
references behave as under python."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ...compat.torch import compiling, never_compiled, only_the_graph_holds
from ...extract.captured import RawPass
from ...extract.walk import node_kind, release, walk
from ...model.records import LEAF


def holds_memory(p: RawPass) -> bool:
    """Whether holding p's graph keeps alive what python would free with it: the tensors a
    retained graph saved, or a leaf nothing but the graph holds (a step's fresh input)."""
    if p.retain_graph:
        return True
    order = p.nodes if p.nodes else walk(p.roots)[0]
    try:
        return any(node_kind(node) == LEAF and only_the_graph_holds(node) for node in order)
    finally:
        if order is not p.nodes:
            release(order)


class LetGo:
    """Watches each pass's roots; when all died, freezes its graph (a pass in detail: at once,
    as python frees it, when holding it keeps alive what python frees; else when that is so
    as a later pass starts) or notes it (a loop's light step: let go of when the next pass
    starts; frozen first only when that pass is over another graph and holding the light
    step's would keep memory alive)."""

    def __init__(self, freeze: Callable[[RawPass], None]) -> None:
        self._freeze = freeze
        self._lock = threading.RLock()
        self._busy = 0  # inside gradtrace's bookkeeping: a death waits for its end
        self._stopped = False  # the code ended: what is held is the trace's
        self._due: list[RawPass] = []
        self._light: list[RawPass] = []  # light steps whose roots died
        # passes in detail whose roots died, leaves held: looked at again as each pass
        # starts, by their leaves' nodes alone (a GPT's 52 of its 650)
        self._held: list[tuple[RawPass, list[Any]]] = []
        self._watches: dict[int, list[weakref.ref[Any]]] = {}  # id(pass) -> its roots'

    def watch(self, p: RawPass, roots: list[Any]) -> None:
        """Let go of p's graph once every one of roots died."""
        tensors = [t for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        if self._stopped or not tensors:
            return
        key = id(p)

        @never_compiled  # it runs wherever the last reference goes: compiled code too
        def died(_: weakref.ref[Any]) -> None:
            refs = self._watches.get(key)
            # (two threads may see the last two die at once: one of them goes on)
            if refs is not None and all(ref() is None for ref in refs) \
                    and self._watches.pop(key, None) is not None:
                self._died(p)

        self._watches[key] = [weakref.ref(t, died) for t in tensors]

    def _died(self, p: RawPass) -> None:
        with self._lock:
            if self._stopped:
                return
            if self._busy or compiling():  # (Dynamo traces this thread's frames now)
                self._due.append(p)
                return
            self._settle(p)

    def _settle(self, p: RawPass, leaves: list[Any] | None = None) -> None:
        if not p.nodes:  # a light step: most likely the next pass runs over a graph alike
            self._light.append(p)
            return
        # a graph whose leaves the code still holds (a model's parameters) costs nothing
        # python would free: frozen only once it does (freezing reads its numbers now)
        with contextlib.suppress(Exception):  # kept as it was: the trace is built from it
            if leaves is None:
                leaves = [node for node in p.nodes if node_kind(node) == LEAF]
            if p.retain_graph or any(map(only_the_graph_holds, leaves)):
                self._freeze(p)
            else:
                self._held.append((p, leaves))

    def __enter__(self) -> None:
        """gradtrace's own bookkeeping (a pass, the trace): deaths meanwhile wait for it (a
        class's, not a generator's: every pass enters it)."""
        with self._lock:
            self._busy += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._busy -= 1
            due, self._due = (self._due, []) if not self._busy else ([], self._due)
            for p in due:
                self._settle(p)

    def next_pass(self, signature: int) -> None:
        """A pass over a graph of that structure starts: the light steps whose roots died
        are let go of (frozen first when their graph is another and holds memory)."""
        held, self._held = self._held, []
        for p, leaves in held:  # (let go of meanwhile when its detail was: no nodes)
            if p.nodes and p.frozen is None:
                self._settle(p, leaves)
        light, self._light = self._light, []
        for p in light:
            if p.signature == signature:  # the new pass is the latest over its graph
                p.roots = []
            elif p.roots and holds_memory(p):
                with contextlib.suppress(Exception):  # kept as it was: built from it
                    self._freeze(p)

    def stop(self) -> None:
        """The code ended: what is held now is what the trace shows."""
        with self._lock:
            self._stopped = True
            self._watches.clear()
            self._due.clear()
            self._light.clear()
            self._held.clear()
