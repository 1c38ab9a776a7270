"""Findings from what capture saw: each fact of model/facts.py phrased as its finding."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from ..model.facts import (
    ClipWithoutGradient,
    CodeCut,
    Detached,
    Fact,
    FrozenHeld,
    GradcheckRan,
    GradDiscarded,
    GraphFreed,
    GraphKept,
    LeafCopied,
    LeafCut,
    NonFiniteBorn,
    NonLeafGradRead,
    NoRoot,
    NotOptimized,
    PassCut,
    PassesCapped,
    SavedChanged,
    StepWithoutGradient,
    Stopped,
)
from ..model.labels import line_at, without_comment
from ..model.records import Finding
from . import births, cuts, training
from .cuts import why_no_root
from .registry import (
    DETACHED,
    GRADCHECK,
    GRADCHECK_FAILED,
    GRAPH_FREED,
    INPLACE_MODIFIED,
    NO_GRAPH,
    NO_GRAPH_LEAD,
    PASSES_CAPPED,
    SCENARIO_STOPPED,
)

_METHOD = re.compile(r"^(?P<target>[\w.\[\]]+)\.(?P<op>\w+)_\((?P<args>.*)\)$")
_FUNCTIONAL = {"torch", "F", "nn.functional", "torch.nn.functional"}  # torch.relu_(x)
_CALL = re.compile(r"^[\w.]+\((?P<args>.*)\)$")  # a call, as a statement of its own
_FIRST = re.compile(r"^[\w.]+(?=\s*(,|$))")  # a call's first argument, when a plain name
_AUGMENTED = re.compile(r"^(?P<target>[\w.\[\]]+)\s*(?P<op>[-+*/@]|//|\*\*)=\s*(?P<value>.+)$")


def findings_of(facts: Iterable[Fact], home: str | None = None) -> list[Finding]:
    """Each fact's finding, in the order the facts came (home: the scenario's label; a line
    of another file is told with that file's name); a count that amounts to nothing (an
    optimizer's occasional empty step) has none."""
    facts = list(facts)
    # a pass whose root a line cut tells why no tensor has a graph, and where: a guess of why
    # none has one (no_grad, detach: no call that turns gradients off ran) is wrong beside it
    cut = any(isinstance(fact, PassCut) for fact in facts)
    return [f for fact in facts if not (cut and isinstance(fact, NoRoot) and not fact.cutters
                                        and fact.unbound is None)
            and (f := _PHRASED[type(fact)](fact, home)) is not None]


def out_of_place(code: str) -> str | None:
    """`b.add_(1)` -> `b = b.add(1)`; `b += 1` -> `b = b + 1`; `torch.relu_(b)` ->
    `b = torch.relu(b)`; `F.relu(b, inplace=True)` -> `F.relu(b, inplace=False)`; None when
    not one of those."""
    code = code.strip()
    if "inplace=True" in code:
        code = code.replace("inplace=True", "inplace=False")
        bare = _CALL.match(code)  # its result thrown away: bound to the name it changed
        first = None if bare is None else _FIRST.match(bare["args"])
        return code if bare is None else None if first is None else f"{first[0]} = {code}"
    if (m := _METHOD.match(code)) is not None:
        if m["target"] in _FUNCTIONAL:
            first = _FIRST.match(m["args"])
            return None if first is None else \
                f"{first[0]} = {m['target']}.{m['op']}({m['args']})"
        return f"{m['target']} = {m['target']}.{m['op']}({m['args']})"
    if (m := _AUGMENTED.match(code)) is not None:
        return f"{m['target']} = {m['target']} {m['op']} {m['value']}"
    return None


def _gradcheck(fact: GradcheckRan, home: str | None = None) -> Finding:
    called = f"{fact.kind}({fact.function}) at line {fact.line}"
    if fact.verdict == "failed":
        return GRADCHECK_FAILED.finding(
            f"{called} failed: {fact.error}",
            hint="the Function's backward disagrees with finite differences: "
            "compare the numerical and analytical values above, then fix backward",
            line=fact.line)
    return GRADCHECK.finding(f"{called} {fact.verdict}", line=fact.line,
                             severity="info" if fact.verdict == "passed" else "error")


