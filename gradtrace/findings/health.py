"""Gradient-health findings (torch-free): a .grad that kept growing because zero_grad() was
forgotten, gradients that vanish or explode, and parameters whose gradient is exactly zero in
every pass.

They read the steps' rows (each named leaf's .grad norm after each pass) one pass at a time,
keeping a few numbers per leaf and module, never the rows: `watch` judges a run of any length
as it goes, in memory that does not grow with it. Only backward passes count (autograd.grad
leaves .grad as it was); none fires with fewer than two of them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..model.records import Finding, LeafStep, Trace
from .registry import DEAD_PARAMETER, EXPLODING_GRADIENT, GRAD_ACCUMULATING, VANISHING_GRADIENT

FACTOR = 1e4  # vanishing and exploding: a gradient ten thousand times too small or too large
ACCUMULATING_RUN = 2  # kept passes in a row, after a step each: 3 passes without a reset
LOSS_STALLED = 0.1  # a loss that fell by less than 1/10 of its first value did not converge
MIN_PASSES = 2  # fewer backward passes than this: no health findings at all
STUCK_PASSES = 20  # passes with a loss it takes to call a vanishing gradient a warning


@dataclass(frozen=True, slots=True)
class At:
    """A counted pass as a finding names it: its pass (0-based, of all passes), its scenario
    line, a norm there and the leaf (or module) with the largest one there."""

    k: int  # the counted pass
    p: int
    line: int | None
    norm: float = 0.0
    top: str = ""


@dataclass(slots=True)
class Run:
    """A leaf's run of kept passes (see StepHealth.add): from the pass before its first to
    its last, and the optimizer steps over it."""

    start: At  # the pass before the run's first (its norm: where the growth starts)
    line: int | None  # the run's first pass's line
    first: int  # the run's first counted pass
    end: At  # its last pass so far
    crossed: int = 0  # passes of it the optimizer stepped (or called its closure) before
    stepped: int = 0  # optimizer steps over it
    called: int = 0  # passes of it in a new call of an optimizer step's closure (L-BFGS)


@dataclass(slots=True)
class ModuleHealth:
    """What the vanishing and exploding rules keep of one module's norms."""

    leaves: list[int]
    present: int = 0  # passes with a non-zero norm
    low: int = 0  # those below 1/FACTOR of the largest module's
    share: At | None = None  # the first of those (top: its leaf with the largest norm)
    share_largest: float = 0.0  # the largest module's norm there
    share_module: str = ""  # and its name
    first: At | None = None  # its first non-zero norm
    first_loss: float | None = None
    last_loss: float | None = None  # at its last non-zero norm
    last_norm: float = 0.0
    fell: At | None = None  # the first pass below 1/FACTOR of its first norm
    grown: At | None = None  # the first above FACTOR times the baseline


@dataclass(slots=True)
class LeafHealth:
    """What the accumulating, exploding and dead rules keep of one leaf's column."""

    present: int = 0  # passes with a .grad
    first: At | None = None  # the first of them
    zero: bool = True  # every .grad it had was finite and exactly zero
    before: bool = False  # the last pass gave it a .grad
    norm: float = 0.0  # its usable norm in the last pass (0.0: none)
    run: Run | None = None  # the run of kept passes going on
    found: Run | None = None  # its first run long enough to tell
    last: LeafStep | None = None  # its .grad in the last pass
    touched: At | None = None  # the last pass that did not leave its .grad as it was
    waited: int = 0  # optimizer steps over the passes since it that did


