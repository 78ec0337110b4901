"""Saved harmonizers that expand on load: refused from the Parquet footer before any page is
decoded, counting what the decoded columns will hold (text as Python strings), whatever the
encoding; repeated text is shared, not copied per row."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

import radharmony.table.store as store
from radharmony.errors import SavedFileError


def _save(path, df, **write_options):
    """``save_table`` as a forger would: any codec and encoding, a valid header."""
    import pyarrow.parquet as pq

    real = pq.write_table
    pq.write_table = functools.partial(real, **write_options)
    try:
        return store.save_table(path, df, {"class": "x"})
    finally:
        pq.write_table = real


def _distinct(n: int, size: int) -> pd.DataFrame:
    """``n`` distinct strings of ``size`` bytes: zstd packs each into a few bytes."""
    return pd.DataFrame({"report": [f"{i:08d}" + "a" * (size - 8) for i in range(n)]})


@pytest.mark.parametrize("dictionary", [False, True], ids=["plain", "dictionary"])
def test_distinct_text_bomb_is_refused_before_decoding(tmp_path, dictionary, monkeypatch):
    import pyarrow.parquet as pq

    df = _distinct(40, 1 << 20)  # 40 MiB of distinct text in a file of a few kB
    p = _save(tmp_path / "bomb.parquet", df, compression="zstd", use_dictionary=dictionary)
    del df
    assert p.stat().st_size < 40_000

    def decoded(*a, **k):
        raise AssertionError("a page was decoded")
    monkeypatch.setattr(pq, "read_table", decoded)
    with pytest.raises(SavedFileError, match="bomb.parquet would expand") as err:
        store.load_table(p)
    assert "MAX_TABLE_EXPANSION" in str(err.value)


def test_decoded_text_counts_python_strings(tmp_path, monkeypatch):
    """The guard counts each text value as the Python string pandas will hold (its bytes
    plus ~50 bytes of object), not the Parquet bytes alone: 200,000 distinct strings of 6
    bytes are ~2.4 MB of Parquet data but ~13 MB once loaded."""
    df = pd.DataFrame({"id": [f"{i:06d}" for i in range(200_000)]})
    p = store.save_table(tmp_path / "t.parquet", df, {"class": "x"})
    assert store.load_table(p)[1]["id"].tolist() == df["id"].tolist()
    monkeypatch.setattr(store, "MAX_TABLE_BYTES", 8_000_000)
    with pytest.raises(SavedFileError, match="MAX_TABLE_BYTES"):
        store.load_table(p)


def test_repeated_text_is_shared_not_copied(tmp_path):
    """One 256 KiB text on 2,000 rows (a study's report on every image): dictionary-encoded
    in the file, loaded as one shared string, never 500 MB of copies."""
    big = "r" * (1 << 18)
    df = pd.DataFrame({"report": [big] * 2000, "n": np.arange(2000)})
    p = store.save_table(tmp_path / "t.parquet", df, {"class": "x"})
    del df
    col = store.load_table(p)[1]["report"]
    assert len(col) == 2000 and col.iat[0] == big and col.iat[0] is col.iat[1999]


def test_legit_saved_table_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    words = np.array(["effusion", "no", "acute", "cardiopulmonary", "process", "stable"])
    df = pd.DataFrame({"report": [" ".join(rng.choice(words, 40)) for _ in range(3000)],
                       "age": rng.integers(20, 90, 3000),
                       "view": pd.Series(["PA", None, "AP"] * 1000, dtype=object)})
    p = store.save_table(tmp_path / "t.parquet", df, {"class": "x"})
    back = store.load_table(p)[1]
    assert list(back.columns) == list(df.columns)
    for c in df.columns:
        assert back[c].tolist() == df[c].tolist()
    assert back["view"].dtype == object and back["view"].iat[1] is None
