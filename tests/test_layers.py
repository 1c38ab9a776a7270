"""The one-way flow of the package, read off every module's imports (ast, no import needed).

capture (run + record) -> extract (walk) -> model (plain Trace) -> findings -> diff -> render
-> cli.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from helpers import ROOT, code_files

PACKAGE = ROOT / "gradtrace"

# Each module's layer: the longest matching prefix wins.
LAYER_OF = {
    "gradtrace._version": "base", "gradtrace.errors": "base", "gradtrace.gcpause": "base",
    "gradtrace.atomic": "base", "gradtrace.appending": "base",
    "gradtrace.compat": "compat",
    "gradtrace.model": "model",
    "gradtrace.findings": "findings",
    "gradtrace.diff": "diff",
    "gradtrace.render": "render",
    "gradtrace.extract": "extract",
    "gradtrace.capture": "capture",
    "gradtrace.check": "check",
    "gradtrace.api": "api",
    "gradtrace.integrations": "integrations",
    "gradtrace.pytest_plugin": "plugin",
    "gradtrace": "package",  # __init__ and __main__
    "gradtrace.cli": "cli",
}
BELOW = {  # the gradtrace layers each layer may import (its own included)
    "base": {"base"},
    "compat": {"base", "compat"},
    "model": {"base", "model"},
    "findings": {"base", "model", "findings"},
    "diff": {"base", "model", "findings", "diff"},
    "render": {"base", "model", "findings", "diff", "render"},
    "extract": {"base", "compat", "model", "findings", "extract"},
    "capture": {"base", "compat", "model", "extract", "capture"},  # facts, never findings
    "check": {"base", "compat", "model", "findings", "extract", "capture", "check"},
    "api": {"base", "compat", "model", "findings", "render", "extract", "capture", "api"},
    "integrations": {"base", "compat", "model", "findings", "render", "extract", "capture",
                     "api", "integrations"},
    "cli": {"base", "compat", "model", "findings", "diff", "render", "extract", "capture",
            "check", "cli"},
    "package": {"base", "api", "cli"},
    "plugin": {"base", "compat", "model", "findings", "diff", "render", "extract", "capture",
               "api", "plugin"},
}
THIRD_PARTY = {  # outside the standard library
    "base": set(), "compat": {"torch", "typer"}, "model": set(), "findings": set(), "diff": set(),
    "render": {"rich", "graphviz", "cairosvg"},  # cairosvg: the optional extra `plot`
    "extract": {"torch"}, "capture": {"torch"}, "check": {"torch"},
    "api": {"rich"},
    "integrations": {"lightning", "transformers"},
    # torch and tensorboard: watch --tensorboard's SummaryWriter (cli/scalars.py), imported
    # only when asked
    "cli": {"typer", "rich", "torch", "tensorboard"},
    "package": set(),
    "plugin": {"pytest", "rich"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> str:
    best = max((p for p in LAYER_OF if module == p or module.startswith(p + ".")), key=len)
    return LAYER_OF[best]


def imports(path: Path) -> set[str]:
    """Every module path imports, at any depth of the file (function-level imports too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return imports_in(path.read_text(encoding="utf-8"), package)


def imports_in(source: str, package: str) -> set[str]:
    """The modules a source text in package imports, relative imports resolved."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            # `from . import show` imports a module, not a name
            found.update(f"{base}.{a.name}" for a in node.names
                         if (PACKAGE.parent / f"{base}.{a.name}".replace(".", "/")).with_suffix(
                             ".py").exists())
    return found


MODULES = {module_name(p): p for p in code_files()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module: str) -> None:
    mine = layer(module)
    for imported in sorted(imports(MODULES[module])):
        top = imported.split(".")[0]
        if top == "gradtrace":
            assert layer(imported) in BELOW[mine], f"{module} ({mine}) imports {imported}"
        elif top not in sys.stdlib_module_names and top != "__future__":
            assert top in THIRD_PARTY[mine], f"{module} ({mine}) imports {top}"


def test_no_import_circle() -> None:
    graph = {m: sorted(i for i in imports(p) if i in MODULES and i != m)
             for m, p in MODULES.items()}
    # iterative depth-first search with colours: grey on the stack, black done
    colour: dict[str, str] = {}
    for start in graph:
        if start in colour:
            continue
        stack = [(start, iter(graph[start]))]
        colour[start] = "grey"
        while stack:
            node, todo = stack[-1]
            nxt = next(todo, None)
            if nxt is None:
                colour[node] = "black"
                stack.pop()
            elif colour.get(nxt) == "grey":
                circle = [n for n, _ in stack][[n for n, _ in stack].index(nxt):] + [nxt]
                raise AssertionError("import circle: " + " -> ".join(circle))
            elif nxt not in colour:
                colour[nxt] = "grey"
                stack.append((nxt, iter(graph[nxt])))


def test_the_layer_check_sees_upward_imports() -> None:
    """The check above can fail: a model module importing a renderer, even inside a
    function, is seen and is not allowed."""
    found = imports_in("def f():\n    from ..render.dot import to_dot\n", "gradtrace.model")
    assert "gradtrace.render.dot" in found
    assert layer("gradtrace.render.dot") not in BELOW[layer("gradtrace.model.records")]
    assert "gradtrace.cli.show" in imports_in("from . import show\n", "gradtrace.cli")


def test_every_module_has_a_layer() -> None:
    assert all(layer(m) in BELOW for m in MODULES)
    assert {"gradtrace.model.records", "gradtrace.render.formats", "gradtrace.cli.show",
            "gradtrace.findings.registry", "gradtrace.capture.passes.recorder"} <= set(MODULES)


# capture's folders, bottom up: each imports only those before it (and options.py, which
# every part reads); the top level (session, runner, live, execution) imports any of them.
CAPTURE_FOLDERS = ("naming", "script", "observers", "passes", "modules")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.count(".") >= 3
                                          and m.startswith("gradtrace.capture.")))
def test_capture_folders_import_down_the_pipeline(module: str) -> None:
    folder = module.split(".")[2]
    below = CAPTURE_FOLDERS[:CAPTURE_FOLDERS.index(folder) + 1]
    for imported in imports(MODULES[module]):
        parts = imported.split(".")
        if parts[:2] == ["gradtrace", "capture"] and len(parts) > 2 \
                and imported != "gradtrace.capture.options":
            assert parts[2] in below, f"{module} imports {imported}"


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


CAPTURED = {m: p for m, p in MODULES.items() if m.startswith(("gradtrace.capture",
                                                               "gradtrace.extract"))}


@pytest.mark.parametrize("module", sorted(CAPTURED))
def test_capture_is_small_and_makes_no_finding(module: str) -> None:
    """Sizes a reader can hold; capture and extract record facts, findings/ phrases them."""
    path = CAPTURED[module]
    text = path.read_text(encoding="utf-8")
    if module.startswith("gradtrace.capture"):
        assert len(text.splitlines()) <= 300, module
        assert all(f.end_lineno - f.lineno < 60 for f in _functions(path)  # type: ignore[operator]
                   ), module
    calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "finding"]
    assert not calls, f"{module} makes a finding: record a fact (model/facts.py) instead"


def test_the_recorder_and_build_trace_stay_small() -> None:
    from gradtrace.capture.observers.base import Observer
    from gradtrace.capture.observers.table import OBSERVERS
    from gradtrace.extract.build import build_trace

    recorder = MODULES["gradtrace.capture.passes.recorder"].read_text(encoding="utf-8")
    init = recorder[recorder.index("    def __init__"):recorder.index("    def _observer(")]
    assert len(set(__import__("re").findall(r"self\.(\w+)(?:: [^=]+)? = ", init))) <= 15
    assert len(__import__("inspect").signature(build_trace).parameters) <= 4
    # every Observer subclass of the package is in the table, once
    made = {cls for cls in _subclasses(Observer)}
    assert made == set(OBSERVERS) and len(OBSERVERS) == len(set(OBSERVERS))


def test_no_observer_is_fetched_by_class_outside_the_recorder() -> None:
    """Observers are the recorder's: outside it (and each one's own module) no module names
    an observer class or asks the recorder for one; what others need, the recorder asks."""
    from gradtrace.capture.observers.table import OBSERVERS

    kinds = {kind.__name__: kind.__module__ for kind in OBSERVERS}
    allowed = {"gradtrace.capture.passes.recorder", "gradtrace.capture.observers.table"}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and module not in allowed:
                named = {a.name for a in node.names if a.name in kinds}
                assert all(kinds[n] == module for n in named), f"{module} imports {named}"
            if isinstance(node, ast.Attribute) and node.attr in ("_observer", "_observers"):
                assert module == "gradtrace.capture.passes.recorder", \
                    f"{module} asks for an observer ({node.attr}, line {node.lineno})"


def test_the_table_keeps_the_order_its_observers_need() -> None:
    from gradtrace.capture.observers.table import OBSERVERS, ORDER

    assert ORDER
    for earlier, later, why in ORDER:
        assert OBSERVERS.index(earlier) < OBSERVERS.index(later), why


def test_each_observer_hands_a_typed_frozen_part_of_its_own() -> None:
    """captured() returns a frozen dataclass whose fields are the capture record's, and no two
    observers set the same field."""
    import dataclasses
    import typing

    from gradtrace.capture.observers.base import Observer, Part
    from gradtrace.capture.observers.table import OBSERVERS
    from gradtrace.extract.captured import Captured

    record = {f.name for f in dataclasses.fields(Captured)}
    owner: dict[str, type] = {}
    for kind in OBSERVERS:
        if kind.captured is Observer.captured:
            continue
        part = typing.get_type_hints(kind.captured)["return"]
        assert isinstance(part, type) and issubclass(part, Part), kind
        assert part.__dataclass_params__.frozen, part  # type: ignore[attr-defined]
        for field in dataclasses.fields(part):
            assert field.name in record, f"{part.__name__}.{field.name} is no Captured field"
            assert field.name not in owner, f"{field.name}: {owner.get(field.name)} and {kind}"
            owner[field.name] = kind
    assert len(owner) >= 8


def test_the_session_is_a_short_pipeline() -> None:
    """session.py imports few of gradtrace's own modules: the steps are theirs."""
    own = {m for m in imports(MODULES["gradtrace.capture.session"])
           if m.startswith("gradtrace")}
    assert len(own) <= 12, sorted(own)


