"""Gradient summaries: equal to torch's own norm, min and max, however the tensor is laid out."""

from __future__ import annotations

import math

import pytest
import torch

from gradtrace.capture.observers.flow import content_key
from gradtrace.extract.summary import StatsTable, dense_flat, grad_stats, summarize, to_summaries

base = torch.arange(2 * 3 * 40, dtype=torch.float32).reshape(2, 3, 40) / 7 - 10

LAYOUTS = {
    "contiguous": base,
    "transposed": base.transpose(0, 2),
    "permuted": base.permute(1, 2, 0),
    "strided slice": base[:, :, ::2],
    "expanded": torch.randn(1, 100).expand(3, 100),
    "small": torch.tensor([[1.0, -2.0], [3.0, 4.0]]),
    "scalar": torch.tensor(-0.25),
    "float64": base.double(),
    "float16": base.half(),
    "int": torch.arange(-50, 50),
    "bool": torch.tensor([True, False] * 40),
    "complex": torch.randn(70, dtype=torch.complex64),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_summary_matches_torch(name: str) -> None:
    t = LAYOUTS[name]
    s = summarize(t)
    ref = (t.abs() if t.is_complex() else t).double()
    assert s.shape == tuple(t.shape)
    assert s.norm == pytest.approx(torch.linalg.vector_norm(ref).item(), rel=1e-4)
    assert s.min == pytest.approx(ref.min().item()) and s.max == pytest.approx(ref.max().item())
    assert s.finite is True
    if t.numel() <= 64:
        assert s.values == t.tolist()
    else:
        assert s.values is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("size", [5, 500])
def test_non_finite_is_seen_small_and_large(bad: float, size: int) -> None:
    t = torch.ones(size)
    t[size // 2] = bad
    s = summarize(t)
    assert s.finite is False
    if bad != bad:
        assert s.min != s.min and s.max != s.max  # NaN propagates, as torch.min does
    elif bad > 0:
        assert s.max == math.inf
    else:
        assert s.min == -math.inf


def test_empty() -> None:
    s = summarize(torch.zeros(0, 3))
    assert (s.shape, s.norm, s.min, s.max, s.finite) == ((0, 3), 0.0, None, None, True)


def test_dense_flat_covers_exactly_the_elements() -> None:
    for name in ("contiguous", "transposed", "permuted"):
        t = LAYOUTS[name]
        flat = dense_flat(t)
        assert flat is not None
        assert sorted(flat.tolist()) == sorted(t.reshape(-1).tolist())
    assert dense_flat(LAYOUTS["strided slice"]) is None
    assert dense_flat(LAYOUTS["expanded"]) is None


def test_transpose_shares_a_content_key_and_a_copy_does_not() -> None:
    t = LAYOUTS["contiguous"].clone()  # changed in place below: not the shared tensor
    assert content_key(t) == content_key(t.transpose(0, 2)) == content_key(t.view(-1))
    assert content_key(t) != content_key(t.clone())
    before = content_key(t)
    t.add_(0)  # an in-place change bumps the version
    assert content_key(t) != before


def test_shared_raw_stats_are_summarised_once() -> None:
    raw = grad_stats(LAYOUTS["contiguous"], StatsTable())
    a, b, none = to_summaries([raw, raw, None])
    assert a is b and none is None


def test_stats_table_stacks_mixed_dtypes() -> None:
    table = StatsTable(stack=9)  # three gradients a stack: float32 and float64 together
    tensors = [LAYOUTS[name] for name in ("contiguous", "transposed", "float64", "int",
                                          "strided slice", "complex", "float16", "float64")]
    together = to_summaries([grad_stats(t, table) for t in tensors])
    assert together == [summarize(t) for t in tensors]
