"""The gradient-health rules as they were written column by column (gradtrace 6c958af, its
findings/health.py): the plain reference StepHealth, which reads one pass at a time, is
compared with in tests/test_health.py."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, lt, mul
from typing import NamedTuple

from gradtrace.findings.health import nan_hint as _nan_hint
from gradtrace.findings.health import stalled  # (a loss's test and the NaN hint: unchanged)
from gradtrace.findings.registry import (
    DEAD_PARAMETER,
    EXPLODING_GRADIENT,
    GRAD_ACCUMULATING,
    VANISHING_GRADIENT,
)
from gradtrace.model.records import Finding, LeafStep, Steps, Trace

FACTOR = 1e4  # vanishing and exploding: a gradient ten thousand times too small or too large
ACCUMULATING_RUN = 2  # kept passes in a row, after a step each: 3 passes without a reset
LOSS_STALLED = 0.1  # a loss that fell by less than 1/10 of its first value did not converge
MIN_PASSES = 2  # fewer backward passes than this: no health findings at all
STUCK_PASSES = 20  # passes with a loss it takes to call a vanishing gradient a warning

Column = Sequence[LeafStep | None]  # one leaf's .grad, pass by counted pass
Norms = list[float]  # a leaf's or module's .grad norm, pass by counted pass; 0.0: none usable


class LeafColumn(NamedTuple):
    """What the rules read of one leaf's column, each found in one pass over it."""

    norms: Norms  # its .grad norm per pass, 0.0 where it has no usable one (none, non-finite)
    finite: bool  # every .grad it had was finite
    kept: bool  # some pass added to a .grad left as it was by the previous pass


@dataclass(frozen=True, slots=True)
class Loop:
    """The counted (backward) passes of a run, as columns: what every rule reads."""

    passes: tuple[int, ...]  # index into trace.passes / steps rows of each counted pass
    stepped: tuple[int, ...]  # optimizer steps since the previous counted pass
    loss: tuple[float | None, ...]  # the pass's loss, None when unknown or not the only root
    leaves: tuple[str, ...]
    columns: tuple[Column, ...]  # [leaf][counted pass]
    leaf: tuple[LeafColumn, ...]  # [leaf]: its norms per counted pass and flags
    groups: dict[str, list[int]]  # module (or the leaf's own name) -> its leaves, in order
    lines: tuple[int | None, ...]  # the scenario line of each counted pass
    optimized: tuple[bool | None, ...]  # [leaf]: a stepping optimizer holds it (None: unknown)


def step_findings(trace: Trace, earlier: Sequence[Finding] = ()) -> list[Finding]:
    """Every gradient-health finding of trace's steps; earlier: the findings already made
    (a NaN finding is pointed to, not repeated)."""
    loop = _loop(trace)
    if loop is None:
        return []
    norms = {m: module_norms([loop.leaf[i].norms for i in idx]) for m, idx in loop.groups.items()}
    largest = list(map(max, *norms.values())) if len(norms) > 1 else next(iter(norms.values()))
    return [*accumulating(loop), *vanishing(loop, norms, largest),
            *exploding(loop, norms, largest, earlier), *dead(loop)]


def _loop(trace: Trace) -> Loop | None:
    steps = trace.steps
    if steps is None or not steps.leaves:
        return None
    rows = len(steps.grads)
    same = len(trace.passes) == rows
    counted: list[int] = []
    stepped: list[int] = []
    pending = 0
    for p in range(rows):
        pending += steps.optimizer_steps[p]
        if same and trace.passes[p].kind != "backward":
            continue  # autograd.grad leaves .grad as it was; its steps go to the next pass
        counted.append(p)
        stepped.append(pending)
        pending = 0
    if len(counted) < MIN_PASSES:
        return None
    loss = tuple(None if same and len(trace.passes[p].roots) > 1 else steps.loss[p]
                 for p in counted)
    lines = tuple(trace.passes[p].line if same else None for p in counted)
    columns = leaf_columns(steps, counted)
    return Loop(tuple(counted), tuple(stepped), loss, steps.leaves, columns,
                tuple(map(leaf_column, columns)), _groups(steps), lines,
                steps.optimized or (None,) * len(steps.leaves))


