"""A scenario file read and compiled as `python` reads it, with errors that say where."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import CodeType

from ...errors import ScenarioError


def compile_scenario(path: str) -> tuple[CodeType, list[str]]:
    """The file's code object and its lines, or a ScenarioError naming what is wrong."""
    p = Path(path)
    if not p.exists():
        raise ScenarioError(f"no such file: {path}", "check the path; scenarios are .py files")
    if p.is_dir():
        raise ScenarioError(f"{path} is a directory, not a scenario file",
                            "pass a .py file, e.g. train.py, or a bundled example: "
                            "example:chain_rule")
    if p.suffix != ".py":
        raise ScenarioError(
            f"{path} is not a Python file (expected a .py scenario)",
            "a scenario is ordinary Python code that builds tensors; name it *.py",
        )
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read {path}: {exc.strerror}") from exc
    try:  # bytes, as `python` reads a file: a BOM or a coding cookie picks the encoding
        code = compile(data, path, "exec")
        source = importlib.util.decode_source(data)
    except SyntaxError as exc:
        if "unicode error" in exc.msg or "Non-UTF-8" in exc.msg:
            raise ScenarioError(
                f"{path} is not UTF-8 text and declares no other encoding: {exc.msg}",
                "save the scenario as UTF-8, or declare its encoding on line 1 or 2 "
                "(# -*- coding: latin-1 -*-)") from exc
        where = f"{path}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
        text = (exc.text or "").rstrip("\n")
        shown = f"\n    {text.strip()}" if text.strip() else ""
        raise ScenarioError(
            f"{where}: syntax error: {exc.msg}{shown}",
            f"fix the line; `python {path}` shows the same error",
        ) from exc
    except (ValueError, LookupError) as exc:  # NUL bytes, an unknown encoding
        raise ScenarioError(f"{path} cannot be compiled: {exc}") from exc
    return code, source.splitlines()
