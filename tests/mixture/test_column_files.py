"""ColumnFile: a mixture column's random rows read by pread, equal to the memory map's values,
with named errors for a damaged file and a descriptor per process."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture.column_files import ColumnFile


@pytest.mark.parametrize("dtype", [np.int64, np.int16, np.uint8, np.int32])
def test_rows_pairs_and_spans_equal_the_memory_map(tmp_path, dtype):
    values = (np.arange(5000) * 7919 % 65521).astype(dtype)
    np.save(tmp_path / "c.npy", values)
    col, mapped = ColumnFile(tmp_path / "c.npy"), np.load(tmp_path / "c.npy", mmap_mode="r")
    rows = np.random.default_rng(0).integers(0, 4999, 300)
    assert col[rows].dtype == values.dtype and (col[rows] == mapped[rows]).all()
    starts, ends = col.pairs(rows)
    assert (starts == mapped[rows]).all() and (ends == mapped[rows + 1]).all()
    assert (col[10:20] == values[10:20]).all() and col[-1] == values[-1]
    assert col.span(3, 9) == values[3:9].tobytes() and len(col) == 5000
    assert col[np.zeros(0, np.int64)].tolist() == [] and col[4999:4000].tolist() == []


def test_out_of_range_rows_and_a_truncated_file_are_refused(tmp_path):
    np.save(tmp_path / "c.npy", np.arange(10, dtype=np.int64))
    col = ColumnFile(tmp_path / "c.npy")
    with pytest.raises(IndexError):
        col[np.array([3, 10])]
    with pytest.raises(IndexError):
        col.pairs(np.array([9]))
    data = (tmp_path / "c.npy").read_bytes()
    (tmp_path / "c.npy").write_bytes(data[:-8])
    with pytest.raises(RadHarmonyError, match="shorter than its header says.*rebuild"):
        ColumnFile(tmp_path / "c.npy")[np.array([9])]
    (tmp_path / "bad.npy").write_bytes(b"not a numpy file")
    with pytest.raises(RadHarmonyError, match="Cannot read the mixture column"):
        ColumnFile(tmp_path / "bad.npy")
    np.save(tmp_path / "2d.npy", np.zeros((2, 3)))
    with pytest.raises(RadHarmonyError, match="is not a flat array"):
        ColumnFile(tmp_path / "2d.npy")
    with pytest.raises(RadHarmonyError, match="Cannot open the mixture column"):
        ColumnFile(tmp_path / "absent.npy")


def test_a_pickled_column_opens_its_own_descriptor(tmp_path):
    np.save(tmp_path / "c.npy", np.arange(100, dtype=np.int32))
    col = ColumnFile(tmp_path / "c.npy")
    state = pickle.dumps(col)
    again = pickle.loads(state)
    assert again._fd is None and again[np.array([99, 0])].tolist() == [99, 0]
    assert again.fd != col.fd


@pytest.mark.parametrize("fence", [1, 2, 5, 64, 4096])
def test_searchsorted_equals_numpys_on_a_sorted_column(tmp_path, fence):
    rng = np.random.default_rng(fence)
    values = np.sort(rng.integers(0, 500, 3001)).astype(np.int64)  # many repeats
    np.save(tmp_path / "s.npy", values)
    col = ColumnFile(tmp_path / "s.npy")
    probe = np.concatenate([rng.integers(-5, 505, 400), values[::97], [values[0], values[-1]]])
    assert col.searchsorted(probe, fence=fence).tolist() == \
        np.searchsorted(values, probe).tolist()
