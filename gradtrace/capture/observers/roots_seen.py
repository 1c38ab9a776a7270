"""The roots of the code's latest pass and of the one asked for: the graph shown by default."""

from __future__ import annotations

import os
from typing import Any

import torch

from ...compat.cpython import caller_frame
from ..naming.where import gradtrace_file
from .base import Observer, PassState, Recording

_TORCH = os.path.dirname(torch.__file__) + os.sep


class RootsSeen(Observer):
    """The roots of the code's latest pass (the default graph), and of the one asked for.

    The default is the latest pass of the code's own, not a library's: a torch.autograd.grad
    a library runs inside its own functions (a flow's divergence, a penalty it computes) is
    the default only while no other pass ran; inside vmap/grad/jacrev, the same."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self.last: list[tuple[str | None, Any]] = []
        self.last_line: int | None = None  # at this line of the scenario,
        self.last_standing = (False, False)  # (not a library's grad, not batched)
        self.asked: list[tuple[str | None, Any]] = []  # of the pass --pass N asks for,
        self.asked_line: int | None = None  # at this line

    def start(self, p: PassState) -> None:
        record = p.record
        if record.by != "scenario":
            return
        here = [(n, t) for n, t in zip(record.root_names, p.roots, strict=True)
                if isinstance(t, torch.Tensor)]
        # inside vmap/grad/jacrev a pass's roots are the transform's own graph
        standing = (record.kind != "grad" or self._called_by_own_code(), not record.batched)
        if standing >= self.last_standing or not self.last:
            self.last, self.last_line, self.last_standing = here, record.line, standing
        if self.recorder.options.graph_pass == p.number:
            self.asked, self.asked_line = here, record.line

    def line(self) -> int | None:
        """The scenario's line of the pass whose roots are the default graph's."""
        return self.asked_line if self.asked else self.last_line

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
        self.last.clear()
        self.asked.clear()
