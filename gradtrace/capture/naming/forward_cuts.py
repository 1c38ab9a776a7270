"""The cuts inside a module's forward() that ran, read with ast: `.detach()` or `.data`, a
no_grad block, a value taken of the module's own tensor (`self.log_scale.exp().item()`), and
a function decorated `@torch.no_grad()` that ran (a helper forward() calls)."""

from __future__ import annotations

import ast
from typing import NamedTuple

from ...model.facts import Cut
from .statements import called_name, grad_free


class FunctionCut(NamedTuple):
    """A line inside a module's forward() that ran and cut a value off its graph: .detach()
    or .data in it, it ran inside a no_grad block, or it took a value of self's tensor."""

    line: int
    cut: Cut
    function: str  # Block.forward
    first: int  # the function's lines
    last: int
    # .item(), .tolist(), .numpy(): the attributes of self it took the value of (log_scale in
    # `self.log_scale.exp().item()`), a cut only where they are the leaves no root reaches
    reads: tuple[str, ...] = ()


def function_cuts(lines: list[str], ran: set[int]) -> list[FunctionCut]:
    """The cuts that ran inside the forward() methods of a file (its module-level
    statements are leaf_cut's), in line order; classes inside a block's statements too."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    found: dict[int, FunctionCut] = {}
    todo: list[tuple[ast.AST, str]] = [(tree, "")]
    while todo:
        parent, owner = todo.pop()
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, ast.ClassDef):
                todo.append((node, f"{owner}{node.name}."))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                todo.append((node, f"{owner}{node.name}."))
                decorated = _decorated_cut(node, ran)
                if decorated is not None:  # a helper forward() calls: all of it, when it ran
                    found.setdefault(decorated.line, decorated._replace(
                        function=f"{owner}{node.name}"))
                if node.name != "forward":  # a module's: a target's update cuts on purpose
                    continue
                for inner in ast.walk(node):
                    cut = _function_cut(inner)
                    line = getattr(inner, "lineno", 0)
                    if cut is not None and line in ran and line not in found:
                        found[line] = FunctionCut(line, cut[0], f"{owner}{node.name}",
                                                  node.lineno, node.end_lineno or node.lineno,
                                                  cut[1])
            elif isinstance(node, ast.stmt):  # classes inside a with-block, an if, a try
                todo.append((node, owner))
    return sorted(found.values())


def _decorated_cut(node: ast.FunctionDef | ast.AsyncFunctionDef,
                   ran: set[int]) -> FunctionCut | None:
    """`@torch.no_grad()` on a function whose body ran: nothing it returns has a graph."""
    called = next((c for d in node.decorator_list
                   if (c := called_name(d)) in ("no_grad", "inference_mode")), None)
    last = node.end_lineno or node.lineno
    if called is None or not any(line in ran for line in range(node.body[0].lineno, last + 1)):
        return None
    line = next(d.lineno for d in node.decorator_list if called_name(d) == called)
    return FunctionCut(line, Cut("decorator", called, function=node.name), node.name,
                       node.lineno, last)


def _function_cut(node: ast.AST) -> tuple[Cut, tuple[str, ...]] | None:
    """(the cut, the attributes of self a value was taken of) for a cut in forward()."""
    if isinstance(node, (ast.Call, ast.Attribute)) and \
            (called := called_name(node)) in ("detach", "data"):
        return Cut("call", called), ()
    if isinstance(node, ast.With) and (called := grad_free(node)) is not None:
        return Cut("block", called), ()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("item", "tolist", "numpy"):
        reads = tuple(dict.fromkeys(n.attr for n in ast.walk(node.func.value)
                                    if isinstance(n, ast.Attribute)
                                    and isinstance(n.value, ast.Name) and n.value.id == "self"))
        return (Cut("call", node.func.attr), reads) if reads else None
    return None

