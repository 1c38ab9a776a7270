"""The statements of the scenario that ran, read with ast: which cut a graph (no_grad,
.detach(), .item() …), which bound a name, and why no tensor has a graph — as facts
(findings/cuts.py phrases them)."""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from ...extract.tensors import Named
from ...model.facts import Cut, NoRoot
from .binds import binding

# the calls that keep a whole computation off the graph (findings/cuts.py names them)
GRAD_CUTTERS = ("no_grad", "inference_mode", "set_grad_enabled", "detach")


def no_root(named: Named, lines: list[str], ran: set[int] | None = None,
            passes_ran: bool = False) -> NoRoot:
    """Why no named tensor has a grad_fn, and the first line that cut the graph — citing only
    lines that ran, when that is known (a no_grad in a function never called cuts nothing)."""
    wanting = tuple(n for n, t in named if t.requires_grad)
    if not wanting:
        return NoRoot((), (), None, None, None, None, "nothing")
    try:  # it compiled once; parsed to find the cutters
        nodes = list(ast.walk(ast.parse("\n".join(lines))))
    except SyntaxError:
        nodes = []
    cutters = tuple(Cut("call" if called == "detach" else "block", called, node.lineno)
                    for node in nodes if isinstance(node, ast.Call)
                    and (called := called_name(node)) in GRAD_CUTTERS
                    and (ran is None or node.lineno in ran))
    if not cutters and not passes_ran and \
            (unbound := _unbound_result(nodes, wanting, ran)) is not None:
        return NoRoot(wanting, (), unbound, lines[unbound - 1].strip(), unbound, None,
                      "nothing")
    first = min((cutter.line or 0 for cutter in cutters), default=None)
    return NoRoot(wanting, cutters, None, None, first, None, "nothing")


def _unbound_result(nodes: list[ast.AST], wanting: tuple[str, ...],
                    ran: set[int] | None) -> int | None:
    """The first line that ran arithmetic on a tensor that wants grad as a statement of its
    own (`(x * 3).sum()`): a result no name keeps (model.train() computes nothing)."""
    roots = {name.split(".")[0].split("[")[0] for name in wanting}
    return min((node.lineno for node in nodes
                if isinstance(node, ast.Expr) and (ran is None or node.lineno in ran)
                and any(isinstance(n, ast.BinOp | ast.UnaryOp) for n in ast.walk(node.value))
                and any(isinstance(n, ast.Name) and n.id in roots
                        for n in ast.walk(node.value))), default=None)


# What, in a statement that ran, makes a tensor with no graph (method, function or
# attribute): findings/cuts.py's CUT_BY says why each does
CUTTING = frozenset(("detach", "item", "tolist", "numpy", "data", "tensor", "argmax", "argmin",
                    "round"))


_MODULES = {"torch", "np", "numpy", "math"}  # names a statement reads that hold no values
_VALUE_TAKEN = re.compile(r"\.(item|detach|tolist|numpy|cpu)\(|\.data\b")  # another tensor's


class Statement(NamedTuple):
    """An assignment that ran (or a for loop's header, or a value put in a container: `xs.
    append(v)` binds xs): its line, the names it bound and read, how the value it bound lost
    its graph (None when nothing in it cuts one), and the names the cutting call itself took
    (`value` of `-logp + value.detach()`; none known: a block's cut takes them all)."""

    line: int
    bound: frozenset[str]
    read: tuple[str, ...]
    cut: Cut | None
    taken: tuple[str, ...] = ()


