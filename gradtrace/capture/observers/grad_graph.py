"""The nodes create_graph passes make: part of a gradient's own graph (a second derivative's),
marked so in the trace."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...compat.torch import next_sequence_number, sequence_number
from .base import Observer, Part, PassState, Recording


@dataclass(frozen=True)
class GradGraphPart(Part):
    """Whether a node was made by a create_graph pass (None: no such pass ran)."""

    grad_graph: Callable[[Any], bool] | None


class GradGraph(Observer):
    """The sequence numbers autograd gave while each create_graph pass ran: last in the
    table, so its span holds the call and nothing of gradtrace's around it."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__(recorder)
        self._spans: list[tuple[int, int]] = []  # [start, end) of each such pass
        self._start = 0

    def start(self, p: PassState) -> None:
        if p.record.create_graph:
            self._start = next_sequence_number()

    def finish(self, p: PassState) -> None:
        if p.record.create_graph:
            self._spans.append((self._start, next_sequence_number()))

    def _made_by_a_pass(self, node: Any) -> bool:
        number = sequence_number(node)
        return any(start <= number < end for start, end in self._spans)

    def captured(self, given: Any) -> GradGraphPart:
        return GradGraphPart(self._made_by_a_pass if self._spans else None)