def _saved_changed(fact: SavedChanged, home: str | None = None) -> Finding:
    """`b (output of SigmoidBackward0, line 3) was saved for backward and then changed in
    place at line 5 `b.add_(1)``, with the out-of-place rewrite of that line as the hint (an
    inplace=True module the line calls: built without it)."""
    name, changed, made = fact.tensor, fact.changed, fact.made
    where = ", ".join(([line_at(made.file, made.line, home)] if made is not None else [])
                      + ([f"in {fact.module}"] if fact.module else []))
    what = f"the {fact.saved} tensor of {fact.node_type}" + (f" ({where})" if where else "")
    where = f", {where}" if where else ""
    if name is not None:
        what = (f"{name} (output of {fact.node_type}{where})" if fact.saved == "result"
                else f"{name} (saved as {fact.saved} by {fact.node_type}{where})")
    if changed is not None:
        at, code = line_at(changed.file, changed.line, home), without_comment(changed.code)
        then = f"changed in place at {at} `{code}`"
        rewrite = out_of_place(code)
        hint = (f"write {at} out of place: `{rewrite}`" if rewrite else
                f"make {at} out of place, or clone() {name or 'the tensor'} before changing "
                "it")
        if fact.inplace_module is not None:
            module = fact.inplace_path or "the module it calls"
            then += (f", where {module} is {fact.inplace_module}(inplace=True), which writes "
                     "its output over its input")
            hint = (f"build {module} as {fact.inplace_module}(inplace=False) (in place is "
                    f"safe only where nothing saved its input), or clone() "
                    f"{name or 'the tensor'} before {at}")
    else:
        then = "changed in place before backward used it"
        hint = "use the out-of-place op (x = x + 1, not x += 1), or clone() it first"
    more = (f"; {at} changed {fact.others} more tensor{'s' if fact.others > 1 else ''} saved "
            "for backward the same way" if fact.others and changed is not None else "")
    return INPLACE_MODIFIED.finding(
        f"{what} was saved for backward and then {then}: backward needs the saved value{more}",
        tensor=name, hint=hint, file=None if changed is None else changed.file,
        line=None if changed is None else changed.line)


def _graph_freed(fact: GraphFreed, home: str | None = None) -> Finding:
    name, made = fact.tensor, fact.made
    where = f", {line_at(made.file, made.line, home)}" if made is not None else ""
    through = f"{name} (output of {fact.node_type}{where})" if name \
        else f"{fact.node_type}{where}"
    at = f" (line {fact.earlier_line} `{fact.earlier_code}`)" if fact.earlier_line else ""
    if fact.same_root:
        hint = ("pass retain_graph=True to the first backward() if the same graph is meant "
                "to be differentiated twice; else recompute the forward before each one")
    else:
        carried = name or "the shared tensor"
        detached = f" (`{name}.detach()`)" if name else ""  # code only for a name in it
        hint = (f"{carried} links the two passes: detach it where the first pass uses it "
                f"or where it is carried over{detached}, or recompute it; "
                "retain_graph=True on the first backward only if both passes are meant "
                "to go through it")
    return GRAPH_FREED.finding(
        f"pass {fact.number} reached {fact.shared} node(s) whose saved tensors pass "
        f"{fact.earlier}{at} already freed; it entered them through {through}",
        tensor=name, hint=hint, line=None if made is None else made.line,
        file=None if made is None else made.file)


def _stopped(fact: Stopped, home: str | None = None) -> Finding:
    return SCENARIO_STOPPED.finding(fact.message, hint=fact.hint, line=fact.line)


def _capped(fact: PassesCapped, home: str | None = None) -> Finding:
    if fact.by is not None:
        return PASSES_CAPPED.finding(
            f"stopped after {fact.limit} backward passes, at the next one ({fact.at}): "
            f"{fact.by} fired", hint=f"without --stop-on {fact.by} the script runs on",
            line=fact.line)
    return PASSES_CAPPED.finding(
        f"stopped after {fact.limit} backward passes, at the next one ({fact.at})",
        hint="without --passes the script runs to its end", line=fact.line)


def _no_root(fact: NoRoot, home: str | None = None) -> Finding:
    if fact.instead == "passes":
        return NO_GRAPH.finding(NO_GRAPH_LEAD + why_no_root(fact), line=fact.line,
                                tensor=fact.tensor)
    if fact.instead == "calls":
        return NO_GRAPH.finding(
            "no named tensor has a grad_fn, so there is no graph to show; "
            "the scenario's gradcheck and Function calls are reported instead",
            severity="info")
    return NO_GRAPH.finding(NO_GRAPH_LEAD + why_no_root(fact), severity="info", line=fact.line)


def _detached(fact: Detached, home: str | None = None) -> Finding:
    name, source = fact.tensor, fact.source
    return DETACHED.finding(
        f"{name} shares memory with {source} but is cut from its graph (made by "
        f".detach() or .data): no gradient flows from {name} back to {source}", tensor=name)


# one line per fact: a new kind of fact is a NamedTuple in model/facts.py and its phrasing here
_PHRASED: dict[type, Callable[[Any, str | None], Finding | None]] = {
    GradcheckRan: _gradcheck,
    SavedChanged: _saved_changed,
    GraphFreed: _graph_freed,
    Stopped: _stopped,
    PassesCapped: _capped,
    NoRoot: _no_root,
    PassCut: cuts.pass_cut,
    LeafCut: cuts.leaf_cut,
    CodeCut: cuts.code_cut,
    Detached: _detached,
    GradDiscarded: training.grad_discarded,
    StepWithoutGradient: training.step_without_gradient,
    ClipWithoutGradient: training.clip_without_gradient,
    NotOptimized: training.not_optimized,
    FrozenHeld: training.frozen_held,
    LeafCopied: training.leaf_copied,
    GraphKept: training.graph_kept,
    NonLeafGradRead: training.nonleaf_grad,
    NonFiniteBorn: births.born,
}