def statements_run(lines: list[str], ran: set[int]) -> list[Statement]:
    """The scenario's assignments that ran, in line order."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    regions: list[tuple[int, int, Cut]] = []  # (first, last line, cut) of grad-free blocks
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and (called := grad_free(node)) is not None:
            regions.append((node.lineno, node.end_lineno or node.lineno,
                            Cut("block", called, node.lineno)))
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        flow = binding(node) if line in ran else None
        if flow is None or line is None:
            continue
        bound, value = flow
        read = tuple(n.id for n in ast.walk(value) if isinstance(n, ast.Name))
        why = next((cut for first, last, cut in regions if first < line <= last), None)
        taken: tuple[str, ...] = ()
        if why is None:
            # a call or attribute only (a variable called `data` or `tensor` cuts nothing),
            # and only of a value: torch.tensor([2.0, 3.0]) in `x * torch.tensor([2.0, 3.0])`
            # makes a constant, and x keeps its graph
            cutting = next((n for n in ast.walk(value)
                            if isinstance(n, (ast.Call, ast.Attribute))
                            and called_name(n) in CUTTING and _cuts_a_value(n)), None)
            if cutting is not None:
                why = Cut("call", called_name(cutting) or "")
                taken = tuple(n.id for n in ast.walk(cutting) if isinstance(n, ast.Name))
        found.append(Statement(line, bound, read, why, taken))
    return sorted(found)


def grad_free(node: ast.With) -> str | None:
    """What of a with-statement turns gradients off (no_grad, inference_mode,
    set_grad_enabled(False)), or None."""
    for item in node.items:
        call = item.context_expr
        called = called_name(call)
        if called in ("no_grad", "inference_mode") or (
                called == "set_grad_enabled" and isinstance(call, ast.Call)
                and call.args and getattr(call.args[0], "value", True) is False):
            return called
    return None


def changed_in_place_after(lines: list[str], line: int) -> int | None:
    """The first line after `line`, in the same function (or at the top level), that changes
    in place a name `line` bound: `g.mul_(0.5)`, `g += 1`, `g[0] = 0`; None when none does."""
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return None
    scope: ast.AST = tree
    for node in ast.walk(tree):  # the innermost function around line
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno) \
                and node.lineno >= getattr(scope, "lineno", 0):
            scope = node
    bound = {n.id for node in ast.walk(scope) if isinstance(node, (ast.Assign, ast.AugAssign,
                                                                    ast.AnnAssign))
             and node.lineno == line
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
             for n in ast.walk(t) if isinstance(n, ast.Name)}
    later = [at for node in ast.walk(scope) if (at := getattr(node, "lineno", 0)) > line
             and _changes_in_place(node, bound)]
    return min(later, default=None)


def _changes_in_place(node: ast.AST, names: set[str]) -> bool:
    """`name.op_(…)`, `name op= …` or `name[…] = …` for one of names."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        target, op = node.func.value, node.func.attr
        return isinstance(target, ast.Name) and target.id in names and op.endswith("_") \
            and not op.startswith("_")
    if isinstance(node, ast.AugAssign):
        return isinstance(node.target, ast.Name) and node.target.id in names
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                   and t.value.id in names for t in node.targets)
    return False


def changes_something_in_place(code: str) -> bool:
    """Whether a line, a statement of its own, changes a tensor in place: `x += r`,
    `x.add_(1)`, `torch.relu_(x)`, `x[0] = 0`, `F.relu(x, inplace=True)` (False for a line
    that is not a whole statement)."""
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) or (isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) for t in node.targets)):
            return True
        if isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_")
                 and not node.func.attr.startswith("_"))
                or any(k.arg == "inplace" and getattr(k.value, "value", None) is True
                       for k in node.keywords)):
            return True
    return False


def graph_cut(name: str, statements: list[Statement],
              from_values: bool = False) -> tuple[int, Cut] | None:
    """(line, cut) for the last statement that ran and bound name where its graph was lost:
    inside a no_grad/inference_mode block, or through .detach(), .item(), .data,
    torch.tensor(...), argmax…; None when no such statement ran. from_values: only one that
    read another name's values (`torch.tensor(loss.item())`, not `torch.tensor(2.0)`)."""
    found = [(s.line, s.cut) for s in statements if s.cut is not None and name in s.bound
             and (not from_values or _reads_values(s))]
    return max(found, default=None)


