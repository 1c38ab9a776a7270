"""What `gradtrace check` runs for the paths it is given: each script, and in a pytest-style
test file each test function as FILE::FUNC (as `gradtrace show FILE::FUNC` runs one)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ..model.examples import PREFIX, example_path, folder_examples, is_example
from ..model.labels import label_file

# pytest's defaults: python_files, python_classes, python_functions
TEST_FILE = re.compile(r"^(test_.*|.*_test)\.py$")


class Targets(NamedTuple):
    """The targets to run, in a stable order, and what was left out and why."""

    targets: list[str]
    notes: list[str]


def targets_of(paths: Iterable[str]) -> Targets:
    """The files named (FILE::FUNC as given) and the .py files below the folders named; a
    test file stands for its test functions. A bundled example (example:NAME) is named as
    given; a folder of them (example:broken) stands for each example in it."""
    found: list[str] = []
    notes: list[str] = []
    for raw in paths:
        if is_example(raw):
            examples(raw, found, notes)
            continue
        p = Path(raw)
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for file in files:
            if label_file(raw) != raw or not TEST_FILE.match(file.name):
                found.append(raw if not p.is_dir() else str(file))
                continue
            tests, left_out = test_functions(file)
            found.extend(tests or [str(file)])  # no test function: run it as a script
            notes.extend(left_out)
    return Targets(list(dict.fromkeys(found)), notes)


def examples(raw: str, found: list[str], notes: list[str]) -> None:
    """example:NAME as given (an unknown one fails when it runs, saying why), a folder of
    examples as its examples, a test file's example as its test functions."""
    inside = [] if example_path(raw[len(PREFIX):].removesuffix(".py")) else \
        folder_examples(raw[len(PREFIX):])
    for label in [PREFIX + e.name for e in inside] or [raw]:
        file = Path(label_file(label))
        if label_file(label) == label or "::" in label or not TEST_FILE.match(file.name):
            found.append(label)
            continue
        tests, left_out = test_functions(file)
        found.extend(label + t.removeprefix(str(file)) for t in tests or [str(file)])
        notes.extend(left_out)


def test_functions(path: Path) -> tuple[list[str], list[str]]:
    """FILE::test_x and FILE::TestX::test_y for the tests pytest would collect that can be
    called without arguments; and a note for each that needs some (fixtures). Read with ast:
    nothing of the file runs here. A file that cannot be read or parsed has none (running
    it says what is wrong)."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return [], []
    tests: list[str] = []
    notes: list[str] = []

    def take(name: str, function: ast.FunctionDef | ast.AsyncFunctionDef,
             method: bool) -> None:
        label = f"{path}::{name}"
        if isinstance(function, ast.AsyncFunctionDef):
            notes.append(f"{label} is async: not run")
            return
        needed = _required(function.args)[1 if method else 0:]
        if needed:
            notes.append(f"{label} takes arguments ({', '.join(needed)}), pytest "
                         "fixtures: not run")
        else:
            tests.append(label)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                node.name.startswith("test"):
            take(node.name, node, method=False)
        elif isinstance(node, ast.ClassDef) and _test_class(node):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        item.name.startswith("test"):
                    take(f"{node.name}::{item.name}", item, method=not _static(item))
    return tests, notes


def _test_class(node: ast.ClassDef) -> bool:
    """A class pytest collects: Test* without __init__, or a unittest.TestCase."""
    bases = {ast.unparse(b).rpartition(".")[2] for b in node.bases}
    if "TestCase" in bases:
        return True
    return node.name.startswith("Test") and not any(
        isinstance(item, ast.FunctionDef) and item.name == "__init__" for item in node.body)


def _static(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(ast.unparse(d) == "staticmethod" for d in function.decorator_list)


def _required(args: ast.arguments) -> list[str]:
    """The parameters without a default, in order."""
    positional = [*args.posonlyargs, *args.args]
    with_default = len(args.defaults)
    needed = [a.arg for a in positional[:len(positional) - with_default]]
    needed += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
               if d is None]
    return needed
