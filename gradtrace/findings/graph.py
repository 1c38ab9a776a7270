"""Findings read off a finished Trace (torch-free): unreached leaves, hooks, NaN origins."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from ..model.gradients import hook_replaced, same_gradient
from ..model.labels import line_at
from ..model.records import Edge, Finding, GradSummary, Node, Pass, Trace
from ..model.texts import grad_text, node_title, sent_text
from .health import step_findings
from .registry import (
    GRAD_CHANGED_AFTER,
    HOOK_CHANGED_GRADIENT,
    NAN_GRADIENT,
    NAN_VALUE,
    SCENARIO_STOPPED,
    UNREACHED_LEAF,
    UPDATED_COPY,
)

# The ops that put a value where a mask says: -inf from them is meant.
MASKING = ("MaskedFill", "Where", "IndexPut", "Fill")

# Why a node's local derivative blows up, by the op that met it.
NAN_CAUSES = {
    "SqrtBackward0": "sqrt has an infinite derivative at 0",
    "LogBackward0": "log has an infinite derivative at 0 (and none below)",
    "DivBackward0": "division by zero, or 0/0",
    "PowBackward0": "x ** p with p < 1 has an infinite derivative at x = 0",
    "PowBackward1": "x ** p with p < 1 has an infinite derivative at x = 0",
    "RsqrtBackward0": "rsqrt has an infinite derivative at 0",
    "ReciprocalBackward0": "1/x has an infinite derivative at 0",
    "AcosBackward0": "acos has an infinite derivative at ±1",
    "AsinBackward0": "asin has an infinite derivative at ±1",
    "NormBackward1": "the norm of a zero vector has no derivative",
    "LinalgVectorNormBackward0": "the norm of a zero vector has no derivative",
}


# What makes a non-finite value in the forward, by the op that made it.
FORWARD_CAUSES = {
    "LogBackward0": "log(0) is -inf and the log of a negative number NaN",
    "DivBackward0": "division by zero: x/0 is inf, 0/0 NaN",
    "SqrtBackward0": "the square root of a negative number is NaN",
    "ExpBackward0": "exp overflows to inf (above about 88 in float32)",
    "PowBackward0": "a negative base to a fractional power is NaN; 0 to a negative power inf",
    "ReciprocalBackward0": "1/0 is inf",
    "RsqrtBackward0": "rsqrt(0) is inf, of a negative number NaN",
    # more ops that make NaN or Inf of finite numbers (where a forward's NaN is born)
    "DivBackward1": "division by zero: x/0 is inf, 0/0 NaN",
    "DivBackward2": "division by zero: x/0 is inf, 0/0 NaN",
    "Log2Backward0": "log2(0) is -inf and the log of a negative number NaN",
    "Log10Backward0": "log10(0) is -inf and the log of a negative number NaN",
    "Log1PBackward0": "log1p(-1) is -inf, and below -1 NaN",
    "PowBackward1": "a negative base to a fractional power is NaN; 0 to a negative power inf",
    "PowBackward2": "a negative base to a fractional power is NaN; 0 to a negative power inf",
    "AcosBackward0": "acos outside [-1, 1] is NaN",
    "AsinBackward0": "asin outside [-1, 1] is NaN",
    "MaskedFillBackward0": "masked_fill wrote a non-finite value (-inf, for a mask): a row "
                           "masked everywhere makes softmax NaN",
}


def trace_findings(trace: Trace, updated: frozenset[str] = frozenset(),
                   handed: frozenset[str] = frozenset(),
                   reduced: dict[str, tuple[int, bool]] | None = None,
                   waiting: dict[str, tuple[str, ...]] | None = None,
                   carried: dict[int, frozenset[str] | None] | None = None,
                   fresh: frozenset[str] = frozenset()) -> list[Finding]:
    """Every finding that the Trace tells (updated: the leaves whose values changed during
    the run; handed: those given to torch.autograd.functional, which differentiates copies;
    reduced: those DistributedDataParallel averages: over how many ranks, and whether it
    waits for their gradients; waiting: those a named tensor no pass ran from uses, with
    the topmost such tensors; carried: by pass, the nodes whose saved forward values were
    not finite; fresh: those bound again after the last pass named them, as a checkpoint
    loaded for testing: no backward came after them)."""
    # where capture found the forward's NaN born (a fact), the named tensors add nothing
    born = [f for f in trace.findings if f.code == NAN_VALUE.name]
    nan = [*nan_origins(trace, carried), *([] if born else nan_values(trace))]
    lost = [name for name in unreached(trace) if name not in handed | fresh]
    reduced = reduced or {}
    waited = {name for name, (_, waits) in reduced.items() if waits}
    waiting = waiting or {}
    if any(f.code == SCENARIO_STOPPED.name for f in trace.findings):
        lost = [n for n in lost if n not in waiting]  # its backward did not come: no fault
    return [*unreached_leaves(trace, [n for n in lost if n not in updated | waited], waiting),
            *unreduced_parameters(trace, [n for n in lost if n in waited]),
            *updated_copies(trace, [n for n in lost if n in updated]),
            *hook_changes(trace), *module_hook_changes(trace),
            *changed_after(trace, reduced), *nan,
            *step_findings(trace, [*born, *nan])]


def nan_values(trace: Trace) -> list[Finding]:
    """The first named tensor whose values are not finite while its named inputs are: where
    a NaN or Inf is produced in the forward, not where it is passed on."""
    if all(t.value is None or t.value.finite for t in trace.tensors):
        return []  # the common case: no map of a big graph's nodes and edges
    values = {t.name: t.value for t in trace.tensors}
    by_node = {t.node: t.name for t in trace.tensors if t.node is not None}
    nodes, into = _around(trace, set(by_node))  # the named tensors' nodes only
    inputs = {dst: [e.src for e in edges] for dst, edges in into.items()}
    for t in trace.tensors:
        if t.value is None or t.value.finite:
            continue
        kind = "NaN" if t.value.norm != t.value.norm else "Inf"
        if t.is_leaf and not t.requires_grad:  # no optimizer's: the code's own data
            return [NAN_VALUE.finding(
                f"{t.name} holds {kind} values as the run ends (a tensor without grad: data, "
                "as the code made, loaded or wrote it)", tensor=t.name)]
        if t.is_leaf:
            if trace.steps is not None and any(trace.steps.optimizer_steps):
                # values read at the end of the run: an optimizer may have written them
                return [NAN_VALUE.finding(
                    f"{t.name} holds {kind} values at the end of the run (a leaf an "
                    "optimizer updated: a step with non-finite gradients writes them in)",
                    tensor=t.name)]
            return [NAN_VALUE.finding(f"{t.name} holds {kind} values from the start (a leaf: "
                                      "the data it was made from)", tensor=t.name)]
        # a tensor whose node the graph does not show (made after the last pass): no inputs
        node = None if t.node is None else nodes.get(t.node)
        if _a_mask(t.value, node):
            continue  # -inf put there on purpose: an attention mask, softmax makes it 0
        named_inputs = [by_node[src] for src in inputs.get(t.node or "", ()) if src in by_node]
        if any((v := values[n]) is not None and not v.finite for n in named_inputs):
            continue  # passed on from an input: its producer comes first or is unnamed
        made = "" if node is None else f" (made by {node.type}" + (
            f" at line {node.source.line} `{node.source.code}`)" if node.source else ")")
        given = f"; its inputs {', '.join(named_inputs)} are finite" if named_inputs else ""
        return [NAN_VALUE.finding(
            f"{t.name}{made} is the first named tensor with {kind} values{given}",
            tensor=t.name, node=t.node,
            hint=FORWARD_CAUSES.get(node.type if node else "", "check that op's inputs "
                                    "(clamp them, or add a small epsilon)"))]
    return []


def _a_mask(value: GradSummary, node: Node | None) -> bool:
    """Whether a tensor's non-finite values are -inf only, put there by a masking op (or by
    an op the graph does not show): `scores.masked_fill(mask, float("-inf"))`."""
    only_minus_inf = value.min == -math.inf and value.max is not None and \
        math.isfinite(value.max)
    return only_minus_inf and (node is None or node.type.startswith(MASKING))


def unreached(trace: Trace) -> list[str]:
    """The leaves that require grad but that no output or pass reaches (none when there is
    no graph at all: the no-graph finding says so)."""
    if not trace.nodes:
        return []
    return [t.name for t in trace.tensors
            if t.is_leaf and t.requires_grad and t.node is None and t.grad is None]


def unreached_leaves(trace: Trace, unreached_names: list[str],
                     waiting: dict[str, tuple[str, ...]] | None = None) -> list[Finding]:
    """Leaves that require grad but that no output or pass reaches: their .grad stays None
    (waiting: those a named tensor's graph uses, one no backward pass ran from)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in unreached_names:
        groups.setdefault((waiting or {}).get(name, ()), []).append(name)
    return [f for outputs, names in groups.items() for f in _unreached(trace, names, outputs)]


def _unreached(trace: Trace, names: list[str], users: tuple[str, ...]) -> list[Finding]:
    """One group of unreached leaves: used by no output, or only by users, named tensors no
    backward pass ran from."""
    if users:
        shown = " or ".join(users[:3]) + (", …" if len(users) > 3 else "")
        why = f" and {shown} depends on {{}}, but no backward pass ran from {shown}"
        root = users[0]
        hint = f"call {root}.backward() or use {root} in the loss; --root {root} shows its graph"
    else:
        why, root = ", but no output depends on {}", "NAME"
        hint = "use it in the expression, or pick a root that does (--root NAME)"
    if len(names) > 3:  # e.g. a module's parameters: one finding, not a wall
        shown, more = _by_module(trace, names)
        return [UNREACHED_LEAF.finding(
                        f"{len(names)} tensors require grad{why.format('them')}, so "
                        f"their .grad stays None; by module: {shown}{more}",
                        tensor=names[0],  # the first: where its module is bound is the line
                        hint="a module whose output does not reach the loss (an unused "
                        "branch: DDP's find_unused_parameters case), or pick a root that "
                        f"uses it (--root {root})")]
    return [UNREACHED_LEAF.finding(
                    f"{name} requires grad{why.format('it')}: its .grad stays None",
                    tensor=name, hint=hint)
            for name in names]


def unreduced_parameters(trace: Trace, names: list[str]) -> list[Finding]:
    """Parameters of a DistributedDataParallel model that no pass reaches: DDP waits for their
    gradients, and its next step raises. One finding for them all."""
    if not names:
        return []
    shown, more = _by_module(trace, names)
    return [UNREACHED_LEAF.finding(
        f"{len(names)} parameter(s) of a DistributedDataParallel model get no gradient, first "
        f"{names[0]}; by module: {shown}{more}. DDP waits for every parameter's gradient, so "
        "the next step raises 'Expected to have finished reduction in the prior iteration'",
        tensor=names[0], hint="use them in forward's output, or pass "
        "find_unused_parameters=True to DistributedDataParallel (it then looks for unused "
        "parameters after every forward, which costs time)")]


def updated_copies(trace: Trace, names: list[str]) -> list[Finding]:
    """Leaves no graph reaches whose values changed anyway (an EMA or target copy): info,
    one finding for them all."""
    if not names:
        return []
    shown, more = _by_module(trace, names)
    return [UPDATED_COPY.finding(
        f"{len(names)} tensor(s) require grad, but no output depends on them, and their "
        f"values changed without autograd (under no_grad or through .data), first {names[0]}; "
        f"by module: {shown}{more}: an EMA or target copy?", tensor=names[0],
        hint="if it is a copy that never learns, .requires_grad_(False) on it says so")]


def _by_module(trace: Trace, names: list[str]) -> tuple[str, str]:
    """The modules of names, with counts (at most six), and "…" when there are more."""
    wanting = [t.name for t in trace.tensors if t.is_leaf and t.requires_grad]
    unused = set(names)
    by_module = Counter(_unused_module(n, unused, wanting) for n in names)
    shown = ", ".join(f"{m} ({k})" if k > 1 else m for m, k in list(by_module.items())[:6])
    return shown, ", …" if len(by_module) > 6 else ""


def _unused_module(name: str, unused: set[str], wanting: list[str]) -> str:
    """The outermost module path of name all of whose tensors that require grad (wanting)
    are unused (model.aux for model.aux.0.weight), else name's own module."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i]) + "."
        inside = [n for n in wanting if n.startswith(prefix)]
        if inside and unused.issuperset(inside):
            return prefix[:-1]
    return ".".join(parts[:-1]) or name


def hook_changes(trace: Trace) -> list[Finding]:
    """Edges whose gradient arrived different from what was sent: a hook changed it."""
    changed: list[tuple[int, Edge, GradSummary, GradSummary]] = []
    for i, p in enumerate(trace.passes, 1):
        for e in trace.edges if p.flow else ():
            sent, received = p.sent(e), p.received(e)
            # the flow shares one summary between the ends of an unchanged edge: the common
            # case, told apart without a comparison
            if sent is not received and sent is not None and received is not None \
                    and not same_gradient(sent, received):
                changed.append((i, e, sent, received))
    if not changed:
        return []
    fan_in = Counter((e.src, e.src_output) for e in trace.edges)
    nodes = {n.id: n for n in trace.nodes}
    return [HOOK_CHANGED_GRADIENT.finding(
                f"pass {i}: a hook changed the gradient into {node_title(nodes[e.src])} "
                f"({e.src}): {grad_text(sent)} was sent, {grad_text(received)} arrived",
                tensor=nodes[e.src].tensor, node=e.src)
            for i, e, sent, received in changed
            if fan_in[(e.src, e.src_output)] == 1]  # else what arrived is a sum


def changed_after(trace: Trace, reduced: dict[str, tuple[int, bool]]) -> list[Finding]:
    """Leaves whose .grad after a pass is not the gradient their AccumulateGrad received, when
    they had none before (nothing to add it to): it was changed after autograd delivered it.
    One finding for the leaves DDP averages, one for the others, told by the first."""
    accumulates = {n.tensor: n for n in trace.nodes if n.type == "AccumulateGrad" and n.tensor}
    changed: dict[str, list[tuple[int, Pass, GradSummary, GradSummary]]] = {}
    for i, p in enumerate(trace.passes, 1):
        for change in p.grad_changes if p.flow else ():
            node = accumulates.get(change.tensor)
            flow = None if node is None else p.flow.get(node.id)
            arrived = flow.grad_outputs[0] if flow is not None and flow.grad_outputs else None
            if arrived is not None and change.after is not None \
                    and (change.before is None or change.before.norm == 0) \
                    and not same_gradient(arrived, change.after):
                changed.setdefault(change.tensor, []).append((i, p, arrived, change.after))
    findings = []
    worlds = {name: world for name, (world, _) in reduced.items()}
    for world in dict.fromkeys(worlds.get(name) for name in changed):
        names = [name for name in changed if worlds.get(name) == world]
        (i, p, arrived, after), *more = changed[names[0]]
        why = f"DistributedDataParallel averaged it over {world} ranks (an allreduce in its " \
            "reducer's hook): the graph shows this rank's own gradient, .grad the mean" \
            if world else "a post-accumulate-grad hook or a communication hook rewrote it"
        later = f" (and in {len(more)} later pass(es))" if more else ""
        others = f"; so were {len(names) - 1} more: {', '.join(names[1:6])}" \
            + (", …" if len(names) > 6 else "") if len(names) > 1 else ""
        findings.append(GRAD_CHANGED_AFTER.finding(
            f"pass {i}{later}: {names[0]}.grad is {grad_text(after)}, not the "
            f"{grad_text(arrived)} that reached its AccumulateGrad "
            f"({accumulates[names[0]].id}): {why}{others}",
            tensor=names[0], node=accumulates[names[0]].id, line=p.line,
            hint="every rank's own gradients: `-o trace-{rank}.json` under torchrun, then "
            "`gradtrace diff trace-0.json trace-1.json`" if world else None))
    return findings


def module_hook_changes(trace: Trace) -> list[Finding]:
    """Nodes whose module backward hook changed what they send (guided backprop's clamp): the
    tree shows the hook's gradient there, not the node's own derivative. One per node."""
    hooked = [n for n in trace.nodes if n.hooks]
    changed: dict[str, list[int]] = {}
    first: dict[str, tuple[tuple[GradSummary | None, ...], tuple[GradSummary | None, ...]]] = {}
    for i, p in enumerate(trace.passes, 1):
        for node in hooked:
            flow = p.flow.get(node.id)
            own = None if flow is None else hook_replaced(node, flow)
            if flow is not None and own is not None:
                changed.setdefault(node.id, []).append(i)
                first.setdefault(node.id, (own, flow.grad_inputs))
    nodes = {n.id: n for n in hooked}
    findings = []
    for node_id, passes in changed.items():
        node, (own, sent) = nodes[node_id], first[node_id]
        more = f" (and in {len(passes) - 1} later pass(es))" if len(passes) > 1 else ""
        findings.append(HOOK_CHANGED_GRADIENT.finding(
            f"pass {passes[0]}{more}: module hook {', '.join(node.hooks)} changed what "
            f"{node_title(node)} ({node_id}) sends: {sent_text(own)} became "
            f"{sent_text(sent)}", tensor=node.tensor, node=node_id,
            hint="the gradients below it are the hook's, not the chain rule's (guided "
            "backprop's intent); remove the hook to see the plain gradient"))
    return findings


def _finite(g: GradSummary | None) -> bool:
    return g is None or g.finite


def _all_finite(p: Pass) -> bool:
    """Whether every gradient of p's flow is finite (or None)."""
    return all(all(map(_finite, f.grad_outputs)) and all(map(_finite, f.grad_inputs))
               for f in p.flow.values())


def nan_origins(trace: Trace, carried: dict[int, frozenset[str] | None] | None = None
                ) -> list[Finding]:
    """Per pass, the first node (in backward order) that received finite gradients and sent
    a non-finite one; a loop's other passes that repeat the same origin are told in one
    finding, not one by one (carried: by pass, the nodes whose saved forward
    values were not finite: what they send carries the forward's NaN)."""
    carried = carried or {}
    told: dict[str | None, tuple[int, Finding]] = {}  # origin node -> (the pass told, its
    # finding): the first, unless a later one asked whether the forward carried it
    passes: dict[str | None, list[int]] = {}  # … and every pass with that origin
    for number, found in _each_pass_nan_origin(trace, carried):
        passes.setdefault(found.node, []).append(number)
        kept = told.get(found.node)
        if kept is None or _unasked(carried, kept[0]) and not _unasked(carried, number):
            told[found.node] = (number, found)
    # only the passes recorded in detail have a flow: a light one's is not known
    return [replace(f, message=f"{f.message} (the same in {_others(others)} recorded in "
                    "detail)") if (others := [n for n in passes[node] if n != number]) else f
            for node, (number, f) in told.items()]


def light_run(light_not_finite: Callable[[int], bool], end: int) -> int | None:
    """The first pass (1-based) of the unbroken run of light passes whose rows read a .grad
    not finite, just before the 0-based row `end` (None: the pass before is not one)."""
    row = end
    while row > 0 and light_not_finite(row - 1):
        row -= 1
    return row + 1 if row < end else None


def _after_light(found: Finding, i: int, since: int | None) -> Finding:
    """found, of pass i in detail, where the NaN came from before its backward: told as the
    first pass in detail after light pass `since`, where the .grads turned non-finite."""
    return found if since is None else replace(found, message=(
        f"{found.message} (pass {i} is the first pass in detail since pass {since}, where a "
        f".grad turned non-finite: `gradtrace show SCRIPT --pass {since}` records that one)"))


def _unasked(carried: dict[int, frozenset[str] | None], number: int) -> bool:
    return number in carried and carried[number] is None


def _others(passes: list[int]) -> str:
    """'pass 7', or '3 other passes, 7–9'."""
    return f"pass {passes[0]}" if len(passes) == 1 else \
        f"{len(passes)} other passes, {passes[0]}–{passes[-1]}"


def _each_pass_nan_origin(trace: Trace, carried: dict[int, frozenset[str] | None]
                          ) -> list[tuple[int, Finding]]:
    """(pass number, finding) for each pass whose gradients turned non-finite."""
    findings: list[tuple[int, Finding]] = []
    rows = trace.steps.grads if trace.steps is not None else ()

    def light_not_finite(row: int) -> bool:
        return row < len(rows) and trace.passes[row].light \
            and not all(g is None or g.finite for g in rows[row])

    for i, p in enumerate(trace.passes, 1):
        found = pass_nan_origin(i, p, trace, carried.get(i, frozenset()),
                                light_run(light_not_finite, i - 1) if p.flow else None)
        if found is not None:
            findings.append((i, found))
    return findings


def pass_nan_origin(i: int, p: Pass, trace: Trace, carried: frozenset[str] | None,
                    since: int | None = None) -> Finding | None:
    """Where pass i's first non-finite gradient was born (None: its flow is finite), on
    trace's graph (carried: its nodes whose saved forward values were not finite; None: not
    asked, a watched pass on a GPU; since: see light_run, told of a NaN from before)."""
    if _all_finite(p):  # the common case, told without sorting 100,000s of entries
        return None
    for node_id, f in sorted(p.flow.items(), key=lambda kv: kv[1].position):
        if not all(_finite(g) for g in f.grad_outputs):
            if f.position == 0:
                return _after_light(NAN_GRADIENT.finding(
                    f"pass {i}: the gradient given to backward is already non-finite",
                    node=node_id), i, since)
            return None
        bad = [k for k, g in enumerate(f.grad_inputs) if not _finite(g)]
        if bad:
            if carried is None:
                return _after_light(_unasked_nan(i, p, node_id, bad, trace), i, since)
            # born here, of this op's derivative: what came before is not its cause
            return _after_light(_forward_nan(i, p, node_id, bad, trace), i, since) \
                if node_id in carried else _nan_finding(i, p, node_id, bad, trace)
    return None


def _around(trace: Trace, ids: set[str]) -> tuple[dict[str, Node], dict[str, list[Edge]]]:
    """The nodes ids and their inputs, by id, and the edges into each of ids: two scans of
    the graph, no map of all of it (a million-node graph's would take a second)."""
    inputs: dict[str, list[Edge]] = {}
    for e in trace.edges:
        if e.dst in ids:
            inputs.setdefault(e.dst, []).append(e)
    wanted = ids | {e.src for edges in inputs.values() for e in edges}
    return {n.id: n for n in trace.nodes if n.id in wanted}, inputs


def _nan_finding(i: int, p: Pass, node_id: str, bad: list[int], trace: Trace) -> Finding:
    node, named, sent, to = _nan_sent(i, p, node_id, bad, trace)
    return NAN_GRADIENT.finding(
        f"pass {i}: the first non-finite gradient is born at {node.type}{named} ({node.id}): "
        f"it received finite gradients and sent {sent} to {to}",
        tensor=node.tensor, node=node.id,
        hint=NAN_CAUSES.get(node.type, "its local derivative is infinite or undefined at "
                                       "this input"),
    )


def _unasked_nan(i: int, p: Pass, node_id: str, bad: list[int], trace: Trace) -> Finding:
    """The first non-finite gradient of a watched pass on a GPU whose saved forward values
    were not read (that waits for the device): the forward or the op's derivative made it."""
    node, named, sent, to = _nan_sent(i, p, node_id, bad, trace)
    return NAN_GRADIENT.finding(
        f"pass {i}: the first non-finite gradient comes out of {node.type}{named} "
        f"({node.id}): it received finite gradients and sent {sent} to {to}; whether the "
        "forward values it saved were already NaN was not asked (a watched run does not wait "
        "for its GPU): the forward made it, or this op's derivative",
        tensor=node.tensor, node=node.id,
        hint="a nan-value finding names the forward's NaN when there is one; else " +
        NAN_CAUSES.get(node.type, "its local derivative is infinite or undefined at this "
                                  "input"))


def _forward_nan(i: int, p: Pass, node_id: str, bad: list[int], trace: Trace) -> Finding:
    """The first non-finite gradient of a pass sent by a node whose saved forward values
    were not finite: it passes on the forward's NaN; its derivative is not at fault."""
    node, named, sent, to = _nan_sent(i, p, node_id, bad, trace)
    born = next((f for f in trace.findings if f.code == NAN_VALUE.name), None)
    where = "" if born is None or born.line is None else \
        f" at {line_at(born.file or '', born.line, trace.scenario)}"
    return NAN_GRADIENT.finding(
        f"pass {i}: the first non-finite gradient comes out of {node.type}{named} "
        f"({node.id}): it received finite gradients and sent {sent} to {to}, because the "
        "forward values it saved were already NaN or Inf: the NaN came from the forward, "
        "not from its derivative", tensor=node.tensor, node=node.id,
        hint=f"fix the forward where the NaN was born{where} (the nan-value finding); this "
        "op only carries it")


def _nan_sent(i: int, p: Pass, node_id: str, bad: list[int], trace: Trace
              ) -> tuple[Node, str, str, str]:
    """The node, `(its tensor, line N)`, what it sent that was not finite, and to whom."""
    nodes, inputs = _around(trace, {node_id})
    node = nodes[node_id]
    around = [f"[{e.dst_input}] {node_title(nodes[e.src])}"
              for e in inputs.get(node.id, ()) if e.dst_input in bad]
    sent = ", ".join(grad_text(p.flow[node.id].grad_inputs[k]) for k in bad)
    about = [f for f in (node.tensor, node.source and f"line {node.source.line}") if f]
    named = f" ({', '.join(about)})" if about else ""
    return node, named, sent, ", ".join(around) or "its inputs"
