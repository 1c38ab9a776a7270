"""The pytest plugin: graph snapshots written, matched, failed with the diff, updated."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch  # noqa: F401

# pytester's in-process runs forget modules first imported inside them; torch cannot be
# imported twice in one process, so it (and gradtrace's tracing) is imported here, once
import gradtrace.capture.runner  # noqa: F401

MODEL_TEST = """
import torch
from torch import nn


def test_mlp(gradtrace_snapshot):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.{act}(), nn.Linear(4, 1))
    x = torch.randn(8, 3){scale}
    loss = model(x).pow(2).mean()
    loss.backward()
    gradtrace_snapshot(loss)
"""


def write(pytester: pytest.Pytester, act: str = "ReLU", scale: str = "") -> None:
    pytester.makepyfile(test_model=MODEL_TEST.format(act=act, scale=scale))
    # ReLU -> Tanh keeps the size: rewritten within the same second, the file would be run
    # from the .pyc pytest wrote of the last one (it checks size and mtime only)
    shutil.rmtree(pytester.path / "__pycache__", ignore_errors=True)


def test_update_writes_then_a_rerun_matches(pytester: pytest.Pytester) -> None:
    write(pytester)
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    snapshot = pytester.path / "__gradtrace_snapshots__" / "test_model" / "test_mlp.json"
    data = json.loads(snapshot.read_text())
    assert data["schema"] == "gradtrace.trace/3"
    # named from the test's variables: the parameters by their dotted names, with their .grad
    weight = next(t for t in data["tensors"] if t["name"] == "model.0.weight")
    assert weight["grad"] is not None
    pytester.runpytest().assert_outcomes(passed=1)


def test_a_missing_snapshot_fails_and_says_how_to_write_it(pytester: pytest.Pytester) -> None:
    write(pytester)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no gradtrace snapshot*test_mlp.json: run `pytest "
                                 "--gradtrace-update` to write it*"])


def test_a_changed_graph_fails_with_the_diff(pytester: pytest.Pytester) -> None:
    write(pytester)
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    write(pytester, act="Tanh")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*different: 1 node(s) changed, 4 gradient(s) moved*",
        "*ReluBackward0 → TanhBackward0 (A n4, B n4)*",
        "*model.0.weight, final .grad: norm*",
        "*the autograd graph differs from*test_mlp.json*--gradtrace-update*",
    ])
    # accepted on purpose: updated, then it matches again
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    pytester.runpytest().assert_outcomes(passed=1)


def test_gradient_drift_beyond_tolerance_fails_and_within_passes(
        pytester: pytest.Pytester) -> None:
    write(pytester)
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    write(pytester, scale=" * 1.001")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*model.0.weight, final .grad: *"])
    result.stdout.no_fnmatch_line("*node(s) changed*")
    write(pytester, scale=" * 1.0000001")  # float32 noise: within the default tolerance
    pytester.runpytest().assert_outcomes(passed=1)


def test_assert_graph_matches_takes_a_trace_and_a_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_traced="""
import gradtrace
import torch


def test_cube(assert_graph_matches):
    x = torch.tensor(2.0, requires_grad=True)
    with gradtrace.record() as rec:
        y = (x ** 3).sin()
        y.backward()
    assert_graph_matches(rec, "cube")
""")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    saved = pytester.path / "__gradtrace_snapshots__" / "test_traced" / "cube.json"
    flow = json.loads(saved.read_text())["passes"][0]["flow"]
    assert flow  # a recorded pass: its gradient flow is in the snapshot
    pytester.runpytest().assert_outcomes(passed=1)


def test_something_that_is_not_a_graph_fails_with_gradtrace_s_message(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_wrong="""
import torch


def test_plain(gradtrace_snapshot):
    gradtrace_snapshot(torch.ones(3))
