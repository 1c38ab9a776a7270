"""compat: every private torch, CPython and Typer name in one package, each with a fallback
that costs a feature, never the run or a number, and says so in one line."""

from __future__ import annotations

import ast
import functools
import importlib
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import ROOT, SCENARIOS, code_files, invoke, show_without, trace_numbers, write_script
from plain_python import run_gradtrace

# each compat module declares its probes as it is imported
import gradtrace.compat.cpython  # noqa: F401
import gradtrace.compat.torch
import gradtrace.compat.typer  # noqa: F401
from gradtrace import compat
from gradtrace.compat.torch import error_kind

pytestmark = pytest.mark.matrix

COMPAT = ROOT / "gradtrace" / "compat"
# Private by their underscore, public by the documentation: namedtuple's API
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})
# Strings that look private and are not a name read off an object
NOT_NAMES = frozenset({"_pytest"})  # a package whose objects the name search skips


def _private(name: str) -> bool:
    return name.startswith("_") and name.strip("_") != "" \
        and not (name.startswith("__") and name.endswith("__"))


def own_attributes(trees: list[ast.AST]) -> set[str]:
    """The attribute names gradtrace's own code defines: stored on an object, or defined in
    a class body."""
    own: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        own.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        own.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        own.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return own


def foreign_private_names(tree: ast.AST, own: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each private name of another package the code touches: an attribute
    it reads, a module it imports, a string naming an attribute (getattr, hasattr)."""
    found: list[tuple[int, str]] = []
    # the names the module binds: a TypeVar's name is no attribute of another package's
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) \
                and node.attr not in own and node.attr not in NAMEDTUPLE_API:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names
                         if any(_private(p) for p in a.name.split(".")))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if any(_private(p) for p in node.module.split(".")):
                found.append((node.lineno, node.module))
            found.extend((node.lineno, a.name) for a in node.names if _private(a.name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.isidentifier() and _private(node.value) \
                and node.value not in own | assigned | NOT_NAMES | NAMEDTUPLE_API:
            found.append((node.lineno, node.value))
    return found


def _bound_by_import(tree: ast.AST) -> dict[str, str]:
    """Each name the module binds by an import of another package, and the dotted path it
    names: {"TyperArgument": "typer.core.TyperArgument", "nn": "torch.nn"}."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            for a in node.names:
                bound[a.asname or a.name.split(".")[0]] = a.name if a.asname \
                    else a.name.split(".")[0]
    return {name: path for name, path in bound.items()
            if path.split(".")[0] != "gradtrace"}


def _named_by(path: str) -> Any:
    """The object a dotted path names (a module, then attributes of it), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            return functools.reduce(getattr, parts[cut:], module)
        except AttributeError:
            return None
    return None


def foreign_overrides(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each private method a class defines over a private name of a base
    from another package (Typer's TyperArgument._usage_display_name): the subclass relies
    on that name as much as a call of it does."""
    bound = _bound_by_import(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        dotted = [ast.unparse(b).split(".") for b in node.bases]
        bases = [_named_by(".".join([bound[d[0]], *d[1:]])) for d in dotted if d[0] in bound]
        found.extend((item.lineno, item.name) for item in node.body
                     if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and _private(item.name)
                     and any(hasattr(base, item.name) for base in bases if base is not None))
    return found


def _trees() -> dict[Path, ast.AST]:
    """Each module of gradtrace's outside compat/, parsed."""
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in code_files()
            if COMPAT not in p.parents}


def test_no_module_outside_compat_touches_a_private_name() -> None:
    trees = _trees()
    own = own_attributes(list(trees.values()))
    for path, tree in trees.items():
        found = foreign_private_names(tree, own) + foreign_overrides(tree)
        assert not found, f"{path.relative_to(ROOT)} touches {found}: declare it in compat/"


@pytest.mark.parametrize("source", [
    "version = g._version",
    "import sys\nframe = sys._getframe(1)",
    "from typer._click.exceptions import NoSuchOption",
    "import torch._C._autograd",
    "from torch.nn.utils.clip_grad import _clip_grads_with_norm_",
    "flag = getattr(thread, '_daemonic', None)",
])
def test_the_private_name_check_sees_each_way_in(source: str) -> None:
    own = own_attributes(list(_trees().values()))
    assert foreign_private_names(ast.parse(source), own)


@pytest.mark.parametrize("source", [
    "from typer.core import TyperArgument\nclass A(TyperArgument):\n"
    "    def _get_default_string(self, *args):\n        return ''\n",
    "import rich.console as rc\nclass C(rc.Console):\n    def _render_buffer(self, b):\n"
    "        return ''\n",
    "import torch\nclass M(torch.nn.Module):\n    def _apply(self, fn):\n        return self\n",
])
def test_the_private_name_check_sees_a_method_over_another_package_s(source: str) -> None:
    """A subclass's method over a private name of Typer's, rich's or torch's relies on it as
    a call does (cli/core.py overrode Typer 0.26+'s _usage_display_name, unseen)."""
    assert foreign_overrides(ast.parse(source))


@pytest.mark.parametrize(("command", "usage"), [
    ("show", "show [OPTIONS] SCENARIO [-- ARGS]"),
    ("diff", "diff [OPTIONS] A B [-- ARGS]"),
    ("check", "check [OPTIONS] FILE_OR_DIR..."),
    ("examples", "examples [OPTIONS] [NAME]"),
])
def test_the_usage_line_names_each_argument_by_its_metavar_on_any_typer(
        command: str, usage: str) -> None:
    """Through Click's public get_usage_pieces: Typer 0.16 words arguments through
    make_metavar (SCENARIO -- ARGS), 0.26+ through a private method ({SCENARIO})."""
    text = invoke(command, "--help", env={"COLUMNS": "200"}).stdout
    assert f"Usage: gradtrace {usage} " in text, text


def test_a_private_method_a_foreign_base_lacks_is_the_subclass_s_own() -> None:
    source = "from typer.core import TyperArgument\nclass A(TyperArgument):\n" \
             "    def _plain(self):\n        return ''\n"
    assert foreign_overrides(ast.parse(source)) == []


def test_the_check_lets_gradtrace_s_own_private_names_through() -> None:
    source = "class A:\n    def _mine(self):\n        return self._x\n    def f(self):\n" \
             "        self._x = 1\n        return self._mine(), p._replace(a=1)\n"
    tree = ast.parse(source)
    assert foreign_private_names(tree, own_attributes([tree])) == []


def test_torch_C_is_read_only_in_compat() -> None:
    for path, tree in _trees().items():
        uses = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                and n.attr == "_C" and isinstance(n.value, ast.Name) and n.value.id == "torch"]
        assert not uses, f"{path.relative_to(ROOT)}:{uses[0]} reads torch._C"


