"""Shared helpers: run the real CLI in-process and read its JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gradtrace.cli import app

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(DOT is None, reason="Graphviz is installed by dev.py")


def invoke(*args: str | Path, env: dict[str, str | None] | None = None) -> Any:
    """Run `gradtrace ARGS` in-process; stdout and stderr are kept apart."""
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def show_json(scenario: str | Path, *args: str) -> dict[str, Any]:
    """The JSON of `gradtrace show SCENARIO --json`, asserting it succeeded."""
    path = scenario if Path(scenario).is_absolute() else SCENARIOS / scenario
    result = invoke("show", path, "--json", *args)
    assert result.exit_code == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def tensor(trace: dict[str, Any], name: str) -> dict[str, Any]:
    """The tensors[] row of a named tensor."""
    rows = [t for t in trace["tensors"] if t["name"] == name]
    assert rows, f"no tensor {name!r} in {[t['name'] for t in trace['tensors']]}"
    return rows[0]


def grad(trace: dict[str, Any], name: str) -> Any:
    """The final .grad values of a named tensor (None when it has none)."""
    g = tensor(trace, name)["grad"]
    return None if g is None else g["values"]