""")
    result = pytester.runpytest("--gradtrace-update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gradtrace_snapshot: gradtrace.trace() takes tensors that "
                                 "have a grad_fn*", "*hint: *"])
    result.stdout.no_fnmatch_line("*Traceback*")


def _snapshot(pytester: pytest.Pytester, test: str = "test_mlp") -> Path:
    return pytester.path / "__gradtrace_snapshots__" / "test_model" / f"{test}.json"


CORRUPT = {  # what a snapshot holds -> what the failure says is wrong with it
    b'{"schema": "gradtrace.trace/2", "nodes": [': "it is not JSON",  # cut short
    b"\xff\xfe not text": "it is not JSON",
    b"[1, 2, 3]": "cannot be read: ",  # JSON, not a trace
    None: "cannot be read: ",  # a folder where the file should be: unreadable
}


def test_a_corrupt_or_unreadable_snapshot_says_what_to_run(pytester: pytest.Pytester) -> None:
    write(pytester)
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    snapshot = _snapshot(pytester)
    for content, why in CORRUPT.items():
        if content is None:
            snapshot.unlink()
            snapshot.mkdir()  # exists, but cannot be read as a file (root reads any mode)
        else:
            snapshot.write_bytes(content)
        result = pytester.runpytest()
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*gradtrace snapshot *test_mlp.json cannot be read*",
                                     "*hint: run `pytest --gradtrace-update` to write it again*"])
        assert why in result.stdout.str()
        result.stdout.no_fnmatch_line("*Traceback*")
        result.stdout.no_fnmatch_line("*gradtrace/model/*")  # no frame of gradtrace's own
        result.stdout.no_fnmatch_line("*gradtrace show SCENARIO*")  # the CLI's hint, not pytest's
    snapshot.rmdir()
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)  # the fix it names
    pytester.runpytest().assert_outcomes(passed=1)


def test_snapshots_are_written_atomically(pytester: pytest.Pytester) -> None:
    from gradtrace.atomic import replace_file
    from gradtrace.pytest_plugin import write_atomic

    folder = pytester.path
    target = folder / "s.json"
    target.write_text("old")
    write_atomic(target, "new")
    assert target.read_text() == "new" and sorted(p.name for p in folder.iterdir()) == ["s.json"]
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()
    with pytest.raises(TypeError):  # a failed write: the old snapshot, no temporary file
        replace_file(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "new" and sorted(p.name for p in folder.iterdir()) == ["s.json"]


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


TWO_TESTS = MODEL_TEST + """

def test_{second}(gradtrace_snapshot):
    x = torch.ones(2, requires_grad=True)
    loss = (x * 3).sum()
    loss.backward()
    gradtrace_snapshot(loss)
"""


def two_tests(pytester: pytest.Pytester, second: str) -> None:
    pytester.makepyfile(test_model=TWO_TESTS.format(act="ReLU", scale="", second=second))


def test_unused_snapshots_are_reported_and_removed_by_update(pytester: pytest.Pytester) -> None:
    two_tests(pytester, "triple")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=2)
    assert _snapshot(pytester, "test_triple").exists()
    two_tests(pytester, "times_three")  # renamed: test_triple.json is used by no test now
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=2)
    assert _snapshot(pytester, "test_times_three").exists()
    assert not _snapshot(pytester, "test_triple").exists()  # removed by the update
    pytester.runpytest().assert_outcomes(passed=2)
    # one left behind by hand: reported, kept, the session still passes
    stale = _snapshot(pytester, "test_gone")
    stale.write_text(_snapshot(pytester).read_text())
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*gradtrace: 1 unused snapshot(s): no test used them*--gradtrace-update` removes them*",
        "  __gradtrace_snapshots__/test_model/test_gone.json"])
    assert stale.exists()
    # a test file renamed: its whole folder is unused
    other = pytester.path / "__gradtrace_snapshots__" / "test_old_name"
    other.mkdir()
    (other / "test_x.json").write_text("{}")
    result = pytester.runpytest("--gradtrace-update")
    result.stdout.fnmatch_lines(["*gradtrace: removed 2 unused snapshot(s)*"])
    assert not stale.exists() and not other.exists()
    result = pytester.runpytest()
    result.stdout.no_fnmatch_line("*unused snapshot*")


def test_a_partial_session_judges_no_snapshot(pytester: pytest.Pytester) -> None:
    two_tests(pytester, "triple")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=2)
    for args in (["-k", "mlp"], ["test_model.py::test_mlp"], ["-m", "not slow"],
                 ["--deselect", "test_model.py::test_mlp"]):
        result = pytester.runpytest("--gradtrace-update", *args)
        assert result.ret == 0
        result.stdout.no_fnmatch_line("*unused snapshot*")
        assert _snapshot(pytester, "test_triple").exists() and _snapshot(pytester).exists()


def test_a_failed_or_skipped_test_keeps_its_snapshot(pytester: pytest.Pytester) -> None:
    two_tests(pytester, "triple")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=2)
    skipping = TWO_TESTS.format(act="ReLU", scale="", second="triple").replace(
        "def test_triple(gradtrace_snapshot):",
        "def test_triple(gradtrace_snapshot):\n    import pytest\n    pytest.skip('not here')")
    pytester.makepyfile(test_model=skipping)
    result = pytester.runpytest("--gradtrace-update")
    result.assert_outcomes(passed=1, skipped=1)
    assert _snapshot(pytester, "test_triple").exists()
    result.stdout.no_fnmatch_line("*unused snapshot*")


def test_ids_that_differ_never_share_a_snapshot(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ids="""
import pytest
import torch


