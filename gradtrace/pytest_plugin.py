"""Graph snapshots for pytest: `gradtrace_snapshot(loss)` fails a test when the autograd
graph or its gradients changed since the snapshot was taken.

Installed with gradtrace (a `pytest11` entry point). Snapshots are saved traces under
`__gradtrace_snapshots__/<test file>/<name>.json` beside the test file; `pytest
--gradtrace-update` writes them. Importing this module does not import torch.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

SNAPSHOTS = "__gradtrace_snapshots__"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradtrace")
    group.addoption("--gradtrace-update", action="store_true", default=False,
                    help="Write gradtrace graph snapshots instead of comparing with them.")


class GraphSnapshot:
    """The fixture's value: call it with output tensors (or a gradtrace trace) to compare
    their graph with the test's snapshot."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._folder = Path(request.node.path).parent / SNAPSHOTS / Path(request.node.path).stem
        self._test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")
        self._update = bool(request.config.getoption("gradtrace_update"))
        self._calls = 0

    def __call__(self, *outputs: Any, name: str | None = None, rtol: float | None = None,
                 atol: float | None = None, backward: bool = False) -> Path:
        """Snapshot the graph behind outputs (tensors, or a gradtrace.trace()/record()
        result), named after the test unless name is given; returns the snapshot's path.

        Tensors are named from the calling test's variables (model parameters by their
        dotted names). Call it after `loss.backward()` to compare .grad too, or pass
        backward=True to have gradtrace run backward and record the flow.
        """
        from .diff.compare import ATOL, RTOL
        from .errors import GradtraceError

        try:
            trace = _trace_of(outputs, sys._getframe(1), backward)
        except GradtraceError as exc:  # said as gradtrace says it, not as a traceback
            pytest.fail(f"gradtrace_snapshot: {exc}" + (f"\nhint: {exc.hint}" if exc.hint
                                                         else ""), pytrace=False)
        self._calls += 1
        stem = name or (self._test if self._calls == 1 else f"{self._test}.{self._calls}")
        path = self._folder / f"{stem}.json"
        return self._check(trace, path, RTOL if rtol is None else rtol,
                           ATOL if atol is None else atol)

    def _check(self, trace: Any, path: Path, rtol: float, atol: float) -> Path:
        from .diff.compare import compare
        from .model.codec import trace_from_dict
        from .render.json import to_json

        if self._update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(to_json(trace), encoding="utf-8")
            return path
        if not path.exists():
            pytest.fail(f"no gradtrace snapshot {path}: run `pytest --gradtrace-update` to "
                        "write it, then commit it", pytrace=False)
        saved = trace_from_dict(json.loads(path.read_text(encoding="utf-8")))
        diff = compare(saved, trace, f"snapshot {path.name}", "this run", rtol, atol)
        if not diff.same:
            pytest.fail(f"{_report(diff)}\nthe autograd graph differs from {path}: if the "
                        "change is meant, run `pytest --gradtrace-update` and commit the "
                        "snapshot", pytrace=False)
        return path


def _trace_of(outputs: tuple[Any, ...], frame: Any, backward: bool) -> Any:
    """The Trace of outputs: a Trace or TraceView as it is, tensors traced now."""
    from .api import TraceView
    from .model.records import Trace

    if len(outputs) == 1 and isinstance(outputs[0], (Trace, TraceView)):
        return outputs[0].trace if isinstance(outputs[0], TraceView) else outputs[0]
    from .capture.live import trace_tensors  # imports torch

    return trace_tensors(list(outputs), {**frame.f_globals, **frame.f_locals}, backward,
                         saved=False)


def _report(diff: Any) -> str:
    from rich.console import Console

    from .render.diffs import diff_report

    out = io.StringIO()
    Console(file=out, width=100, color_system=None, highlight=False).print(diff_report(diff))
    return out.getvalue()


@pytest.fixture
def gradtrace_snapshot(request: pytest.FixtureRequest) -> GraphSnapshot:
    """`gradtrace_snapshot(loss)`: fail when loss's autograd graph or gradients changed since
    the snapshot (`pytest --gradtrace-update` writes it)."""
    return GraphSnapshot(request)


@pytest.fixture
def assert_graph_matches(gradtrace_snapshot: GraphSnapshot) -> Any:
    """`assert_graph_matches(trace, "name")`: the same check, for a trace made beforehand
    (gradtrace.trace(...) or gradtrace.record()) under a name of your choosing."""
    def check(trace: Any, name: str, rtol: float | None = None,
              atol: float | None = None) -> Path:
        return gradtrace_snapshot(trace, name=name, rtol=rtol, atol=atol)

    return check