def test_nothing_edits_a_trace_after_build_trace(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The Trace a run returns is the very one build_trace built: what it printed, its rank
    and the cuts of its leaves went into the record first. A stopped run's, a cut leaf's,
    gradtrace.trace()'s and record()'s too."""
    import gradtrace
    from gradtrace.capture.passes import recorder
    from gradtrace.capture.runner import run_scenario
    from gradtrace.errors import ScenarioStopped

    built: list[object] = []
    real = recorder.build_trace

    def keeping(c: object) -> object:
        built.append(real(c))  # type: ignore[arg-type]
        return built[-1]

    monkeypatch.setattr(recorder, "build_trace", keeping)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    printing = tmp_path / "printing.py"
    printing.write_text("import torch\nw = torch.ones(2, requires_grad=True)\n"
                        "h = (w * 2).detach()\nloss = (h * 3).sum()\nprint('hello')\n"
                        "b = torch.ones(2, requires_grad=True)\nout = (b * h).sum()\n"
                        "out.backward()\n")
    trace = run_scenario(printing)
    assert trace is built[-1] and "hello" in trace.stdout and trace.ranks is not None
    assert [(f.code, f.line) for f in trace.findings] == [("unreached-leaf", 2),
                                                          ("graph-cut", 3)]
    stopping = tmp_path / "stopping.py"
    stopping.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n"
                        "(x * 2).sum().backward()\nprint('before')\nraise ValueError('no')\n")
    with pytest.raises(ScenarioStopped) as stopped:
        run_scenario(stopping)
    assert stopped.value.trace is built[-1] and "before" in stopped.value.trace.stdout
    x = __import__("torch").ones(2, requires_grad=True)
    view = gradtrace.trace((x * 2).sum())
    assert view.trace is built[-1]
    with gradtrace.record() as block:
        (x * 3).sum().backward()
    assert block.trace is built[-1] and len(block.trace.passes) == 1


def _subclasses(cls: type) -> list[type]:
    found, todo = [], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return found


def test_no_module_under_capture_imports_findings() -> None:
    """Capture records facts; findings/ phrases them (through build_trace, never from capture)."""
    importing = [m for m, path in MODULES.items() if m.startswith("gradtrace.capture")
                 and any(i == "gradtrace.findings" or i.startswith("gradtrace.findings.")
                         for i in imports(path))]
    assert not importing