@dataclass
class StepHealth:
    """The gradient-health rules over a loop's counted passes, fed one at a time (add), told
    at any point (findings): what the batch of every pass so far would find."""

    leaves: list[str] = field(default_factory=list)
    groups: dict[str, ModuleHealth] = field(default_factory=dict)  # module (or leaf) -> it
    counted: int = 0
    _leaf: list[LeafHealth] = field(default_factory=list, init=False)
    # (p, line) of the last counted pass
    _last: tuple[int, int | None] = field(default=(0, None), init=False)
    # the first pass with a non-zero gradient (top: its module)
    _baseline: At | None = field(default=None, init=False)
    # the first .grad not finite, and its leaf
    _broken: tuple[At, int] | None = field(default=None, init=False)
    # the loss as first and last known, and how many passes knew it
    _losses: tuple[float | None, float | None, int] = field(default=(None, None, 0), init=False)
    _call: int | None = field(default=None, init=False)  # the last counted pass's closure call

    def extend(self, leaves: Sequence[str], modules: Sequence[str | None]) -> None:
        """Leaves first seen (their module each): new columns, None in the passes before."""
        for leaf, module in zip(leaves[len(self.leaves):], modules[len(self.leaves):],
                                strict=True):
            self.groups.setdefault(module or leaf, ModuleHealth([])).leaves.append(
                len(self.leaves))
            self.leaves.append(leaf)
            self._leaf.append(LeafHealth())

    def add(self, p: int, row: Sequence[LeafStep | None], loss: float | None, stepped: int,
            line: int | None, call: int | None = None) -> None:
        """Counted pass p (0-based, of all passes): its row (a shorter one: no .grad after
        it), its loss (None: unknown, or not the only root), the optimizer steps since the
        counted pass before, its scenario line and the optimizer closure call it ran in."""
        k = self.counted
        # a new call of a step's closure after one: the optimizer took the last call's .grad
        called = call is not None and self._call is not None and call != self._call
        self._call = call
        norms = self._leaves_at(k, p, row, stepped, line, called)
        modules = {m: _module_norm(h.leaves, norms) for m, h in self.groups.items()}
        largest = max(modules.values(), default=0.0)
        if self._baseline is None and largest > 0:
            self._baseline = At(k, p, line, largest, _largest_of(modules))
        if loss is not None:
            first, _, known = self._losses
            self._losses = (loss if not known else first, loss, known + 1)
        limit = self._baseline.norm * FACTOR if self._baseline is not None else math.inf
        for m, h in self.groups.items():
            x = modules[m]
            if x == 0:  # no usable gradient: the rules count passes with one
                continue
            h.present += 1
            if x * FACTOR < largest:
                h.low += 1
                if h.share is None:
                    h.share = At(k, p, line, x, self._top_leaf(h, norms))
                    h.share_largest, h.share_module = largest, _largest_of(modules)
            if h.first is None:
                h.first, h.first_loss = At(k, p, line, x), loss
            elif h.fell is None and x * FACTOR < h.first.norm:
                h.fell = At(k, p, line, x, self._top_leaf(h, norms))
            h.last_norm, h.last_loss = x, loss
            if h.grown is None and x > limit:
                h.grown = At(k, p, line, x, self._top_leaf(h, norms))
        self.counted += 1
        self._last = (p, line)

    def _leaves_at(self, k: int, p: int, row: Sequence[LeafStep | None], stepped: int,
                   line: int | None, called: bool) -> list[float]:
        """Each leaf's usable norm in counted pass k (0.0: no .grad, or not finite), its
        column's flags and runs brought up to date."""
        norms: list[float] = []
        for i, h in enumerate(self._leaf):
            g = row[i] if i < len(row) else None
            norm = 0.0
            if g is not None:
                h.present += 1
                if h.first is None:
                    h.first = At(k, p, line)
                if g.finite and math.isfinite(g.norm):
                    norm = g.norm
                if not (g.norm == 0 and g.finite):
                    h.zero = False
                if not g.finite and self._broken is None:
                    self._broken = (At(k, p, line), i)
            if untouched(g, h.last):  # another model's pass (a GAN's critic): a run goes
                h.waited += stepped  # on over it, its optimizer steps counted at the next
            else:
                if k and h.found is None and (h.run is not None or g is not None and g.kept):
                    self._kept(h, g, At(k, p, line, norm), stepped + h.waited, called)
                h.waited, h.touched = 0, At(k, p, line, norm)
            h.before, h.norm, h.last = g is not None, norm, g
            norms.append(norm)
        return norms

    def _kept(self, h: LeafHealth, g: LeafStep | None, at: At, stepped: int,
              called: bool) -> None:
        """A leaf's run of passes each of which added to the .grad the pass before left, not
        reset: a run over which the optimizer stepped (or called a step's closure again)
        before at least ACCUMULATING_RUN of them is zero_grad() forgotten (deliberate
        accumulation steps only between runs)."""
        if g is not None and g.kept and h.before:
            if h.run is None:  # from the pass that left what this one added to
                h.run = Run(h.touched or At(at.k - 1, self._last[0], self._last[1], h.norm),
                            at.line, at.k, at)
            h.run.crossed += stepped > 0 or called
            h.run.stepped += stepped
            h.run.called += called
            h.run.end = at
        elif h.run is not None:
            if h.run.crossed >= ACCUMULATING_RUN:
                h.found = h.run
            h.run = None

    def _top_leaf(self, h: ModuleHealth, norms: list[float]) -> str:
        """The module's leaf with the largest norm (the first of them on a tie)."""
        return self.leaves[max(h.leaves, key=lambda i: (norms[i], -i))]

    def findings(self, earlier: Sequence[Finding] = (),
                 optimized: Sequence[bool | None] = (),
                 scale_free: Sequence[bool | None] = ()) -> list[Finding]:
        """Every health finding of the passes so far; earlier: the findings already made (a
        NaN finding is pointed to, not repeated); optimized and scale_free: per leaf, whether
        a stepping optimizer holds it, and one whose update the gradient's size does not grow
        (Steps.scale_free; None or none given: unknown)."""
        if self.counted < MIN_PASSES or not self.leaves:
            return []
        return [*self._accumulating(optimized), *self._vanishing(scale_free),
                *self._exploding(earlier), *self._dead()]

    # --- grad-accumulating ---------------------------------------------------------------

    def _accumulating(self, optimized: Sequence[bool | None]) -> list[Finding]:
        # a leaf no stepping optimizer holds is no optimizer's to reset (not-optimized says
        # why); a run still going counts as it stands
        runs = {i: run for i, h in enumerate(self._leaf)
                if (optimized[i] if i < len(optimized) else None) is not False
                and (run := h.found or (h.run if h.run is not None
                                        and h.run.crossed >= ACCUMULATING_RUN else None))}
        if not runs:
            return []
        first = min(runs, key=lambda i: (runs[i].first, i))
        run = runs[first]
        name = self.leaves[first]
        span = f"passes {run.start.p + 1} to {run.end.p + 1}"
        growth = f"its norm went from {_n(run.start.norm)} to {_n(run.end.norm)}"
        # clipping rescales what it adds up to: the norm need not grow
        kept = "kept growing" if run.end.norm > run.start.norm else "kept adding up"
        over, why, hint = _accumulated(run)
        if len(runs) == 1:
            message = (f"{name}{self._where(first)}: its .grad {kept} over {span} without "
                       f"being reset, {over} ({growth}): {why}")
        else:
            message = (f"{len(runs)} parameters' .grad {kept} without being reset {over}, "
                       f"first {name}{self._where(first)} over {span} ({growth}): {why}; by "
                       f"module: {self._by_module(runs)}")
        return [GRAD_ACCUMULATING.finding(message, tensor=name, hint=hint, line=run.line)]

    # --- vanishing-gradient and exploding-gradient ---------------------------------------

    def _vanishing(self, scale_free: Sequence[bool | None]) -> list[Finding]:
        # a module stepped by Adam's family learns at the pace of its gradient's own size,
        # however small next to another module's: only one stepped by SGD barely learns
        found = {m: how for m, h in self.groups.items() if (how := _vanished(h)) is not None
                 and not all(i < len(scale_free) and scale_free[i] for i in h.leaves)}
        if not found:
            return []
        module, how = next(iter(found.items()))  # the first in leaf order: nearest the input
        h = self.groups[module]
        if how == "share":
            at = h.share
            assert at is not None
            what = (f"{module}'s gradient norm is below 1/{FACTOR:,.0f} of the largest "
                    f"module's ({h.share_module}) in {h.low} of {h.present} passes, from pass "
                    f"{at.p + 1} ({_n(at.norm)} against {_n(h.share_largest)})")
        else:
            at = h.fell
            assert at is not None and h.first is not None
            what = (f"{module}'s gradient norm fell more than {FACTOR:,.0f}-fold, from "
                    f"{_n(h.first.norm)} at pass {h.first.p + 1} to {_n(at.norm)} at pass "
                    f"{at.p + 1}, while the loss did not converge")
        name = at.top
        who = name if name == module else f"{name} and the rest of {module}"
        more = f"; {len(found)} modules in all: {_names(list(found))}" if len(found) > 1 else ""
        first, last, known = self._losses
        # a warning once the run is long enough to tell a loss that does not converge (a
        # few steps of a big model barely move it)
        stuck = known >= STUCK_PASSES and (how == "fell" or stalled(first, last))
        if stuck and how == "share":  # not meant: the run does not learn
            assert first is not None and last is not None
            more += f"; the loss did not converge ({_n(first)} to {_n(last)})"
        return [VANISHING_GRADIENT.finding(
            f"{what}: {who} barely learn{'s' if name == module else ''}{more}", tensor=name,
            line=at.line, severity="warning" if stuck else None,
            hint="saturating activations (sigmoid, tanh) or many layers between it and the "
                 "loss: use ReLU/GELU, normalisation layers, residual connections, or a "
                 "better initialisation")]

    def _exploding(self, earlier: Sequence[Finding]) -> list[Finding]:
        grown = {m: h.grown for m, h in self.groups.items() if h.grown is not None}
        if not grown and self._broken is None:
            return []
        hint_nan = nan_hint(earlier)
        if grown:
            module = min(grown, key=lambda m: (grown[m].k, -grown[m].norm))
            at, base = grown[module], self._baseline
            assert base is not None
            mostly = f" (most of it {at.top}'s)" if at.top != module else ""
            message = (f"{module}'s gradient norm reached {_n(at.norm)} at pass {at.p + 1}"
                       f"{mostly}, more than {FACTOR:,.0f} times the largest module's at pass "
                       f"{base.p + 1} ({_n(base.norm)}, {base.top})")
            if self._broken is not None:
                broken, leaf = self._broken
                message += (f"; {self.leaves[leaf]}'s .grad became non-finite at pass "
                            f"{broken.p + 1}")
            if len(grown) > 1:
                message += f"; {len(grown)} modules in all: {_names(list(grown))}"
            hint = ("a learning rate too high, or a recurrence or product of layers that "
                    "amplifies: clip the gradient (torch.nn.utils.clip_grad_norm_), lower the "
                    "learning rate, or normalise")
            if self._broken is not None and hint_nan:
                hint += f"; {hint_nan}"
            return [EXPLODING_GRADIENT.finding(message, tensor=at.top, hint=hint,
                                               line=at.line)]
        assert self._broken is not None
        broken, leaf = self._broken
        name = self.leaves[leaf]
        message = (f"{name}{self._where(leaf)}: its .grad became non-finite (NaN or Inf) at "
                   f"pass {broken.p + 1}, and an optimizer step spreads it into the weights")
        return [EXPLODING_GRADIENT.finding(
            message, tensor=name, line=broken.line,
            hint=hint_nan or "an overflow, log(0) or a division by zero: clip the gradient "
                             "(torch.nn.utils.clip_grad_norm_), lower the learning rate, or "
                             "guard the op with an epsilon")]

    # --- dead-parameter ------------------------------------------------------------------

    def _dead(self) -> list[Finding]:
        # a .grad in at least MIN_PASSES passes, and exactly zero in each (finite, norm 0):
        # on the graph, yet nothing it does reaches the loss
        found = [i for i, h in enumerate(self._leaf) if h.zero and h.present >= MIN_PASSES]
        hint = ("a ReLU whose inputs are all negative (dead units: a lower learning rate, "
                "LeakyReLU or another initialisation), a mask or a multiplication by 0 on its "
                "way to the loss; requires_grad_(False) if it is meant to stay as it is")
        out = []
        for i in found if len(found) <= 3 else found[:1]:
            h, name = self._leaf[i], self.leaves[i]
            assert h.first is not None
            if len(found) <= 3:
                message = (f"{name}{self._where(i)}: its .grad is exactly zero in all "
                           f"{h.present} passes that gave it one, from pass {h.first.p + 1}: "
                           "it is on the graph but never learns")
            else:
                message = (f"{len(found)} parameters' .grad is exactly zero in every pass "
                           f"that gave them one, first {name}{self._where(i)} from pass "
                           f"{h.first.p + 1} ({h.present} passes): they are on the graph but "
                           f"never learn; by module: {self._by_module(found)}")
            out.append(DEAD_PARAMETER.finding(message, tensor=name, hint=hint,
                                              line=h.first.line))
        return out

    # --- texts ---------------------------------------------------------------------------

    def _module_of(self, leaf: int) -> str:
        return next(m for m, h in self.groups.items() if leaf in h.leaves)

    def _where(self, leaf: int) -> str:
        module = self._module_of(leaf)
        return f" ({module})" if module != self.leaves[leaf] else ""

    def _by_module(self, leaves: Iterable[int]) -> str:
        counts = Counter(self._module_of(i) for i in leaves)
        shown = ", ".join(f"{m} ({k})" if k > 1 else m for m, k in list(counts.items())[:6])
        return shown + (", …" if len(counts) > 6 else "")