def leaf_columns(steps: Steps, passes: Sequence[int]) -> tuple[Column, ...]:
    """steps.grads turned into a column per leaf over passes (rows made before a leaf was
    named are shorter: None there)."""
    n = len(steps.leaves)
    rows = [steps.grads[p] for p in passes]
    rows = [r if len(r) == n else (*r, *(None,) * (n - len(r))) for r in rows]
    return tuple(zip(*rows, strict=True))


def _groups(steps: Steps) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, (leaf, module) in enumerate(zip(steps.leaves, steps.modules, strict=True)):
        groups.setdefault(module or leaf, []).append(i)
    return groups


def leaf_column(column: Column) -> LeafColumn:
    """The norms and flags of one leaf's column, transposed in C when every pass has a
    .grad (the usual case)."""
    if None not in column:
        norms, _, finite, kept = zip(*column, strict=True) if column else ((), (), (), ())
        if False not in finite and math.isfinite(sum(norms)):
            return LeafColumn(list(norms), True, True in kept)
    present = [g for g in column if g is not None]
    return LeafColumn(
        [g.norm if g is not None and g.finite and math.isfinite(g.norm) else 0.0
         for g in column],
        all(g.finite for g in present), any(g.kept for g in present))


def module_norms(leaves: Sequence[Norms]) -> Norms:
    """Per pass, the norm of a module's gradient: the root of the sum of its leaves' squared
    norms (0.0 when none of them has a usable one)."""
    if len(leaves) == 1:
        return leaves[0]
    total = list(map(mul, leaves[0], leaves[0]))
    for xs in leaves[1:]:
        total = list(map(add, total, map(mul, xs, xs)))
    return list(map(math.sqrt, total))


# --- grad-accumulating -------------------------------------------------------------------

def untouched(g: LeafStep | None, before: LeafStep | None) -> bool:
    """A pass that left the .grad as the pass before did: not kept, the same numbers, which
    are not zero (a reset and a zero gradient again look the same)."""
    return g is not None and before is not None and not g.kept and g.norm != 0 \
        and (g.norm, g.max_abs, g.finite) == (before.norm, before.max_abs, before.finite)


def accumulating_run(column: Column, stepped: Sequence[int]) -> tuple[int, int] | None:
    """The first run of counted passes (start, end), each of which added to the leaf's .grad
    as the pass before left it, not reset (clipped or unscaled in place, perhaps), over which
    the optimizer stepped before at least ACCUMULATING_RUN of them: zero_grad() forgotten,
    in a plain loop or an accumulation loop. Deliberate gradient accumulation keeps .grad
    only across passes with no optimizer step between them, and is not such a run."""
    start, end, crossed, waited = -1, -1, 0, 0
    for k in range(1, len(column) + 1):
        g = column[k] if k < len(column) else None
        if untouched(g, column[k - 1]):  # a pass over another model: the run goes on
            waited += stepped[k]
            continue
        steps, waited = (stepped[k] if g is not None else 0) + waited, 0
        if g is not None and g.kept and column[k - 1] is not None:
            if start < 0:
                start, crossed = k, 0
            crossed += steps > 0
            end = k  # (the passes over another model after it are not the run's)
        elif start >= 0:
            if crossed >= ACCUMULATING_RUN:
                return start, end
            start = -1
    return None


