"""Findings read off a finished Trace (torch-free)."""

from __future__ import annotations

from .model import Finding, Trace


def graph_findings(trace: Trace) -> list[Finding]:
    """Leaves that require grad but that no output or pass reaches: their .grad stays None."""
    findings: list[Finding] = []
    if not trace.nodes:  # no graph at all: the no-graph finding already says so
        return findings
    for t in trace.tensors:
        if t.is_leaf and t.requires_grad and t.node is None and t.grad is None:
            findings.append(Finding(
                "unreached-leaf", "warning",
                f"{t.name} requires grad, but no output depends on it: its .grad stays None",
                tensor=t.name,
                hint="use it in the expression, or pick an output that does (--output NAME)",
            ))
    return findings