def step_findings(trace: Trace, earlier: Sequence[Finding] = ()) -> list[Finding]:
    """Every gradient-health finding of trace's steps; earlier: the findings already made
    (a NaN finding is pointed to, not repeated)."""
    steps = trace.steps
    if steps is None or not steps.leaves:
        return []
    health = StepHealth()
    health.extend(steps.leaves, steps.modules)
    same = len(trace.passes) == len(steps.grads)
    pending = 0
    calls = steps.closure_call or (None,) * len(steps.grads)
    for p, row in enumerate(steps.grads):
        pending += steps.optimizer_steps[p]
        if same and trace.passes[p].kind != "backward":
            continue  # autograd.grad leaves .grad as it was; its steps go to the next pass
        one = not same or len(trace.passes[p].roots) <= 1
        health.add(p, row, steps.loss[p] if one else None, pending,
                   trace.passes[p].line if same else None, calls[p])
        pending = 0
    return health.findings(earlier, steps.optimized, steps.scale_free)


def _accumulated(run: Run) -> tuple[str, str, str]:
    """How a run of kept passes crossed the optimizer's use of its .grad, why that is a bug,
    and the hint: steps, or mostly new calls of a step's closure (L-BFGS's, which steps with
    the gradient of each call it makes)."""
    if run.called > run.stepped:
        return (f"across {run.called + 1} calls of an optimizer step's closure",
                "the closure does not call zero_grad(), so each call adds its gradient to "
                "those of the calls before it, and the optimizer steps with their sum",
                "call optimizer.zero_grad() in the closure, before loss.backward(): an "
                "optimizer such as L-BFGS calls it several times a step, each time for the "
                "gradient at its new parameters alone")
    before = "before each pass" if run.stepped == run.end.k - run.first + 1 \
        else f"{run.stepped} times over them"
    return (f"while the optimizer stepped {before}",
            "zero_grad() is missing or skipped, so each step applies the sum of the gradients "
            "since the last reset",
            "call optimizer.zero_grad() before each backward (or after each step); to "
            "accumulate on purpose, step the optimizer only after the last micro-batch")