def accumulating(loop: Loop) -> list[Finding]:
    # a leaf no stepping optimizer holds is no optimizer's to reset (not-optimized says why)
    runs = {i: run for i, col in enumerate(loop.columns)
            if loop.leaf[i].kept and loop.optimized[i] is not False
            and (run := accumulating_run(col, loop.stepped)) is not None}
    if not runs:
        return []
    first = min(runs, key=lambda i: (runs[i][0], i))
    start, end = runs[first]
    name = loop.leaves[first]
    norms = loop.leaf[first].norms
    column = loop.columns[first]
    begin = start - 1  # the pass whose .grad the run added to (passes over another model
    while begin > 0 and untouched(column[begin], column[begin - 1]):  # left it so)
        begin -= 1
    span = f"passes {loop.passes[begin] + 1} to {loop.passes[end] + 1}"
    growth = f"its norm went from {_n(norms[begin])} to {_n(norms[end])}"
    # clipping rescales what it adds up to: the norm need not grow
    kept = "kept growing" if norms[end] > norms[begin] else "kept adding up"
    steps = sum(loop.stepped[begin + 1:end + 1])
    before = "before each pass" if steps == end - start + 1 else f"{steps} times over them"
    hint = ("call optimizer.zero_grad() before each backward (or after each step); to "
            "accumulate on purpose, step the optimizer only after the last micro-batch")
    if len(runs) == 1:
        message = (f"{name}{_where(loop, first)}: its .grad {kept} over {span} without "
                   f"being reset, while the optimizer stepped {before} ({growth}): "
                   "zero_grad() is missing or skipped, so each step applies the sum of the "
                   "gradients since the last reset")
    else:
        message = (f"{len(runs)} parameters' .grad {kept} without being reset while "
                   f"the optimizer stepped {before}, first {name}{_where(loop, first)} "
                   f"over {span} ({growth}): zero_grad() is missing or skipped, so each step "
                   "applies the sum of the gradients since the last reset; by module: "
                   f"{_by_module(loop, runs)}")
    return [GRAD_ACCUMULATING.finding(message, tensor=name, hint=hint,
                                      line=loop.lines[start])]


# --- vanishing-gradient and exploding-gradient -------------------------------------------

def low_share(norms: Norms, largest: Norms) -> tuple[int, int]:
    """(passes where the module has a non-zero gradient, those of them where it is below
    1/FACTOR of the largest module's), counted in C: a pass where the module has none
    (0.0) counts as low when the largest has one, so those are taken off again."""
    low = sum(map(lt, map(mul, norms, repeat(FACTOR)), largest))
    zeros, none_at_all = norms.count(0.0), largest.count(0.0)
    return len(norms) - zeros, low - (zeros - none_at_all)


def vanishing_from(norms: Norms, largest: Norms,
                   loss: Sequence[float | None]) -> tuple[int, str] | None:
    """The first counted pass from which a module's gradient counts as vanished, and how:
    "share", below 1/FACTOR of the largest module's in more than half of the passes where it
    has a non-zero gradient (at least MIN_PASSES of them); or "fell", more than FACTOR-fold
    from its first non-zero value to its last while the loss did not converge (a gradient
    that shrinks as the loss converges is not vanishing, whatever value it converges to)."""
    present, low = low_share(norms, largest)
    if present < MIN_PASSES:
        return None
    if 2 * low > present:
        return next(k for k, x in enumerate(norms) if 0 < x and x * FACTOR < largest[k]), \
            "share"
    a = next(k for k, x in enumerate(norms) if x > 0)
    b = len(norms) - 1 - next(k for k, x in enumerate(reversed(norms)) if x > 0)
    if norms[b] * FACTOR < norms[a] and stalled(loss[a], loss[b]):
        return next(k for k in range(a, b + 1) if 0 < norms[k] * FACTOR < norms[a]), "fell"
    return None


