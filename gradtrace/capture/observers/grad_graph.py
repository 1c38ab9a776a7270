"""The nodes create_graph passes make: part of a gradient's own graph (a second derivative's),
marked so in the trace."""

from __future__ import annotations

from typing import Any

from ...compat.torch import next_sequence_number, sequence_number
from .base import Observer, PassState, Recording


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

    def captured(self, given: Any) -> dict[str, Any]:
        return {"grad_graph": self._made_by_a_pass if self._spans else None}
