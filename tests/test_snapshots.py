"""The pytest plugin: graph snapshots written, matched, failed with the diff, updated."""

from __future__ import annotations

import json

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


def test_update_writes_then_a_rerun_matches(pytester: pytest.Pytester) -> None:
    write(pytester)
    pytester.runpytest("--gradtrace-update").assert_outcomes(passed=1)
    snapshot = pytester.path / "__gradtrace_snapshots__" / "test_model" / "test_mlp.json"
    data = json.loads(snapshot.read_text())
    assert data["schema"] == "gradtrace.trace/2"
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