def test_a_probe_this_torch_lacks_falls_back_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "_missing", {})
    monkeypatch.setattr(compat, "_declared", [])
    found = compat.probe("torch 9.9", "torch._C._no_such_probe",
                         lambda: torch._C._no_such_probe, "something is not shown")
    assert found is None
    (line,) = compat.missing()
    assert line == f"torch 9.9 has no torch._C._no_such_probe (checked on " \
        f"{compat.TORCH_CHECKED}): something is not shown"


def test_gradtrace_without_makes_a_present_probe_answer_as_missing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "_missing", {})
    monkeypatch.setattr(compat, "_declared", [])
    monkeypatch.setenv("GRADTRACE_WITHOUT", "torch.ones, other")
    assert compat.probe("torch", "torch.ones", lambda: torch.ones, "x") is None
    assert compat.probe("torch", "torch.zeros", lambda: torch.zeros, "y") is torch.zeros
    assert [m.path for m in compat._missing.values()] == ["torch.ones"]


def test_the_cli_prints_each_missing_probe_as_one_info_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "_missing", {"torch.x": compat.Missing(
        "torch 2.99", "torch.x", "2.13", "pictures lose their modules")})
    result = invoke("show", SCENARIOS / "chain_rule.py")
    assert result.exit_code == 0
    assert result.stderr.count("info: ") == 1
    assert "torch 2.99 has no torch.x (checked on 2.13): pictures lose their modules" \
        in result.stderr


