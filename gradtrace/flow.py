"""Gradient-flow capture: node hooks that summarise what each node received and sent."""

from __future__ import annotations

from typing import Any

from .extract import grad_stats


class FlowCapture:
    """Hooks on every node of a pass; `records` maps id(node) to (node, order, outs, ins).

    The hooks return None, so no gradient changes; they keep summaries, never the gradients.
    """

    def __init__(self, nodes: list[Any]) -> None:
        self.records: dict[int, tuple[Any, int, list[Any], list[Any]]] = {}
        self._handles = [node.register_hook(self._hook(node)) for node in nodes]

    def _hook(self, node: Any) -> Any:
        records = self.records

        def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
            records[id(node)] = (
                node,
                len(records),
                [None if g is None else grad_stats(g) for g in grad_outputs],
                [None if g is None else grad_stats(g) for g in grad_inputs],
            )

        return hook

    def remove(self) -> None:
        """Remove every hook, leaving the graph as the scenario made it."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
