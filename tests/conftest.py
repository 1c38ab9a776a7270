"""Session fixtures: an expensive run (a real model's trace, the conv+BN check) happens once
per session (once per worker under pytest-xdist) and every test that asserts on it shares it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    EVERY_FEATURE,
    SHARED_RUNS,
    as_read,
    shared_invoke,
    show_without,
    trace_numbers,
    write_script,
)

from gradtrace.capture.script.scenario_thread import LEFT_BEHIND


def pytest_configure(config: pytest.Config) -> None:
    """One folder for the session's shared runs, made before pytest-xdist starts its workers
    (they inherit the environment), removed at the end."""
    if not hasattr(config, "workerinput") and SHARED_RUNS not in os.environ:
        os.environ[SHARED_RUNS] = tempfile.mkdtemp(prefix="gradtrace-shared-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(SHARED_RUNS),
                                                  ignore_errors=True))


@pytest.fixture(scope="session", autouse=True)
def piped_width() -> Iterator[None]:
    """Output is as wide as piped output (120 columns) whatever runs the tests: a terminal's
    COLUMNS and LINES do not reach gradtrace, nor those pytest-xdist's workers set (80x24).
    A test that wants a width says so (invoke(..., env={"COLUMNS": "200"}))."""
    saved = {name: os.environ.pop(name) for name in ("COLUMNS", "LINES") if name in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    """No test leaves a thread gradtrace gave up on (past its time limit) running in the
    worker: it would run on beside the tests after it, drawing from their RNG."""
    before = set(LEFT_BEHIND)
    yield
    left = [t.name for t in LEFT_BEHIND if t not in before and t.is_alive()]
    assert not left, f"left running: {left}; run the command in a process (run_gradtrace)"


@pytest.fixture(scope="session")
def shared_run() -> Callable[..., Any]:
    """invoke(*args), run once per distinct command line (helpers.shared_invoke)."""
    return lambda *args: shared_invoke(*(str(a) for a in args))


@pytest.fixture(scope="session")
def shared_trace(shared_run: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
    """The trace of `gradtrace show SCENARIO --json ARGS` (asserting its exit code), parsed
    afresh for each caller from the one shared run."""

    def trace(scenario: str | Path, *args: str, code: int = 0) -> dict[str, Any]:
        result = shared_run("show", scenario, "--json", *args)
        assert result.exit_code == code, result.stderr + result.stdout[-2000:]
        return as_read(result.stdout)

    return trace


@pytest.fixture(scope="session")
def shared_check(shared_run: Callable[..., Any]) -> Callable[..., tuple[int, dict[str, Any]]]:
    """The exit code and JSON report of `gradtrace check ARGS --json`, from one shared run."""

    def check(*args: str | Path) -> tuple[int, dict[str, Any]]:
        result = shared_run("check", *args, "--json")
        return result.exit_code, json.loads(result.stdout)

    return check


@pytest.fixture(scope="session")
def every_feature(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """helpers.EVERY_FEATURE as a file, and its numbers with every compat probe there (the
    compat tests force fallbacks and compare)."""
    script = write_script(tmp_path_factory.mktemp("compat"), EVERY_FEATURE)
    trace, stderr = show_without(script)
    assert "info:" not in stderr  # every probe is there on this torch
    assert trace["stdout"].startswith("hook calls 3 ")
    return script, trace_numbers(trace)
