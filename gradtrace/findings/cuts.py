"""Where a graph was lost, phrased: the cuts the code's lines made (the facts capture's source
analysis found), why no tensor has a graph, and the graph-cut findings placed among the rest."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from ..model.facts import CodeCut, Cut, LeafCut, NoRoot, PassCut
from ..model.labels import line_at
from ..model.records import Finding
from .registry import GRAPH_CUT

# What, in a line that ran, makes a tensor with no graph (method, function or attribute).
CUT_BY = {
    "detach": ".detach() cuts it from the graph",
    "item": ".item() turns it into a Python number",
    "tolist": ".tolist() turns it into Python numbers",
    "numpy": ".numpy() leaves autograd",
    "data": ".data is the tensor without its graph",
    "tensor": "torch.tensor(...) makes a new leaf from values, without a graph",
    "argmax": "argmax has no gradient (its result is an index)",
    "argmin": "argmin has no gradient (its result is an index)",
    "round": "round has a zero gradient almost everywhere and no graph of its own here",
}

# The calls that keep a whole computation off the graph, as the no-root message names them.
_CUTTER_WORDS = {
    "no_grad": "torch.no_grad()",
    "inference_mode": "torch.inference_mode()",
    "set_grad_enabled": "torch.set_grad_enabled()",
    "detach": ".detach()",
}

# The fix for each way a line loses the graph (others: the general advice).
_PYTHON_NUMBER = "keep it a tensor: .item() leaves autograd"
_CUT_FIXES = {
    "data": "use the tensor itself, not its .data (its values without the graph)",
    "detach": "drop .detach() where the gradient must flow through",
    "item": _PYTHON_NUMBER,
    "tolist": _PYTHON_NUMBER,
    "tensor": "compute it from the tensors themselves: torch.tensor(...) copies their values "
              "into a new leaf",
}
_OUTSIDE_BLOCK = "compute it outside the no_grad (or inference_mode) block"


def why_cut(cut: Cut) -> str:
    """Why what a line made has no graph, in words a learner can act on."""
    if cut.kind == "block":
        return f"it ran inside torch.{cut.name}()" + (
            "" if cut.line is None else f" (line {cut.line})")
    if cut.kind == "decorator":
        return (f"@torch.{cut.name}() turns gradients off in all of {cut.function}(): "
                "nothing it returns has a graph")
    return CUT_BY[cut.name]


def why_no_root(fact: NoRoot) -> str:
    """Why no named tensor has a grad_fn: nothing requires grad, a result was bound to no
    name, or the computation ran without gradients (the calls that turned them off)."""
    if not fact.wanting:
        return ("no tensor requires grad; create the inputs with requires_grad=True, "
                "e.g. torch.tensor(5.0, requires_grad=True)")
    wanting = ", ".join(fact.wanting)
    if fact.unbound is not None:
        return (f"{wanting} require grad, and line {fact.unbound} `{fact.code}` computed "
                f"from them, but its result was bound to no name and no backward ran on it: "
                f"bind it (loss = …) or call .backward() on it")
    if fact.from_values is not None and not fact.cutters:
        return (f"{wanting} require grad, but the backward passes ran from "
                f"{fact.from_values}, a leaf made from values (`torch.tensor(loss.item(), "
                "requires_grad=True)`, a new tensor): backward from it reaches none of them; "
                "compute the loss from the tensors themselves")
    calls: dict[str, list[int]] = {}
    for cutter in fact.cutters:
        calls.setdefault(_CUTTER_WORDS[cutter.name], []).append(cutter.line or 0)
    causes = [f"{what} on line {', '.join(map(str, sorted(set(at))))}"
              for what, at in calls.items()]
    told = f" ({'; '.join(causes)})" if causes else ""
    return (f"{wanting} require grad, but nothing was computed from them with gradients "
            f"enabled: the computation ran under torch.no_grad() or was detached{told}")


def pass_cut(fact: PassCut, home: str | None = None) -> Finding:
    """`pass 2: loss has no graph because line 5 `…` made it so: …`, with the fix of its cut."""
    fix = _OUTSIDE_BLOCK if fact.cut.kind == "block" else _CUT_FIXES.get(fact.cut.name)
    return GRAPH_CUT.finding(
        f"pass {fact.number}: {fact.tensor} has no graph because line {fact.line} "
        f"`{fact.code}` made it so: {why_cut(fact.cut)}", tensor=fact.tensor, line=fact.line,
        hint=f"at line {fact.line}, {fix}" if fix is not None else
        "compute it with tensor ops outside no_grad, from tensors that require grad "
        "(keep .detach(), .item() and torch.tensor() out of it)")


def leaf_cut(fact: LeafCut, home: str | None = None) -> Finding:
    leaves = fact.leaves
    via = "it" if fact.through == leaves[0] else fact.through if fact.through == fact.owner \
        else f"{fact.through} (computed from {fact.owner})"  # model(x): what model computed
    return _cut_off(leaves, f"{_reach(leaves, f' of {fact.owner}')} no root because line "
                    f"{fact.line} `{fact.code}` took {via} without its graph: "
                    f"{why_cut(fact.cut)}",
                    fact.file, fact.line, "use the tensor itself where the loss needs its "
                    "gradient; detach only what should not learn", fact.node)


def code_cut(fact: CodeCut, home: str | None = None) -> Finding:
    inside = fact.function + (f" of {fact.module}" if fact.module else "")
    return _cut_off(fact.leaves, f"{_reach(fact.leaves, '')} no root, and "
                    f"{line_at(fact.file, fact.line, home)} `{fact.code}` in {inside} took a "
                    f"value without its graph: {why_cut(fact.cut)}",
                    fact.file, fact.line, "in forward(), keep the tensor itself where later "
                    "layers must learn through it; detach only what should not learn (a "
                    "target, a stop-gradient)", fact.node)


def with_cuts(findings: Iterable[Finding], file: str, bound_at: Callable[[str], int | None],
              cuts: Sequence[LeafCut | CodeCut], home: str | None) -> tuple[Finding, ...]:
    """findings with each tensor's that has no line told the line of file that bound the
    tensor, and the cuts' graph-cut findings: those inside functions as the cause, before
    the first unreached-leaf finding (whose hint then points to the first of them); those
    of the file's own lines last."""
    placed = [replace(f, file=file, line=line)
              if f.tensor and f.line is None and (line := bound_at(f.tensor)) else f
              for f in findings]
    in_code = [cut for cut in cuts if isinstance(cut, CodeCut)]
    if in_code:  # the cause first: the unreached-leaf finding then points to it
        first = next((i for i, f in enumerate(placed) if f.code == "unreached-leaf"),
                     len(placed))
        lead = in_code[0]
        see = f"{line_at(lead.file, lead.line, home)} cut their graph in " \
            f"{lead.function}: see the graph-cut finding"
        placed = [*placed[:first], *(code_cut(cut, home) for cut in in_code),
                  *(replace(f, hint=see) if f.code == "unreached-leaf" else f
                    for f in placed[first:])]
    return (*placed, *(leaf_cut(cut, home) for cut in cuts if isinstance(cut, LeafCut)))


def _reach(leaves: tuple[str, ...], of: str) -> str:
    """`w reaches` or `3 tensors of model (model.0.weight, …) reach`."""
    if len(leaves) == 1:
        return f"{leaves[0]} reaches"
    return f"{len(leaves)} tensors{of} ({leaves[0]}, …) reach"


def _cut_off(leaves: tuple[str, ...], message: str, file: str, line: int, hint: str,
             node: str | None = None) -> Finding:
    return GRAPH_CUT.finding(message, severity="warning", tensor=leaves[0], file=file,
                             line=line, hint=hint, node=node)
