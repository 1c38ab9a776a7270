"""Where a forward's NaN or Inf was born (the fact capture read off the saved values when a
root was not finite), phrased as the nan-value finding."""

from __future__ import annotations

from ..model.facts import NonFiniteBorn
from ..model.labels import line_at, lines_text
from ..model.records import Finding
from .graph import FORWARD_CAUSES
from .registry import NAN_VALUE

GUARD = "guard that line: keep what it divides by, or takes the log or root of, away from " \
        "0 (.clamp(min=...), an epsilon), or mask before the op"
OVERFLOW = "no op known to make NaN or Inf of finite numbers (as log or division do): most " \
           "likely an overflow, its inputs finite but large (exploding weights or " \
           "activations, or float16's range): lower the learning rate, clip the gradients, or " \
           "compute it in float32"
COMPILED = "a torch.compile region, whose ops are not seen one by one: run it without " \
           "torch.compile (TORCH_COMPILE_DISABLE=1) to see which of its lines made it"


def born(fact: NonFiniteBorn, home: str | None = None) -> Finding:
    """`pass 5: loss is NaN, and its first NaN was made in the forward at line 34 `…`
    (DivBackward0 in model, an unnamed tensor), of finite inputs`, with the fix of that op;
    or the parameter or input that held it already."""
    lead = f"{_when(fact)}: {fact.root or 'the root'} is {fact.root_kind}"
    if fact.number is None:
        lead += " (no backward ran from it)"
    made, file, line = fact.made, None, None
    where = ""
    if made is not None:
        file, line = made.file, made.line
        where = f" at {lines_text(made, fact.library, home)} `{made.code}`"
    elif fact.library is not None:
        file, line = fact.library.file, fact.library.line
        where = f" at {line_at(fact.library.file, fact.library.line, home)} `{fact.library.code}`"
    what = fact.node_type + (f" in {fact.module}" if fact.module else "")
    if fact.origin == "parameter" and not fact.after:
        return NAN_VALUE.finding(
            f"{lead}, and its {fact.kind} was in {fact.tensor or what} from the start (a "
            "leaf: the data it was made from)", tensor=fact.tensor, node=fact.box,
            hint="check where it is made or loaded: torch.isfinite(t).all()")
    if fact.origin == "parameter":
        return NAN_VALUE.finding(
            f"{lead}, and its {fact.kind} was in parameter {fact.tensor or what} already, "
            "before the forward: an earlier update wrote it in", tensor=fact.tensor,
            node=fact.box, hint="find the first pass whose gradients were not finite (the "
            "steps section, `gradtrace steps`) and what made them; a GradScaler skips such "
            "steps, a plain optimizer writes them in")
    if fact.origin == "input":
        return NAN_VALUE.finding(
            f"{lead}, and its {fact.kind} came in with an input without grad (data) already"
            + (f", used{where} ({what})" if where else f", used by {what}"), node=fact.box,
            file=file, line=line,
            hint="check the data where it is loaded: torch.isfinite(batch).all()")
    named = f", {fact.tensor}" if fact.tensor else ", an unnamed tensor"
    cause = FORWARD_CAUSES.get(fact.node_type)
    # an op that makes NaN or Inf of finite numbers is blamed for it; any other (an overflow)
    # may have been given it by an op above whose output nothing kept
    inputs = ", of finite inputs" if fact.certain else \
        f"; nothing kept the values before it for backward: it, or one of the " \
        f"{fact.unread_above:,} op{'s' if fact.unread_above > 1 else ''} above it, made it" \
        if fact.unread_above and not cause else \
        "; those of its inputs kept for backward are finite"
    return NAN_VALUE.finding(
        f"{lead}, and its first {fact.kind} was made in the forward{where} ({what}{named})"
        f"{inputs}", tensor=fact.tensor, node=fact.box, file=file, line=line,
        hint=f"{cause}: {GUARD}" if cause else COMPILED if "Compiled" in fact.node_type
        else f"{fact.node_type} is {OVERFLOW}")


def _when(fact: NonFiniteBorn) -> str:
    if fact.number is not None:
        return f"pass {fact.number}"
    return "when the script stopped" if fact.stopped else "at the end of the run"
