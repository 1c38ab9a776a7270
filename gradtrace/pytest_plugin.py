"""Graph snapshots for pytest: `gradtrace_snapshot(loss)` fails a test when the autograd
graph or its gradients changed since the snapshot was taken.

Installed with gradtrace (a `pytest11` entry point). Snapshots are saved traces under
`__gradtrace_snapshots__/<test file>/<name>.json` beside the test file; `pytest
--gradtrace-update` writes them (atomically). At the end of a session that ran every test,
snapshots no test used (a renamed or deleted test) are listed, and `--gradtrace-update` removes
them; a file some tests of which were deselected or skipped keeps them all. Importing this
module does not import torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import Any, NoReturn

import pytest

from .atomic import replace_file

SNAPSHOTS = "__gradtrace_snapshots__"
USED = "gradtrace_snapshot"  # the user property naming each snapshot a test used
UPDATE_HINT = "run `pytest --gradtrace-update` to write it again, then review and commit it"
PART_RUN = "gradtrace_deselected"  # an xdist worker's output: files it deselected tests of
# options that run part of the session: snapshots of tests that did not run are not unused
PARTIAL_OPTIONS = ("keyword", "markexpr", "deselect", "lf", "failedfirst", "stepwise",
                   "stepwise_skip")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradtrace")
    group.addoption("--gradtrace-update", action="store_true", default=False,
                    help="Write gradtrace graph snapshots instead of comparing with them.")


class GraphSnapshot:
    """The fixture's value: call it with output tensors (or a gradtrace trace) to compare
    their graph with the test's snapshot."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._folder = Path(request.node.path).parent / SNAPSHOTS / Path(request.node.path).stem
        # a method's class is part of its name: TestA.test_x and TestB.test_x differ
        cls = getattr(request.node, "cls", None)
        self._test = snapshot_stem(f"{cls.__qualname__}.{request.node.name}" if cls
                                   else request.node.name)
        self._update = bool(request.config.getoption("gradtrace_update"))
        self._calls = 0
        self._used = request.node.user_properties  # reaches the end of the session (xdist too)

    def __call__(self, *outputs: Any, name: str | None = None, rtol: float | None = None,
                 atol: float | None = None, backward: bool = False) -> Path:
        """Snapshot the graph behind outputs (tensors, or a gradtrace.trace()/record()
        result), named after the test unless name is given; returns the snapshot's path.

        Tensors are named from the calling test's variables (model parameters by their
        dotted names). Call it after `loss.backward()` to compare .grad too, or pass
        backward=True to have gradtrace run backward and record the flow.
        """
        from .compat.cpython import caller_frame
        from .diff.compare import ATOL, RTOL
        from .errors import GradtraceError

        try:
            trace = _trace_of(outputs, caller_frame(), backward)
        except GradtraceError as exc:  # said as gradtrace says it, not as a traceback
            pytest.fail(f"gradtrace_snapshot: {exc}" + (f"\nhint: {exc.hint}" if exc.hint
                                                         else ""), pytrace=False)
        self._calls += 1
        if name is not None:
            _refuse_outside(name)
        stem = name or (self._test if self._calls == 1 else f"{self._test}.{self._calls}")
        path = self._folder / f"{stem}.json"
        self._used.append((USED, str(path)))
        return self._check(trace, path, RTOL if rtol is None else rtol,
                           ATOL if atol is None else atol)

    def _check(self, trace: Any, path: Path, rtol: float, atol: float) -> Path:
        from .diff.compare import compare
        from .diff.kernels import device_neutral
        from .errors import GradtraceError
        from .model.codec import trace_from_dict
        from .render.json import to_json

        if self._update:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, to_json(trace))
            return path
        if not path.exists():
            pytest.fail(f"no gradtrace snapshot {path}: run `pytest --gradtrace-update` to "
                        "write it, then commit it", pytrace=False)
        try:
            saved = trace_from_dict(json.loads(path.read_text(encoding="utf-8")))
        except OSError as exc:
            _unreadable(path, exc.strerror or str(exc))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            _unreadable(path, f"it is not JSON ({exc})")
        except RecursionError:
            _unreadable(path, "it is nested too deeply to be a gradtrace trace")
        except GradtraceError as exc:  # valid JSON, but not a trace: its own words, our hint
            _unreadable(path, exc.message)
        # a snapshot taken on a laptop holds its CPU kernels' names: the GPU's are the same ops
        diff = compare(*device_neutral(saved, trace), f"snapshot {path.name}", "this run", rtol,
                       atol)
        if not diff.same:
            pytest.fail(f"{_report(diff)}\nthe autograd graph differs from {path}: if the "
                        "change is meant, run `pytest --gradtrace-update` and commit the "
                        "snapshot", pytrace=False)
        return path