def _module_norm(leaves: list[int], norms: list[float]) -> float:
    """A module's gradient norm: the root of the sum of its leaves' squared norms (0.0 when
    none of them has a usable one)."""
    # a module's only leaf: its own norm. Where a second leaf joins the module later, its
    # earlier passes differ from a judgement of the whole run only below 1e-154 or above
    # 1e154, where a square under- or overflows
    if len(leaves) == 1:
        return norms[leaves[0]]
    total = norms[leaves[0]] * norms[leaves[0]]
    for i in leaves[1:]:
        total += norms[i] * norms[i]
    return math.sqrt(total)


def _largest_of(modules: dict[str, float]) -> str:
    """The module with the largest norm (the first of them on a tie)."""
    return max(modules, key=modules.__getitem__)


def _vanished(h: ModuleHealth) -> str | None:
    """How a module's gradient counts as vanished: "share", below 1/FACTOR of the largest
    module's in more than half of the passes where it has a non-zero gradient (at least
    MIN_PASSES of them); or "fell", more than FACTOR-fold from its first non-zero value to
    its last while the loss did not converge (a gradient that shrinks as the loss converges
    is not vanishing, whatever value it converges to)."""
    if h.present < MIN_PASSES:
        return None
    if 2 * h.low > h.present:
        return "share"
    assert h.first is not None
    if h.last_norm * FACTOR < h.first.norm and stalled(h.first_loss, h.last_loss):
        return "fell"
    return None


