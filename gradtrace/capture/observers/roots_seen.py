"""The roots of the code's latest pass and of the one asked for: the graph shown by default."""

from __future__ import annotations

import os
import weakref
from typing import Any, NamedTuple

import torch

from ...compat.cpython import caller_frame
from ...extract.captured import RawPass
from ..naming.where import gradtrace_file
from .base import Observer, PassState, Recording

_TORCH = os.path.dirname(torch.__file__) + os.sep


class DefaultRoots(NamedTuple):
    """The roots of the graph shown by default: the pass --pass N asks for, else the code's
    latest."""

    roots: list[tuple[str | None, Any]]  # (name, tensor), while every one lives
    asked: bool  # --pass N's (else the latest pass's)
    line: int | None  # the scenario's line of that pass
    released: RawPass | None  # that pass, when the code let go of its roots (frozen or held)


class RootsSeen(Observer):
    """The roots of the code's latest pass (the default graph), and of the one asked for.

    The default is the latest pass of the code's own, not a library's: a torch.autograd.grad
    a library runs inside its own functions (a flow's divergence, a penalty it computes) is
    the default only while no other pass ran; inside vmap/grad/jacrev, the same."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        # held weakly, as (name, weak reference): the code's letting go of them frees their
        # graph as under python (frozen first: the pass says so)
        self._last: list[tuple[str | None, weakref.ref[Any]]] = []
        self.last_pass: RawPass | None = None
        self.last_line: int | None = None  # at this line of the scenario,
        self.last_standing = (False, False)  # (not a library's grad, not batched)
        self._asked: list[tuple[str | None, weakref.ref[Any]]] = []  # of the pass --pass N
        self.asked_pass: RawPass | None = None
        self.asked_line: int | None = None  # at this line

    def start(self, p: PassState) -> None:
        record = p.record
        if record.by != "scenario":
            return
        here = [(n, t) for n, t in zip(record.root_names, p.roots, strict=True)
                if isinstance(t, torch.Tensor)]
        # inside vmap/grad/jacrev a pass's roots are the transform's own graph
        standing = (record.kind != "grad" or self._called_by_own_code(), not record.batched)
        weak = [(n, weakref.ref(t)) for n, t in here]
        if standing >= self.last_standing or not self._last:
            self._last, self.last_line, self.last_standing = weak, record.line, standing
            self.last_pass = record
        if self.recorder.options.graph_pass == p.number:
            self._asked, self.asked_line, self.asked_pass = weak, record.line, record

    def default(self) -> DefaultRoots:
        """The roots of the graph shown by default, as they stand now."""
        asked = self.asked_pass is not None
        p = self.asked_pass or self.last_pass
        return DefaultRoots(_alive(self._asked if asked else self._last), asked,
                            self.asked_line if asked else self.last_line,
                            p if p is not None and (p.frozen is not None or p.roots) else None)

    def _called_by_own_code(self) -> bool:
        """Whether the code that called torch (the first frame out of gradtrace's and
        torch's own) is in one of the scenario's own files, not a library's."""
        frame = caller_frame()
        while frame is not None:
            # (gradtrace's examples are the scenario's own; <stdin>, a notebook's cells too)
            name = frame.f_code.co_filename
            if name.startswith("<") or self.recorder.host.owns(name):
                return True
            if not (gradtrace_file(name) or name.startswith(_TORCH)):
                return False
            frame = frame.f_back
        return True

    def release(self) -> None:
        self._last.clear()
        self._asked.clear()
        self.last_pass = self.asked_pass = None


def _alive(roots: list[tuple[str | None, weakref.ref[Any]]]) -> list[tuple[str | None, Any]]:
    alive = [(name, ref()) for name, ref in roots]
    return alive if all(t is not None for _, t in alive) else []
