"""In-place changes to tensors saved for backward: which tensor, the line that made it, the
line that changed it, and that line rewritten out of place."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..compat.torch import tensor_version
from ..extract.tensors import Named
from ..extract.walk import node_type
from ..findings.registry import INPLACE_MODIFIED
from ..model.records import Finding, SavedTensor, Source

_METHOD = re.compile(r"^(?P<target>[\w.\[\]]+)\.(?P<op>\w+)_\((?P<args>.*)\)$")
_AUGMENTED = re.compile(r"^(?P<target>[\w.\[\]]+)\s*(?P<op>[-+*/@]|//|\*\*)=\s*(?P<value>.+)$")


def out_of_place(code: str) -> str | None:
    """`b.add_(1)` -> `b = b.add(1)`; `b += 1` -> `b = b + 1`; None when not one of those."""
    code = code.strip()
    if (m := _METHOD.match(code)) is not None:
        return f"{m['target']} = {m['target']}.{m['op']}({m['args']})"
    if (m := _AUGMENTED.match(code)) is not None:
        return f"{m['target']} = {m['target']} {m['op']} {m['value']}"
    return None


def changed_saved(nodes: list[Any], saved_of: Callable[[Any], tuple[SavedTensor, ...]],
                  ) -> list[tuple[Any, str]]:
    """(node, saved name) for every saved tensor changed in place since it was saved."""
    return [(node, s.name) for node in nodes for s in saved_of(node)
            if s.status == "modified in place"]


def inplace_finding(node: Any, saved: str, named: Named,
            source_of: Callable[[Any], Source | None]) -> Finding:
    """`b (output of SigmoidBackward0, line 3) was saved for backward and then changed in
    place at line 5 `b.add_(1)``, with the out-of-place rewrite of that line as the hint."""
    kind = node_type(node)
    made = source_of(node)
    inputs = {id(child) for child, _ in node.next_functions if child is not None}
    name, changer = None, None
    for n, t in named:
        grad_fn = t.grad_fn
        if t.is_leaf or not tensor_version(t) or grad_fn is None:
            continue
        if grad_fn is node:  # changed where autograd does not see it (under no_grad)
            name = n
            break
        first = grad_fn.next_functions[0][0] if grad_fn.next_functions else None
        if first is not None and (first is node if saved == "result" else id(first) in inputs):
            name, changer = n, grad_fn  # the in-place op rebased the tensor onto a new node
            break
    where = f", line {made.line}" if made is not None else ""
    what = f"the {saved} tensor of {kind}{where}"
    if name is not None:
        what = (f"{name} (output of {kind}{where})" if saved == "result"
                else f"{name} (saved as {saved} by {kind}{where})")
    changed = None if changer is None else source_of(changer)
    if changed is not None:
        then = f"changed in place at line {changed.line} `{changed.code}`"
        rewrite = out_of_place(changed.code)
        hint = (f"write line {changed.line} out of place: `{rewrite}`" if rewrite else
                f"make line {changed.line} out of place, or clone() {name or 'the tensor'} "
                "before changing it")
    else:
        then = "changed in place before backward used it"
        hint = "use the out-of-place op (x = x + 1, not x += 1), or clone() it first"
    return INPLACE_MODIFIED.finding(
        f"{what} was saved for backward and then {then}: backward needs the saved value",
        tensor=name, hint=hint, file=None if changed is None else changed.file,
        line=None if changed is None else changed.line)

