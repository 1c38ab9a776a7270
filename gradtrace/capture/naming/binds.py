"""What a statement binds, and from what: an assignment's targets from its value, a for
loop's from what it iterates over, and a container from the value put in it (`xs.append(v)`
binds xs): the way a value flows from name to name, for the lines that cut a graph."""

from __future__ import annotations

import ast
from collections.abc import Sequence

# The methods that put a value into the container they are called on
_PUTS = frozenset({"append", "extend", "insert", "add", "update", "appendleft", "put"})


def binding(node: ast.AST) -> tuple[frozenset[str], ast.AST] | None:
    """(the names a statement binds, what it binds them from) for an assignment, a for
    loop's header and a value put in a container; None for any other node."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return _names(targets), node.value
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return _names([node.target]), node.iter
    if isinstance(node, ast.Expr) and isinstance(call := node.value, ast.Call) \
            and isinstance(call.func, ast.Attribute) and call.func.attr in _PUTS \
            and isinstance(call.func.value, ast.Name):
        return frozenset({call.func.value.id}), ast.Tuple(elts=[*call.args], ctx=ast.Load())
    return None


def _names(targets: Sequence[ast.expr]) -> frozenset[str]:
    return frozenset(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
