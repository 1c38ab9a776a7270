"""What a run executes: a file as `python FILE ARGS` runs it, or one function of it
(FILE::FUNC, pytest's node-id style), with the module installed where Python looks for it."""

from __future__ import annotations

import builtins
import contextlib
import inspect
import os
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import CodeType
from typing import Any, NamedTuple

from ...compat.cpython import idle_pool_worker
from ...errors import ScenarioError
from ...model.examples import PREFIX, is_example, resolve
from ...model.labels import label_file


class Target(NamedTuple):
    """A scenario file, the function in it to call (None: run it as a script), its argv, and
    the name it is shown by when it is a bundled example (example:chain_rule)."""

    path: str
    function: str | None = None
    args: tuple[str, ...] = ()
    example: str | None = None

    @property
    def label(self) -> str:
        shown = self.example or self.path
        return shown if self.function is None else f"{shown}::{self.function}"


def parse_target(text: str, args: Sequence[str] = ()) -> Target:
    """"s.py" or "test_s.py::test_grad" or "test_s.py::TestGrad::test_grad"; a file whose name
    holds "::" ("a::b.py") is that file; "example:chain_rule" a bundled example (an unknown
    name is a ScenarioError saying how to list them)."""
    if is_example(text):
        name, _, function = text[len(PREFIX):].partition("::")
        if text.endswith("::") and not function.strip(":"):
            raise ScenarioError(f"{text}: no function after ::",
                                "name one, e.g. example:real/test_value_grads::test_sanity_check")
        return Target(str(resolve(name)), function or None, tuple(args),
                      PREFIX + name.removesuffix(".py"))
    path = label_file(text)
    function = text[len(path) + 2:]
    if text.endswith("::") and not function.strip(":"):
        raise ScenarioError(f"{text}: no function after ::",
                            "name one, e.g. tests/test_model.py::test_backward")
    return Target(path, function or None, tuple(args))


@contextlib.contextmanager
def installed_module(target: Target) -> Iterator[types.ModuleType]:
    """A real module object for the file, in sys.modules while it runs: `__main__` for a
    script (pickling the classes it defines works as under `python`), its file name when
    only a function of it runs (so its `if __name__ == "__main__":` block does not)."""
    name = "__main__" if target.function is None else Path(target.path).stem
    module = types.ModuleType(name)
    module.__file__ = os.path.abspath(target.path)  # as python's, whatever the script's chdir
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield module
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous


def run_module(code: CodeType, module: types.ModuleType) -> None:
    """Run the module's code, then wait for the non-daemon threads it started, as `python`
    does before it exits (the time limit bounds the wait)."""
    before = set(threading.enumerate())
    try:
        exec(code, module.__dict__)
    finally:
        while waiting := [t for t in threading.enumerate() if t not in before and not t.daemon
                          and t.is_alive() and not idle_pool_worker(t)]:
            for thread in waiting:
                thread.join(0.05)  # in slices: the time limit can stop this thread here


def call_function(target: Target, module: types.ModuleType) -> tuple[Any, dict[str, Any]]:
    """Call FUNC of the imported module with no arguments: its return value, and its locals
    as it returned."""
    function = _resolve(target, module)
    needed = [p.name for p in inspect.signature(function).parameters.values()
              if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        raise ScenarioError(
            f"{target.label} needs arguments ({', '.join(needed)}): gradtrace calls it with "
            "none, and pytest fixtures are not supplied",
            "give the parameters defaults, or point gradtrace at a function without "
            "parameters that calls it")
    plain = inspect.unwrap(function)
    if inspect.isgeneratorfunction(plain) or inspect.isasyncgenfunction(plain):
        raise ScenarioError(
            f"{target.label} is a generator: calling it runs none of its body, so it makes "
            "no tensors to trace; generators are not supported as FUNC",
            "call it from a function that returns the tensor it yields, e.g. "
            "`def traced(): return next(gen())`, and name that one: FILE::traced")
    # here, not at the top: parse_target serves the CLI, which must not import torch
    from ...compat.torch import never_compiled

    code = plain.__code__  # type: ignore[attr-defined]
    seen: dict[str, Any] = {}

    @never_compiled  # a profile function is a frame too: never rewritten by torch.compile
    def on_return(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is code:  # the outermost call returns last
            seen.clear()
            seen.update(frame.f_locals)

    previous = sys.getprofile()
    sys.setprofile(on_return)
    try:
        result = function()
    finally:
        sys.setprofile(previous)
    seen.pop("self", None)
    return result, seen


def _resolve(target: Target, module: types.ModuleType) -> Any:
    """The callable FUNC names: a function, or Class::method on a fresh instance."""
    first, _, method = (target.function or "").partition("::")
    found = module.__dict__.get(first)
    if found is None:
        defined = sorted(n for n, v in module.__dict__.items()
                         if inspect.isfunction(v) and v.__module__ == module.__name__)
        raise ScenarioError(f"{target.path} has no function {first!r}",
                            "functions in it: " + (", ".join(defined) or "none"))
    if not method:
        if not callable(found) or inspect.isclass(found):
            raise ScenarioError(f"{target.label} is not a function",
                                "name a function, or Class::method")
        return found
    if not inspect.isclass(found) or not callable(getattr(found, method, None)):
        raise ScenarioError(f"{target.label}: {first} has no method {method!r}")
    import unittest  # only here: most runs never need it

    if issubclass(found, unittest.TestCase):
        case = found(method)
        case.setUp()
        return getattr(case, method)
    return getattr(found(), method)