def vanishing(loop: Loop, norms: dict[str, Norms], largest: Norms) -> list[Finding]:
    found = {m: v for m, xs in norms.items()
             if (v := vanishing_from(xs, largest, loop.loss)) is not None}
    if not found:
        return []
    module = next(iter(found))  # the first in leaf order: nearest the input, as a rule
    k, how = found[module]
    xs = norms[module]
    name = _top_leaf(loop, module, k)
    at = f"pass {loop.passes[k] + 1}"
    if how == "share":
        present, low = low_share(xs, largest)
        what = (f"{module}'s gradient norm is below 1/{FACTOR:,.0f} of the largest module's "
                f"({_top_module(norms, k)}) in {low} of {present} passes, from {at} "
                f"({_n(xs[k])} against {_n(largest[k])})")
    else:
        a = next(j for j, x in enumerate(xs) if x > 0)
        what = (f"{module}'s gradient norm fell more than {FACTOR:,.0f}-fold, from "
                f"{_n(xs[a])} at pass {loop.passes[a] + 1} to {_n(xs[k])} at {at}, while "
                "the loss did not converge")
    who = name if name == module else f"{name} and the rest of {module}"
    more = f"; {len(found)} modules in all: {_names(list(found))}" if len(found) > 1 else ""
    known = [x for x in loop.loss if x is not None]
    # a warning once the run is long enough to tell a loss that does not converge (a few
    # steps of a big model barely move it)
    stuck = len(known) >= STUCK_PASSES and (how == "fell" or stalled(known[0], known[-1]))
    if stuck:  # not meant: the run does not learn
        more += (f"; the loss did not converge ({_n(known[0])} to {_n(known[-1])})"
                 if how == "share" else "")
    return [VANISHING_GRADIENT.finding(
        f"{what}: {who} barely learn{'s' if name == module else ''}{more}", tensor=name,
        line=loop.lines[k], severity="warning" if stuck else None,
        hint="saturating activations (sigmoid, tanh) or many layers between it and the loss: "
             "use ReLU/GELU, normalisation layers, residual connections, or a better "
             "initialisation")]


def exploding_from(norms: Norms, baseline: float) -> int | None:
    """The first counted pass at which a module's gradient norm is more than FACTOR times
    baseline (the largest module norm of the first pass with a gradient: a module's own
    first norm may be tiny for a reason, as after a zero-initialised layer)."""
    limit = baseline * FACTOR
    if baseline <= 0 or max(norms) <= limit:
        return None
    return next(k for k, x in enumerate(norms) if x > limit)


def exploding(loop: Loop, norms: dict[str, Norms], largest: Norms,
              earlier: Sequence[Finding]) -> list[Finding]:
    k0 = next((k for k, x in enumerate(largest) if x > 0), None)
    baseline = 0.0 if k0 is None else largest[k0]
    grown = {m: k for m, xs in norms.items() if (k := exploding_from(xs, baseline)) is not None}
    broken = _first_non_finite(loop)
    if not grown and broken is None:
        return []
    nan_hint = _nan_hint(earlier)
    if grown:
        assert k0 is not None
        module = min(grown, key=lambda m: (grown[m], -norms[m][grown[m]]))
        k = grown[module]
        name = _top_leaf(loop, module, k)
        mostly = f" (most of it {name}'s)" if name != module else ""
        message = (f"{module}'s gradient norm reached {_n(norms[module][k])} at pass "
                   f"{loop.passes[k] + 1}{mostly}, more than {FACTOR:,.0f} times the largest "
                   f"module's at pass {loop.passes[k0] + 1} ({_n(baseline)}, "
                   f"{_top_module(norms, k0)})")
        if broken is not None:
            kb, leaf = broken
            message += (f"; {loop.leaves[leaf]}'s .grad became non-finite at pass "
                        f"{loop.passes[kb] + 1}")
        if len(grown) > 1:
            message += f"; {len(grown)} modules in all: {_names(list(grown))}"
        hint = ("a learning rate too high, or a recurrence or product of layers that "
                "amplifies: clip the gradient (torch.nn.utils.clip_grad_norm_), lower the "
                "learning rate, or normalise")
        if broken is not None and nan_hint:
            hint += f"; {nan_hint}"
        return [EXPLODING_GRADIENT.finding(message, tensor=name, hint=hint, line=loop.lines[k])]
    assert broken is not None
    kb, leaf = broken
    name = loop.leaves[leaf]
    message = (f"{name}{_where(loop, leaf)}: its .grad became non-finite (NaN or Inf) at pass "
               f"{loop.passes[kb] + 1}, and an optimizer step spreads it into the weights")
    return [EXPLODING_GRADIENT.finding(
        message, tensor=name, line=loop.lines[kb],
        hint=nan_hint or "an overflow, log(0) or a division by zero: clip the gradient "
                         "(torch.nn.utils.clip_grad_norm_), lower the learning rate, or guard "
                         "the op with an epsilon")]