@pytest.mark.parametrize("scale", [pytest.param(2.0, id="a b"), pytest.param(3.0, id="a_b"),
                                   pytest.param(4.0, id="cpu-1")])
def test_collide(gradtrace_snapshot, scale):
    x = torch.ones(2, requires_grad=True)
    loss = (x * scale).sum()
    loss.backward()
    gradtrace_snapshot(loss)
""")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=3)
    folder = pytester.path / "__gradtrace_snapshots__" / "test_ids"
    names = {p.name for p in folder.iterdir()}
    # ids that sanitising leaves alone keep their names; "a b" gets a hash of its own
    assert {"test_collide_a_b.json", "test_collide_cpu-1.json"} < names and len(names) == 3
    assert any(re.fullmatch(r"test_collide_a_b-[0-9a-f]{8}\.json", n) for n in names), names
    pytester.runpytest().assert_outcomes(passed=3)  # each compared with its own snapshot


def test_methods_of_two_classes_never_share_a_snapshot(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_classes="""
import torch


class TestDouble:
    scale = 2.0

    def test_graph(self, gradtrace_snapshot):
        x = torch.ones(2, requires_grad=True)
        loss = (x * self.scale).sum()
        loss.backward()
        gradtrace_snapshot(loss)


class TestTriple(TestDouble):
    scale = 3.0
""")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=2)
    folder = pytester.path / "__gradtrace_snapshots__" / "test_classes"
    assert {p.name for p in folder.iterdir()} == {"TestDouble.test_graph.json",
                                                  "TestTriple.test_graph.json"}
    pytester.runpytest().assert_outcomes(passed=2)


@pytest.mark.parametrize("name", ["../../x", "../x", "sub/../../x", "{tmp}/x"])
def test_a_snapshot_name_cannot_leave_the_folder(pytester: pytest.Pytester, name: str) -> None:
    name = name.format(tmp=pytester.path.parent)  # absolute
    pytester.makepyfile(test_away=f"""
import torch


def test_away(assert_graph_matches):
    x = torch.ones(2, requires_grad=True)
    assert_graph_matches((x * 2).sum(), {name!r})
""")
    before = {p for p in pytester.path.parent.rglob("*") if p.is_file()}
    result = pytester.runpytest("--gradtrace-update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*gradtrace_snapshot: name={name!r} would leave "
                                 "__gradtrace_snapshots__/*"])
    result.stdout.no_fnmatch_line("*Traceback*")
    after = {p for p in pytester.path.parent.rglob("*") if p.is_file()}
    assert not [p for p in after - before if p.suffix == ".json"]


def test_a_snapshot_name_may_name_a_subfolder(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sub="""
import torch