def rebuilt_leaf(statements: list[Statement], lines: list[str]
                 ) -> list[tuple[str, tuple[int, Cut] | None]]:
    """The one statement that ran and bound a leaf it made, with requires_grad, from another
    tensor's value (`loss = torch.tensor(loss.item(), requires_grad=True)` in a Trainer's
    compute_loss), and the name it bound: none when several did."""
    made = {(min(s.bound), s.line, s.cut) for s in statements if s.cut is not None
            and s.cut.name == "tensor" and s.bound and _reads_values(s)
            and "requires_grad" in lines[s.line - 1] and _VALUE_TAKEN.search(lines[s.line - 1])}
    return [(name, (line, cut)) for name, line, cut in made] if len(made) == 1 else []


def _reads_values(s: Statement) -> bool:
    """Whether a statement read a name that holds values (not torch, np, math)."""
    return bool(set(s.read) - _MODULES)


def bound_at(name: str, statements: list[Statement]) -> int | None:
    """The first line that ran and bound name (model for model.fc.weight), or None."""
    first = name.partition(".")[0]
    return next((s.line for s in statements if first in s.bound), None)


def _cuts_a_value(node: ast.Call | ast.Attribute) -> bool:
    """Whether what a cutting call or attribute takes reads a name (`y.detach()`,
    `torch.tensor(loss.item())`), not literals alone (`torch.tensor([2.0, 3.0])`)."""
    taken: list[ast.AST]
    if isinstance(node, ast.Attribute):  # x.data: what it is read of
        taken = [node.value]
    elif isinstance(node.func, ast.Attribute) and not (
            isinstance(node.func.value, ast.Name) and node.func.value.id in _MODULES):
        taken = [node.func.value]  # x.detach(), loss.item(): what it is called on
    else:  # torch.tensor(...), tensor(...): what it is given
        taken = [*node.args, *(k.value for k in node.keywords)]
    return any(isinstance(n, ast.Name) and n.id not in _MODULES
               for part in taken for n in ast.walk(part))


def called_name(node: ast.AST) -> str | None:
    """The name a call or attribute access uses: torch.no_grad() -> no_grad, x.data -> data."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def loop_targets(path: str | None) -> frozenset[str]:
    """The names a script's module-level `for` statements bind (its loop variables): a
    tensor under one is named by the container it came from (params[1], not p)."""
    try:
        with open(path or "", encoding="utf-8") as file:
            tree = ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:  # module-level statements, into if/while/with/try/for bodies, not defs
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Lambda)):
            continue
        if isinstance(node, (ast.For, ast.AsyncFor)):
            names.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def ran_to(tree: ast.Module, line: int) -> set[int]:
    """The lines of the statements that surely ran before the one at line, in the function
    around it (or the module): those before it in each block that holds it, and inside the
    with-blocks among them; not those of a branch, loop or handler that may not have run."""
    scope: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno) \
                and node.lineno >= getattr(scope, "lineno", 0):
            scope = node
    ran: set[int] = set()
    body: list[ast.stmt] = scope.body
    while body:
        holder = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)),
                      None)
        ran.update(*(_straight(s) for s in body if (s.end_lineno or s.lineno) < line))
        if holder is None:
            break
        body = next((block for block in _blocks(holder) if block and block[0].lineno <= line
                     <= (block[-1].end_lineno or block[-1].lineno)), [])
    return ran


def _straight(node: ast.stmt) -> set[int]:
    """The lines of a statement that ran whole, where it surely ran whole: a simple
    statement's, a with-block's statements; none for a branch, loop, try or definition."""
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return set().union(*map(_straight, node.body))
    if any(isinstance(getattr(node, field, None), list) for field in ("body", "cases")):
        return set()
    return {node.lineno}


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The blocks of statements a compound statement holds: its body, else, finally, each
    handler's and each case's."""
    blocks = [getattr(node, field, None) for field in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(node, "handlers", ())]
    blocks += [c.body for c in getattr(node, "cases", ())]
    return [block for block in blocks if isinstance(block, list)]