def test_every_fallback_at_once_keeps_every_number(
        every_feature: tuple[Path, dict[str, Any]]) -> None:
    script, numbers = every_feature
    probes = compat.declared()
    trace, stderr = show_without(script, ",".join(probes))
    assert trace_numbers(trace) == numbers
    for path in probes:
        assert f" has no {path} (checked on " in stderr, path


def test_without_click_s_no_such_option_an_unknown_option_is_still_a_usage_error(
        tmp_path: Path) -> None:
    script = write_script(tmp_path, "import torch\nx = torch.ones(1, requires_grad=True)\n")
    env = {**os.environ, "GRADTRACE_WITHOUT": "NoSuchOption"}
    done = run_gradtrace("show", script, "--lr", "1", env=env, timeout=60)
    assert done.returncode == 2 and "No such option" in done.stderr and "--lr" in done.stderr
    assert "Traceback" not in done.stderr and "after `--`" not in done.stderr


def test_every_probe_is_on_this_torch_or_said_missing() -> None:
    """Not a tripwire on the version: a probe this torch lacks is said, one line each."""
    lines = compat.missing()
    assert len(lines) == len({line.split(" has no ")[1].split(" (")[0] for line in lines})
    assert set(compat.declared()) >= {line.split(" has no ")[1].split(" (")[0]
                                      for line in lines}


@pytest.mark.parametrize(("text", "kind"), [
    ("Trying to backward through the graph a second time (or directly access …)",
     "graph-freed"),
    ("one of the variables needed for gradient computation has been modified by an inplace "
     "operation: [torch.FloatTensor [3]]", "inplace"),
    ("element 0 of tensors does not require grad and does not have a grad_fn", "no-grad-fn"),
    ("One of the differentiated Tensors does not require grad", "needs-no-grad"),
    ("grad can be implicitly created only for scalar outputs", "non-scalar"),
    ("function MulBackward returned an incorrect number of gradients (expected 2, got 1)",
     "wrong-count"),
    ("something else entirely", None),
])
def test_error_texts_are_recognised(text: str, kind: str | None) -> None:
    assert error_kind(RuntimeError(text)) == kind


def test_the_error_texts_are_torchs_own() -> None:
    """The phrases match what this torch raises, not what we remember it raising."""
    x = torch.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as freed:
        y.backward()
    with pytest.raises(RuntimeError) as no_graph:
        torch.ones(2).sum().backward()
    with pytest.raises(RuntimeError) as non_scalar:
        (x * 2).backward()
    a = torch.ones(3, requires_grad=True).sigmoid()
    b = a * 2
    a.add_(1)
    with pytest.raises(RuntimeError) as inplace:
        b.sum().backward()
    kinds = [error_kind(e.value) for e in (freed, no_graph, non_scalar, inplace)]
    assert kinds == ["graph-freed", "no-grad-fn", "non-scalar", "inplace"]


def test_a_grad_fn_is_known_by_its_key_after_its_python_object_died() -> None:
    """On torch 2.11 and 2.12 a grad_fn's Python object dies with its last reference: a key
    noted then still names the node when the walk meets it (ids did not: a hook or a
    retain_grad() went unseen and --profile replayed the pass, z.grad 26 instead of 1)."""
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    key = gradtrace.compat.torch.node_key(y.grad_fn)
    z = y.exp()
    assert gradtrace.compat.torch.node_key(z.grad_fn) != key
    assert gradtrace.compat.torch.node_key(z.grad_fn.next_functions[0][0]) == key


def test_function_apply_is_wrapped_whatever_kind_of_classmethod_torch_has(
        tmp_path: Path) -> None:
    """torch 2.14 made Function.apply a C classmethod_descriptor (no __func__): every
    command failed before the script started."""
    kind = type(torch.autograd.Function.__dict__["apply"]).__name__
    assert kind in ("classmethod", "classmethod_descriptor")
    result = invoke("check", SCENARIOS / "custom_sigmoid.py")
    assert result.exit_code == 0, result.stderr
    assert torch.autograd.Function.__dict__["apply"].__class__.__name__ == kind  # restored
