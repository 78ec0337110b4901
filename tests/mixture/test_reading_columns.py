"""The column helpers that keep opening a mixture of millions of records fast and lean: a
column as objects through its codes, its distinct values, a table filtered and made one chunk
a column at a time, and the sampler's weights computed once per (source, task) group."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture.reading import _compact, column_objects, distinct_values
from radharmony.mixture.sampler import record_weights


def _chunked(values, kind=None):
    arr = pa.array(values, kind)
    return pa.chunked_array([arr.slice(0, 3), arr.slice(3, 4), arr.slice(7)])


@pytest.mark.parametrize("encoded", [False, True])
def test_a_column_as_objects_equals_its_python_values(encoded):
    values = ["mimic", "nih", None, "mimic", "chexpert", "nih", "nih", None, "mimic"]
    column = _chunked(values)
    if encoded:
        column = column.dictionary_encode()
    got = column_objects(column)
    assert got.dtype == object and got.tolist() == values
    assert distinct_values(column) == ["chexpert", "mimic", "nih"]
    if encoded:  # one Python object per distinct value, shared by its rows
        assert got[0] is got[3] is got[8]


def test_compact_filters_and_leaves_one_chunk_a_column():
    t = pa.table({"a": _chunked(list(range(10)), pa.int64()),
                  "s": _chunked([f"r{i}" for i in range(10)]),
                  "l": _chunked([[str(i)] * (i % 3) for i in range(10)])})
    keep = pa.chunked_array([[True, False, True], [True] * 4, [False, True, False]])
    got = _compact(t, keep)
    assert got.equals(t.filter(keep)) and got.schema == t.schema
    assert all(c.num_chunks == 1 for c in got.columns) and got.num_rows == 7
    whole = _compact(t)
    assert whole.equals(t) and all(c.num_chunks == 1 for c in whole.columns)
    empty = _compact(t.slice(0, 0))
    assert empty.num_rows == 0 and empty.schema == t.schema


def _reference_weights(sources, tasks, rates):
    """The weights record by record, as the module doc defines them."""
    keys = {}
    for key, rate in rates.items():
        keys[tuple(key.split("/", 1)) if isinstance(key, str) and "/" in key else key] = rate
    which = [(s, t) if (s, t) in keys else s if s in keys else None
             for s, t in zip(sources, tasks)]
    count = {k: which.count(k) for k in set(which)}
    total = sum(keys.values())
    return np.array([0.0 if k is None else keys[k] / total / count[k] for k in which])


@pytest.mark.parametrize("rates", [{"a": 2, "b/x": 1}, {("c", "w"): 3, "a": 1, "b": 0.5},
                                   {"a/y": 1}])
def test_weights_per_group_equal_the_weights_record_by_record(rates):
    rng = np.random.default_rng(0)
    sources = np.array(["a", "b", "c"], object)[rng.integers(0, 3, 2000)]
    tasks = np.array(["x", "y", "z", "w"], object)[rng.integers(0, 4, 2000)]
    got = record_weights(sources, tasks, rates)
    want = _reference_weights(sources, tasks, rates)
    assert got.tobytes() == want.tobytes()  # the same floats: a sampler state stays valid
    with pytest.raises(RadHarmonyError, match="which no record"):
        record_weights(sources, tasks, {"d": 1})
