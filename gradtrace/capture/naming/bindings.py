"""What the lines that bound or read a name say about it: a leaf meant but a copy made
(`torch.randn(3, requires_grad=True).double()`), a graph kept across steps (`total_loss +=
loss`, every step's graph held by the sum), and a non-leaf's .grad read (None: not kept)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...extract.captured import RawPass
from ...extract.tensors import Named
from ...model.facts import GraphKept, LeafCopied, NonLeafGradRead
from ...model.labels import without_comment
from .statements import Statement

_MEANT_LEAF = re.compile(r"requires_grad\s*=\s*True")
_COPY = re.compile(r"\.(double|float|half|bfloat16|to|cuda|cpu|type)\(")
_COPY_NODES = {"ToCopyBackward0", "CopyBackwards", "CloneBackward0"}


def copied_leaves(named: Named, lines: list[str], statements: list[Statement]
                  ) -> list[LeafCopied]:
    """Named tensors bound by a line that asks for requires_grad=True and then converts the
    leaf it made (`.double()`, `.to(device)`): the name holds the copy, a non-leaf whose .grad
    stays None, while the leaf the gradient reaches has no name."""
    found = []
    for name, t in named:
        node = t.grad_fn
        if node is None or type(node).__name__ not in _COPY_NODES or "." in name:
            continue
        inputs = [f for f, _ in node.next_functions if f is not None]
        if len(inputs) != 1 or type(inputs[0]).__name__ != "AccumulateGrad":
            continue
        line = max((s.line for s in statements if name in s.bound), default=None)
        if line is None:
            continue
        code = lines[line - 1].strip()
        copy = _COPY.search(code)
        meant = _MEANT_LEAF.search(code)
        if copy is not None and meant is not None and meant.start() < copy.start():
            found.append(LeafCopied(name, line, code, copy.group(1), type(node).__name__))
    return found


def kept_graphs(named: Named, passes: Sequence[RawPass], lines: list[str],
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
    grads: dict[str, Any] = {name: t.grad_fn for name, t in named}
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


def nonleaf_grads_read(named: Named, lines: list[str], ran: set[int] | None
                       ) -> list[NonLeafGradRead]:
    """The first line that ran and read `.grad` of a named non-leaf that keeps none (no
    retain_grad()): it reads None, whatever backward did."""
    wanted = {name: t for name, t in named if "." not in name and t.grad_fn is not None
              and t.requires_grad and not t.retains_grad}
    if not wanted or not ran:
        return []
    found: dict[str, NonLeafGradRead] = {}
    for line in sorted(ran):
        code = without_comment(lines[line - 1] if 0 < line <= len(lines) else "")
        for name in _GRAD_READ.findall(code):
            if name in wanted and name not in found:
                found[name] = NonLeafGradRead(name, line, code,
                                              type(wanted[name].grad_fn).__name__)
    return list(found.values())


_GRAD_READ = re.compile(r"\b([A-Za-z_]\w*)\.grad\b(?!_fn|\s*=[^=])")

