"""Findings from what the code's optimizers did with the gradients (facts of
capture/observers/optimizers.py): resets that threw gradients away, steps and clipping with
no gradient, and parameters the optimizers miss or hold frozen."""

from __future__ import annotations

from ..model.facts import (
    ClipWithoutGradient,
    FrozenHeld,
    GradDiscarded,
    GraphKept,
    LeafCopied,
    NonLeafGradRead,
    NotOptimized,
    StepWithoutGradient,
)
from ..model.labels import without_comment
from ..model.records import Finding
from .registry import (
    CLIP_WITHOUT_GRADIENT,
    FROZEN_IN_OPTIMIZER,
    GRAD_DISCARDED,
    GRAPH_KEPT,
    LEAF_COPIED,
    NONLEAF_GRAD,
    NOT_OPTIMIZED,
    STEP_WITHOUT_GRADIENT,
)


def _at(line: int | None, code: str | None) -> str:
    """`line 12 `optimizer.zero_grad()`` (or a word when the line is another file's)."""
    if line is None:
        return "a line outside the script"
    code = code and without_comment(code)
    return f"line {line}" + (f" `{code}`" if code else "")


def grad_discarded(fact: GradDiscarded, home: str | None = None) -> Finding | None:
    """A reset right before a step in most passes; or of most passes' gradients, from the
    backward a step trains with (not an input's gradient taken before it, not an analysis
    after training, not what the code clipped into .grad itself); none for a loop with no
    optimizer step, or for what no optimizer holds."""
    before = 2 * fact.before_step >= fact.backwards
    if not (fact.steps and fact.held and (before or 2 * fact.passes >= fact.backwards
                                          and 2 * fact.trained >= fact.backwards)):
        return None
    reset = _at(fact.line, fact.code)
    backward = _at(fact.backward_line, fact.backward_code)
    step = _at(fact.step_line, fact.step_code)
    if before:
        if fact.step_line is not None and fact.backward_line is not None \
                and fact.step_line < fact.backward_line:
            return STEP_WITHOUT_GRADIENT.finding(
                f"{step} runs before backward at {backward}: each step comes right after "
                f"{reset}, with no gradient, and the gradient backward makes is reset before "
                f"the next step ({fact.before_step} of {fact.backwards} backward passes): "
                "the parameters never move", line=fact.step_line,
                hint="order each step as zero_grad(), forward, loss.backward(), then step()")
        message = (f"{reset} reset the gradients that backward"
                   f"{f' at {backward}' if fact.backward_line else ''} had just made, before "
                   f"step() at {step} used them, in {fact.before_step} of {fact.backwards} "
                   "backward passes: the optimizer steps with no gradient and never learns")
        hint = ("call zero_grad() before the forward pass (or after step()), never between "
                "backward() and step()")
    else:
        every = round(fact.backwards / fact.steps) if fact.steps else 0
        kept = f" (the optimizer stepped once every {every} passes)" if every > 1 else ""
        message = (f"{reset} reset the gradients of {fact.passes} of {fact.backwards} backward "
                   f"passes (the first at {backward}) before any optimizer step used them"
                   f"{kept}: only the last micro-batch before each step reaches it; the rest "
                   "is thrown away")
        hint = ("to accumulate gradients, call zero_grad() only right after step() (with "
                "the loss divided by the number of micro-batches)")
    return GRAD_DISCARDED.finding(message, hint=hint, line=fact.line)


def step_without_gradient(fact: StepWithoutGradient, home: str | None = None
                          ) -> Finding | None:
    """In most of the run's optimizer steps."""
    if 2 * fact.empty <= fact.steps:  # of every optimizer's steps: a multi-task loop's
        return None  # idle heads are not most
    step = _at(fact.line, fact.code)
    why = ("the backward passes before them reached none of its parameters (the loss is "
           "not computed from them)" if fact.after_backward * 2 >= fact.empty
           else "no backward ran before them")
    return STEP_WITHOUT_GRADIENT.finding(
        f"{step} ran {fact.empty} of {fact.steps} optimizer steps while none of its "
        f"parameters had a .grad: {why}, so the parameters do not move",
        hint="order each step as zero_grad(), forward, loss.backward(), then step()",
        line=fact.line)