def untouched(g: LeafStep | None, before: LeafStep | None) -> bool:
    """Whether a pass left a leaf's .grad as the pass before left it (a pass of the other
    model of a GAN over this one's .grad): neither reset nor added to, the same numbers, not
    zero (a reset to zero and a zero gradient again, a dead layer's, reads the same)."""
    return g is not None and before is not None and not g.kept and g.norm != 0 \
        and (g.norm, g.max_abs, g.finite) == (before.norm, before.max_abs, before.finite)


def stalled(first: float | None, last: float | None) -> bool:
    """Whether a loss did not converge from first to last: it fell by less than LOSS_STALLED
    of its first value's size (a negative log-likelihood too), or rose (False: unknown)."""
    if first is None or last is None or not math.isfinite(first) or not math.isfinite(last):
        return False
    return last > first - LOSS_STALLED * abs(first)


def nan_hint(earlier: Sequence[Finding]) -> str | None:
    """Where the findings already made say a run's first NaN or Inf came from (None: none)."""
    # the forward's birth first: a NaN made in the forward makes the gradients NaN
    for code, what in (("nan-value", "names the forward op that made the first NaN or Inf"),
                       ("nan-gradient", "names the node where the first non-finite gradient "
                                        "is born")):
        f = next((f for f in earlier if f.code == code), None)
        if f is not None:
            return f"the {code} finding ({f.message.split(':', 1)[0]}) {what}: fix it there"
    return None


def _n(x: float) -> str:
    return f"{x:.3g}"


def _names(modules: list[str]) -> str:
    return ", ".join(modules[:6]) + (", …" if len(modules) > 6 else "")
