"""What the lines that bound or read a name say about it: a leaf meant but a copy made
(`torch.randn(3, requires_grad=True).double()`), a graph kept across steps (`total_loss +=
loss`, every step's graph held by the sum), and a non-leaf's .grad read (None: not kept)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...extract.captured import RawPass
from ...extract.tensors import Named
from ...model.facts import Fact, GraphKept, LeafCopied, NonLeafGradRead
from ...model.labels import without_comment
from .locals_seen import TensorBrief, brief
from .statements import Statement

_MEANT_LEAF = re.compile(r"requires_grad\s*=\s*True")
_COPY = re.compile(r"\.(double|float|half|bfloat16|to|cuda|cpu|type)\(")
Briefs = list[tuple[str, TensorBrief]]  # (name, its brief): the named tensors with a graph


def binding_facts(named: Named, dead: dict[str, TensorBrief], passes: Sequence[RawPass],
                  lines: list[str], statements: list[Statement], ran: set[int] | None
                  ) -> list[Fact]:
    """What the script's lines say of its names: a leaf meant but a copy made, a running
    total keeping every step's graph, a non-leaf's .grad read. A function's tensors died with
    it: their briefs (dead) tell what its lines did to them."""
    alive = [(n, b) for n, b in ((n, brief(t)) for n, t in named) if b is not None]
    taken = {n for n, _ in named}
    briefs = [*alive, *((n, b) for n, b in dead.items() if n not in taken)]
    return [*copied_leaves(briefs, lines, statements),
            *kept_graphs(briefs, passes, lines, statements),
            *nonleaf_grads_read(briefs, lines, ran)]


def copied_leaves(briefs: Briefs, lines: list[str], statements: list[Statement]
                  ) -> list[LeafCopied]:
    """Named tensors bound by a line that asks for requires_grad=True and then converts the
    leaf it made (`.double()`, `.to(device)`): the name holds the copy, a non-leaf whose .grad
    stays None, while the leaf the gradient reaches has no name."""
    found = []
    for name, b in briefs:
        if not b.leaf_copy or "." in name:
            continue
        line = max((s.line for s in statements if name in s.bound), default=None)
        if line is None:
            continue
        code = lines[line - 1].strip()
        copy = _COPY.search(code)
        meant = _MEANT_LEAF.search(code)
        if copy is not None and meant is not None and meant.start() < copy.start():
            found.append(LeafCopied(name, line, code, copy.group(1), b.grad_fn))
    return found


def kept_graphs(briefs: Briefs, passes: Sequence[RawPass], lines: list[str],
                statements: list[Statement]) -> list[GraphKept]:
    """Named tensors that still hold a graph at the end and were bound by adding the root of
    backward passes to themselves (`total_loss += loss`): each step's graph stays alive."""
    roots: dict[str, int] = {}
    for p in passes:
        if p.kind == "backward" and p.error is None:
            for n in set(p.root_names):
                if n:
                    roots[n] = roots.get(n, 0) + 1
    found = []
    grads: dict[str, str | None] = {name: b.grad_fn for name, b in briefs}
    for s in statements:
        for name in s.bound:
            if grads.get(name) is None or name in roots:
                continue
            code = lines[s.line - 1].strip()
            summed = name in s.read or re.match(rf"{re.escape(name)}\s*[-+*/]=", code)
            root = next((r for r in s.read if roots.get(r, 0) >= 2), None)
            if summed and root is not None:
                found.append(GraphKept(name, s.line, code, root, roots[root]))
                grads[name] = None  # once per name
    return found


def nonleaf_grads_read(briefs: Briefs, lines: list[str], ran: set[int] | None
                       ) -> list[NonLeafGradRead]:
    """The first line that ran and read `.grad` of a named non-leaf that keeps none (no
    retain_grad()): it reads None, whatever backward did."""
    wanted = {name: b for name, b in briefs if "." not in name and b.requires_grad
              and not b.retains_grad}
    if not wanted or not ran:
        return []
    found: dict[str, NonLeafGradRead] = {}
    for line in sorted(ran):
        code = without_comment(lines[line - 1] if 0 < line <= len(lines) else "")
        for name in _GRAD_READ.findall(code):
            if name in wanted and name not in found:
                found[name] = NonLeafGradRead(name, line, code, wanted[name].grad_fn)
    return list(found.values())


_GRAD_READ = re.compile(r"\b([A-Za-z_]\w*)\.grad\b(?!_fn|\s*=[^=])")

