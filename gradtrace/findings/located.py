"""Where each finding points in the scenario: the file and line of its node or tensor (their
provenance), else of the pass or stop that set its line, else none."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..model.labels import label_file
from ..model.records import Finding, Trace


def located(trace: Trace, findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """findings with file and line filled in where the trace can tell them."""
    findings = tuple(findings)
    if not findings:
        return findings
    home = None if trace.scenario is None else label_file(trace.scenario)
    tensor_node = {t.name: t.node for t in trace.tensors if t.node is not None}
    wanted = {f.node or tensor_node.get(f.tensor or "") for f in findings if f.file is None}
    wanted.discard(None)
    nodes = {n.id: n for n in trace.nodes if n.id in wanted} if wanted else {}
    out = []
    for f in findings:
        if f.file is None:
            node = nodes.get(f.node or tensor_node.get(f.tensor or "", ""))
            if f.line is None and node is not None and node.source is not None:
                f = replace(f, file=node.source.file, line=node.source.line)
            elif f.line is not None:
                f = replace(f, file=home)
        out.append(f)
    return tuple(out)