def _first_non_finite(loop: Loop) -> tuple[int, int] | None:
    """(counted pass, leaf) of the first .grad that is not finite (leaf order breaks ties)."""
    best: tuple[int, int] | None = None
    for i, col in enumerate(loop.columns):
        if loop.leaf[i].finite:
            continue
        k = next(k for k, g in enumerate(col) if g is not None and not g.finite)
        if best is None or k < best[0]:
            best = (k, i)
    return best


# --- dead-parameter ----------------------------------------------------------------------

def is_dead(column: Column, norms: Norms) -> bool:
    """A .grad in at least MIN_PASSES passes, and exactly zero in each (finite, norm 0): on
    the graph, yet nothing it does reaches the loss."""
    if max(norms) > 0:
        return False  # the usual case, told in C
    present = [g for g in column if g is not None]
    return len(present) >= MIN_PASSES and all(g.norm == 0 and g.finite for g in present)


def dead(loop: Loop) -> list[Finding]:
    found = [i for i, (col, leaf) in enumerate(zip(loop.columns, loop.leaf, strict=True))
             if is_dead(col, leaf.norms)]
    hint = ("a ReLU whose inputs are all negative (dead units: a lower learning rate, "
            "LeakyReLU or another initialisation), a mask or a multiplication by 0 on its way "
            "to the loss; requires_grad_(False) if it is meant to stay as it is")
    out = []
    for i in found if len(found) <= 3 else found[:1]:
        col = loop.columns[i]
        k = next(k for k, g in enumerate(col) if g is not None)
        held = len(col) - col.count(None)
        name = loop.leaves[i]
        if len(found) <= 3:
            message = (f"{name}{_where(loop, i)}: its .grad is exactly zero in all {held} "
                       f"passes that gave it one, from pass {loop.passes[k] + 1}: it is on the "
                       "graph but never learns")
        else:
            message = (f"{len(found)} parameters' .grad is exactly zero in every pass that "
                       f"gave them one, first {name}{_where(loop, i)} from pass "
                       f"{loop.passes[k] + 1} ({held} passes): they are on the graph but "
                       f"never learn; by module: {_by_module(loop, found)}")
        out.append(DEAD_PARAMETER.finding(message, tensor=name, hint=hint, line=loop.lines[k]))
    return out


# --- texts -------------------------------------------------------------------------------

def _n(x: float) -> str:
    return f"{x:.3g}"


def _where(loop: Loop, leaf: int) -> str:
    module = next(m for m, idx in loop.groups.items() if leaf in idx)
    return f" ({module})" if module != loop.leaves[leaf] else ""


def _top_module(norms: dict[str, Norms], k: int) -> str:
    return max(norms, key=lambda m: norms[m][k])


def _top_leaf(loop: Loop, module: str, k: int) -> str:
    """The module's leaf with the largest .grad norm at counted pass k (the first of them
    on a tie)."""
    return loop.leaves[max(loop.groups[module], key=lambda i: (loop.leaf[i].norms[k], -i))]


def _names(modules: list[str]) -> str:
    return ", ".join(modules[:6]) + (", …" if len(modules) > 6 else "")


def _by_module(loop: Loop, leaves: Iterable[int]) -> str:
    modules = {i: m for m, idx in loop.groups.items() for i in idx}
    counts = Counter(modules[i] for i in leaves)
    shown = ", ".join(f"{m} ({k})" if k > 1 else m for m, k in list(counts.items())[:6])
    return shown + (", …" if len(counts) > 6 else "")
