"""The roots of the code's latest pass and of the one asked for: the graph shown by default."""

from __future__ import annotations

from typing import Any

import torch

from .base import Observer, PassState, Recording


class RootsSeen(Observer):
    """The roots of the code's latest pass (the default graph), and of the one asked for."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self.last: list[tuple[str | None, Any]] = []
        self.last_batched = False  # whether a torch.func pass gave them,
        self.last_line: int | None = None  # at this line of the scenario
        self.asked: list[tuple[str | None, Any]] = []  # of the pass --pass N asks for

    def start(self, p: PassState) -> None:
        record = p.record
        if record.by != "scenario":
            return
        here = [(n, t) for n, t in zip(record.root_names, p.roots, strict=True)
                if isinstance(t, torch.Tensor)]
        # inside vmap/grad/jacrev a pass's roots are the transform's own graph: the default
        # ones only while no eager pass ran
        if not record.batched or self.last_batched or not self.last:
            self.last, self.last_batched, self.last_line = here, record.batched, record.line
        if self.recorder.options.graph_pass == p.number:
            self.asked = here

    def release(self) -> None:
        self.last.clear()
        self.asked.clear()