def snapshot_stem(test: str) -> str:
    """The snapshot's file name for a test (without .json): its name, a parametrize id after
    `_` (test_x[cpu-1] -> test_x_cpu-1); when making it a safe file name changed more than
    that, a short hash of the name follows, so ids that differ ("a b", "a_b") never share
    a file and the names of existing snapshots stay as they were."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", test).strip("_")
    base, bracket, ident = test.partition("[")
    if stem == (f"{base}_{ident.removesuffix(']')}" if bracket else test):
        return stem
    return f"{stem}-{hashlib.sha256(test.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _refuse_outside(name: str) -> None:
    """A snapshot name= stays inside the snapshot folder: no absolute path, no `..` part."""
    if PurePath(name).is_absolute() or ".." in PurePath(name).parts:
        pytest.fail(f"gradtrace_snapshot: name={name!r} would leave {SNAPSHOTS}/: give a name "
                    "inside it, without `..` and not absolute (e.g. \"cube\" or "
                    "\"models/cube\")", pytrace=False)


def _unreadable(path: Path, why: str) -> NoReturn:
    pytest.fail(f"gradtrace snapshot {path} cannot be read: {why}\nhint: {UPDATE_HINT}",
                pytrace=False)


def write_atomic(path: Path, text: str) -> None:
    """Write text to path through a temporary file beside it that replaces it when complete:
    an interrupted or failed write leaves the old snapshot or none, never half of one."""
    replace_file(path, text.encode("utf-8"))


class UnusedSnapshots:
    """At the end of a session that ran every test and passed, the snapshots no test used:
    listed, and removed by --gradtrace-update. Only test files whose every test passed are
    judged (a skipped or failed test may not have reached its snapshot), and folders of test
    files that no longer exist. Reads the reports, so it works under pytest-xdist too."""

    def __init__(self, config: pytest.Config, cut: set[Path]) -> None:
        self.config = config
        self.used: set[Path] = set()
        self.files: dict[Path, bool] = {}  # each test file that ran -> all its tests passed
        self.found: list[Path] = []  # the unused snapshots, once the session finished
        self.partial = any(self.config.getoption(name, None) for name in PARTIAL_OPTIONS) \
            or any("::" in str(arg) for arg in config.args)
        self.cut = cut  # test files some tests of which were deselected (xdist: the workers')

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """An xdist worker ended: the files it left tests of uncollected (none known: every
        file's snapshots are kept)."""
        told = getattr(node, "workeroutput", {}).get(PART_RUN)
        if error is not None or told is None:
            self.partial = True
        else:
            self.cut.update(Path(file) for file in told)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        file = Path(str(self.config.rootpath / report.nodeid.split("::")[0])).resolve()
        self.files[file] = self.files.get(file, True) and not (report.failed or report.skipped)
        self.used.update(Path(str(value)).resolve() for name, value in report.user_properties
                         if name == USED)

    def unused(self, session: pytest.Session) -> list[Path]:
        """The unused snapshots, or none when the session cannot tell."""
        if self.partial or session.testsfailed or session.shouldstop or session.shouldfail \
                or not self.files:
            return []
        found: set[Path] = set()
        for file, passed in self.files.items():
            folder = file.parent / SNAPSHOTS
            if passed and file not in self.cut:
                found.update((folder / file.stem).glob("*.json"))
            if folder.is_dir():  # the snapshots of test files renamed or deleted
                for stem in folder.iterdir():
                    if stem.is_dir() and not (file.parent / f"{stem.name}.py").exists():
                        found.update(stem.glob("*.json"))
        return sorted(found - self.used)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.found = self.unused(session) if exitstatus == 0 else []
        if self.found and self.config.getoption("gradtrace_update"):
            for path in self.found:
                path.unlink(missing_ok=True)
                with contextlib.suppress(OSError):  # the folder, once empty
                    path.parent.rmdir()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        unused = self.found
        if not unused:
            return
        shown = [os.path.relpath(p, self.config.rootpath) for p in unused]
        if self.config.getoption("gradtrace_update"):
            terminalreporter.write_sep("-", f"gradtrace: removed {len(unused)} unused "
                                       "snapshot(s)")
        else:
            terminalreporter.write_sep("-", f"gradtrace: {len(unused)} unused snapshot(s): no "
                                       "test used them (renamed or deleted tests?); `pytest "
                                       "--gradtrace-update` removes them")
        for line in shown:
            terminalreporter.write_line(f"  {line}")


class Deselections:
    """In the process that collects (each xdist worker; told to the controller as it ends):
    the test files some of whose tests were deselected, by -k, -m, --deselect or a conftest's
    pytest_collection_modifyitems, whether it told pytest_deselected or not."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.cut: set[Path] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> Any:
        before = Counter(_file(item) for item in items)
        try:
            return (yield)
        finally:
            after = Counter(_file(item) for item in items)
            self._cut(file for file, n in before.items() if after[file] < n)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self._cut(_file(item) for item in items)

    def _cut(self, files: Iterable[Path]) -> None:
        self.cut.update(files)
        if hasattr(self.config, "workeroutput"):
            self.config.workeroutput[PART_RUN] = sorted(map(str, self.cut))


def _file(item: pytest.Item) -> Path:
    return Path(str(item.path)).resolve()


def pytest_configure(config: pytest.Config) -> None:
    deselections = Deselections(config)
    config.pluginmanager.register(deselections, "gradtrace-deselections")
    if hasattr(config, "workerinput"):  # an xdist worker: the controller judges
        config.workeroutput[PART_RUN] = []  # type: ignore[attr-defined]
    else:
        config.pluginmanager.register(UnusedSnapshots(config, deselections.cut),
                                      "gradtrace-unused-snapshots")


def _trace_of(outputs: tuple[Any, ...], frame: Any, backward: bool) -> Any:
    """The Trace of outputs: a Trace or TraceView as it is, tensors traced now."""
    from .api import TraceView
    from .model.records import Trace

    if len(outputs) == 1 and isinstance(outputs[0], (Trace, TraceView)):
        return outputs[0].trace if isinstance(outputs[0], TraceView) else outputs[0]
    from .capture.live import trace_tensors  # imports torch

    names = {} if frame is None else {**frame.f_globals, **frame.f_locals}
    return trace_tensors(list(outputs), names, backward, saved=False)


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
