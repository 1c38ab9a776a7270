"""Findings about the scenario's passes: the ones that raised, and flow gradtrace missed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..model.facts import Fact, GraphFreed, SavedChanged, Stopped
from ..model.records import Finding
from .recorded import findings_of
from .registry import FLOW_NOT_RECORDED, PASS_FAILED


class PassRecord(Protocol):
    """What these findings read of a pass (the recorder's raw passes have it all)."""

    @property
    def kind(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def error_kind(self) -> str | None: ...
    @property
    def root_names(self) -> Sequence[str | None]: ...
    @property
    def line(self) -> int | None: ...
    @property
    def code(self) -> str | None: ...
    @property
    def flow_failures(self) -> Sequence[str]: ...
    @property
    def batched(self) -> bool: ...
    @property
    def compiled(self) -> bool: ...


# Hints for the errors learners meet, by the kind torch_compat.error_kind gives the error.
_PASS_HINTS = {
    "graph-freed":
        "an earlier backward() freed the saved tensors this one needs: the graph-freed finding "
        "says which pass, through which tensor, and the fix that fits",
    "no-grad-fn":
        "the root is not part of any graph: it was computed under torch.no_grad(), from "
        ".detach()ed tensors, or from tensors without requires_grad=True",
    "non-scalar":
        "backward() of a non-scalar needs a gradient: pass gradient=torch.ones_like(t), "
        "or reduce it first (t.sum())",
    "inplace":
        "a tensor saved for backward was changed in place; use the out-of-place op "
        "(x = x + 1, not x += 1) or clone() it first",
}


# The facts that name the cause of a pass's error, by the error's kind: with one, the
# error's own hint says nothing more.
_CAUSES = {"inplace": SavedChanged, "graph-freed": GraphFreed}


def pass_findings(passes: Sequence[PassRecord], facts: Sequence[Fact] = ()) -> list[Finding]:
    """A finding for every pass that raised, with a hint for the errors learners meet, and
    for every pass whose gradient flow gradtrace could not fully record; then the finding
    of the error the scenario stopped on (from facts), which is the finding of the pass
    that raised it: torch's message once, after the findings of its cause."""
    findings = []
    stop = next((f for f in facts if isinstance(f, Stopped)), None)
    batched = [i for i, p in enumerate(passes, 1) if p.batched]
    if batched:
        findings.append(FLOW_NOT_RECORDED.finding(
            f"{len(batched)} pass(es) ran inside torch.func transforms (vmap, grad, jacrev…) "
            "or a vectorized torch.autograd.functional call, "
            f"from pass {batched[0]}: their gradients are batched, not summarised",
            severity="info", line=passes[batched[0] - 1].line))
    compiled = [i for i, p in enumerate(passes, 1) if p.compiled]
    if compiled:
        findings.append(FLOW_NOT_RECORDED.finding(
            f"{len(compiled)} pass(es) ran under compiled autograd, from pass {compiled[0]}: "
            "torch compiles the whole backward graph with its hooks, so gradtrace hooks none "
            "of its nodes; the passes and their .grad changes are recorded, the flow through "
            "the nodes is not", severity="info", line=passes[compiled[0] - 1].line))
    for i, p in enumerate(passes, 1):
        if p.flow_failures:
            findings.append(FLOW_NOT_RECORDED.finding(
                f"pass {i}: gradtrace could not summarise the gradients of "
                f"{len(p.flow_failures)} node(s), so their flow is not shown (the pass itself "
                f"ran as usual): {p.flow_failures[0]}",
                hint="please report this with the scenario: it is a gradtrace limitation",
                line=p.line))
        if p.error is None:
            continue
        hint = _PASS_HINTS.get(p.error_kind or "")
        if any(n and n.endswith(".grad") for n in p.root_names) and p.error_kind == "no-grad-fn":
            hint = ("a .grad has no graph of its own unless the backward() that made it "
                    "was called with create_graph=True")
        where = f" at line {p.line} `{p.code}`" if p.line else ""
        first_line = p.error.splitlines()[0]
        if stop is not None and stop.line == p.line and first_line in stop.message:
            cause = _CAUSES.get(p.error_kind or "")
            explained = cause is not None and any(isinstance(f, cause) for f in facts)
            if hint is not None and not explained:
                stop = stop._replace(hint=hint)
            continue
        findings.append(PASS_FAILED.finding(
            f"pass {i} ({p.kind}){where} failed: {first_line}", hint=hint, line=p.line,
            tensor=next((n for n in p.root_names if n), None)))
    return findings + findings_of([stop] if stop is not None else [])