def clip_without_gradient(fact: ClipWithoutGradient, home: str | None = None
                          ) -> Finding | None:
    if 2 * fact.empty < fact.clips:
        return None
    clip = _at(fact.line, fact.code)
    return CLIP_WITHOUT_GRADIENT.finding(
        f"{clip} clipped {fact.empty} of {fact.clips} times while none of the parameters "
        "had a .grad: it clips nothing, and the step uses unclipped gradients",
        hint="clip after loss.backward() (after scaler.unscale_(optimizer) with AMP) and "
             "before optimizer.step()", line=fact.line)


def not_optimized(fact: NotOptimized, home: str | None = None) -> Finding:
    names = fact.tensors
    shown = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
    what = f"{names[0]} gets" if len(names) == 1 else f"{len(names)} tensors ({shown}) get"
    made = f", set at {_at(fact.line, fact.code)}," if fact.line is not None else ""
    built = f" (built at {_at(fact.optimizer_line, fact.optimizer_code)})" \
        if fact.optimizer_line is not None else ""
    return NOT_OPTIMIZED.finding(
        f"{what} gradients from backward{made} but the optimizer{built} does not hold "
        f"{'it' if len(names) == 1 else 'them'} (it stepped {fact.steps} times): "
        f"{'it never learns' if len(names) == 1 else 'they never learn'}",
        tensor=names[0], line=fact.line if fact.line is not None else fact.optimizer_line,
        hint="keep layers in nn.ModuleList/nn.ModuleDict (not a list or dict), make learnable "
             "tensors nn.Parameter attributes, build the optimizer after the model is "
             "complete; if they are meant to stay fixed, requires_grad_(False) spares backward "
             "their gradients")


def frozen_held(fact: FrozenHeld, home: str | None = None) -> Finding:
    names = fact.tensors
    shown = ", ".join(names[:2]) + (", …" if len(names) > 2 else "")
    what = names[0] if len(names) == 1 else f"{len(names)} parameters ({shown})"
    by = f", frozen by {_at(fact.line, fact.code)}" if fact.line is not None else ""
    message = (f"the optimizer holds {what}{by}, which "
               f"{'does' if len(names) == 1 else 'do'} not require grad: "
               f"{'it never changes' if len(names) == 1 else 'they never change'} over "
               f"{fact.steps} optimizer steps")
    if fact.on_purpose:
        return FROZEN_IN_OPTIMIZER.finding(
            message + " (frozen on purpose, as the code says)", severity="info",
            tensor=names[0], line=fact.line,
            hint="pass only the trained parameters to the optimizer "
                 "(filter(lambda p: p.requires_grad, model.parameters()))")
    return FROZEN_IN_OPTIMIZER.finding(
        message, tensor=names[0], line=fact.line,
        hint="if they should train, remove the requires_grad_(False) (or pass freeze=False "
             "to from_pretrained); if they are frozen on purpose, give the optimizer only the "
             "trained parameters")


def leaf_copied(fact: LeafCopied, home: str | None = None) -> Finding:
    name = fact.tensor
    return LEAF_COPIED.finding(
        f"{name} is not a leaf: line {fact.line} `{fact.code}` made a leaf with "
        f"requires_grad=True, then .{fact.method}() copied it ({fact.node_type}); {name} holds "
        f"the copy, so {name}.grad stays None and the gradient goes to the unnamed leaf",
        tensor=name, line=fact.line,
        hint=f"make it in the dtype and device it needs, then ask for gradients: e.g. "
             f"`torch.randn(..., dtype=torch.float64, device=device, requires_grad=True)`, or "
             f"call .requires_grad_() after .{fact.method}()")


def graph_kept(fact: GraphKept, home: str | None = None) -> Finding:
    name, root = fact.tensor, fact.root
    return GRAPH_KEPT.finding(
        f"line {fact.line} `{fact.code}` adds {root} with its graph to {name} in each of "
        f"{fact.passes} backward passes: {name} keeps every step's graph (and its saved "
        "tensors) alive, so memory grows with the steps",
        tensor=name, line=fact.line,
        hint=f"add the number instead: `{name} += {root}.item()` (or `{root}.detach()`)")


def nonleaf_grad(fact: NonLeafGradRead, home: str | None = None) -> Finding:
    name = fact.tensor
    return NONLEAF_GRAD.finding(
        f"line {fact.line} `{fact.code}` reads {name}.grad, but {name} is not a leaf (made by "
        f"{fact.node_type}): backward keeps .grad only for leaves, so it reads None",
        tensor=name, line=fact.line,
        hint=f"call {name}.retain_grad() before the backward to keep it; or read the .grad of "
             "the leaf it was computed from")
