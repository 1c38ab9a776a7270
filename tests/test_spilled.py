"""The steps' rows kept in a temporary file read back as they were written."""

from __future__ import annotations

import math
import pickle
import random

import pytest

from gradtrace.model import spilled
from gradtrace.model.records import LeafStep
from gradtrace.model.spilled import SpilledRows


def rows_of(seed: int, count: int) -> list[tuple[LeafStep | None, ...]]:
    rng = random.Random(seed)
    values = [0.0, -0.0, 1e-310, 1.5, 1e300, math.inf, -math.inf, rng.random()]
    return [tuple(None if rng.random() < 0.2 else
                  LeafStep(rng.choice(values), rng.choice(values), rng.random() < 0.9,
                           rng.random() < 0.3) for _ in range(rng.randint(0, 6)))
            for _ in range(count)]


def test_rows_read_back_exactly_by_index_slice_and_iteration(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setattr(spilled, "BLOCK", 100)  # several blocks, a row each or a few
    rows = rows_of(0, 100)
    store = SpilledRows()
    store.extend(rows[:40])
    assert list(store) == rows[:40]  # read while it grows
    store.extend(rows[40:])
    assert len(store) == 100 and list(store) == rows and store == tuple(rows)
    assert [store[i] for i in range(-100, 100)] == rows + rows
    for part in (slice(3, 90, 4), slice(None, None, -3), slice(50, 10, -7), slice(99, 200)):
        assert store[part] == tuple(rows[part]), part
    with pytest.raises(IndexError):
        store[100]
    assert store != tuple(rows[:99]) and store != rows[:99] + [(None,)]


def test_a_nan_reads_back_as_a_nan_and_a_copy_holds_its_rows_not_the_file() -> None:
    store = SpilledRows()
    store.append((LeafStep(math.nan, math.nan, False, True), None))
    ((cell, none),) = list(store)
    assert math.isnan(cell.norm) and math.isnan(cell.max_abs) and none is None
    assert (cell.finite, cell.kept) == (False, True)
    copy = pickle.loads(pickle.dumps(store))
    assert isinstance(copy, tuple) and len(copy) == 1 and copy[0][1] is None