def test_sub(assert_graph_matches):
    x = torch.ones(2, requires_grad=True)
    assert_graph_matches((x * 2).sum(), "models/cube")
""")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    assert (pytester.path / "__gradtrace_snapshots__" / "test_sub" / "models" / "cube.json"
            ).exists()
    pytester.runpytest().assert_outcomes(passed=1)


ATTENTION_TEST = """
import torch
import torch.nn.functional as F


def test_attention(gradtrace_snapshot):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    loss = out.pow(2).mean()
    loss.backward()
    gradtrace_snapshot(loss)
"""


def test_a_snapshot_of_another_device_s_kernels_matches_the_same_ops(
        pytester: pytest.Pytester) -> None:
    """The CPU names its attention kernel ScaledDotProductFlashAttentionForCpuBackward0, a
    GPU ScaledDotProductEfficientAttentionBackward0: one op, and a snapshot taken on either
    matches a run on the other."""
    pytester.makepyfile(test_attn=ATTENTION_TEST)
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    snapshot = pytester.path / "__gradtrace_snapshots__" / "test_attn" / "test_attention.json"
    text = snapshot.read_text()
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in text
    snapshot.write_text(text.replace("ScaledDotProductFlashAttentionForCpuBackward0",
                                     "ScaledDotProductEfficientAttentionBackward0"))
    pytester.runpytest().assert_outcomes(passed=1)
    # another op in its place is a change still
    snapshot.write_text(text.replace("ScaledDotProductFlashAttentionForCpuBackward0",
                                     "BmmBackward0"))
    pytester.runpytest().assert_outcomes(failed=1)


def test_only_a_device_s_kernel_names_are_made_one() -> None:
    from gradtrace.diff.kernels import neutral_type

    assert neutral_type("CudnnBatchNormBackward0") == neutral_type("NativeBatchNormBackward0")
    assert neutral_type("ScaledDotProductFlashAttentionForCpuBackward0") == \
        neutral_type("ScaledDotProductCudnnAttentionBackward0")
    assert neutral_type("MmBackward0") == "MmBackward0"


DESELECTING = {
    "told": """
def pytest_collection_modifyitems(config, items):
    config.hook.pytest_deselected(items=[i for i in items if i.name == "test_triple"])
    items[:] = [i for i in items if i.name != "test_triple"]
""",
    "untold": """
def pytest_collection_modifyitems(config, items):
    items[:] = [i for i in items if i.name != "test_triple"]
""",
}


@pytest.mark.parametrize(("conftest", "workers"), [("told", "1"), ("untold", "0")])
def test_a_test_a_conftest_deselects_keeps_its_snapshot(
        pytester: pytest.Pytester, conftest: str, workers: str) -> None:
    two_tests(pytester, "triple")
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=2)
    pytester.makeconftest(DESELECTING[conftest])
    # under xdist the workers collect and deselect; the controller judges the snapshots
    result = pytester.runpytest("--gradtrace-update", "-p", "xdist", "-n", workers)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*unused snapshot*")
    assert _snapshot(pytester, "test_triple").exists() and _snapshot(pytester).exists()


def test_a_file_not_collected_keeps_its_snapshots_and_others_are_judged(
        pytester: pytest.Pytester) -> None:
    two_tests(pytester, "triple")
    pytester.makepyfile(test_other=MODEL_TEST.format(act="ReLU", scale=""))  # a second file
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=3)
    other = pytester.path / "__gradtrace_snapshots__" / "test_other" / "test_mlp.json"
    stale = _snapshot(pytester, "test_gone")
    stale.write_text(_snapshot(pytester).read_text())
    result = pytester.runpytest("--gradtrace-update", "test_model.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*gradtrace: removed 1 unused snapshot(s)*"])
    assert not stale.exists() and other.exists() and _snapshot(pytester, "test_triple").exists()
