"""The memory-mapped columns' files: dictionary-coded text (codes and distinct values pinned
on hand-written rows), the dictionary's bounded restart, bytes independent of the chunks, and
an older layout refused with the way to write it again."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture import column_writer
from radharmony.mixture.column_writer import ColumnWriter
from radharmony.mixture.columns import COLUMNS_DIR, COLUMNS_INDEX, MixtureColumns
from radharmony.mixture.records import RECORD_SCHEMA

ROWS = {"record_id": ["r0", "r1", "r2", "r3", "r4"],
        "patient_id": ["mimic:p1", "mimic:p2", "mimic:p1", None, "mimic:p2"],
        "prompt": ["Describe.", "Describe.", "Describe.", "Describe.", "Which?"],
        "image_paths": [["p1/s1/a.jpg", "p1/s1/b.jpg"], ["p2/s2/c.jpg"], ["p1/s1/a.jpg"], [],
                        None],
        "views": [["PA", "LATERAL"], ["AP"], ["PA"], [], None],
        "split": ["train", "train", "valid", "train", "train"]}


def _table(rows: dict) -> pa.Table:
    n = len(next(iter(rows.values())))
    full = {name: [None] * n for name in RECORD_SCHEMA.names}
    full.update(prompt_variant=[0] * n, **rows)
    return pa.table(full, schema=RECORD_SCHEMA)


def _write(out, table: pa.Table, chunk: int | None = None):
    w = ColumnWriter(out)
    step = chunk or max(table.num_rows, 1)
    for start in range(0, table.num_rows, step):
        w.write(table.slice(start, step))
    w.close([])
    return out / COLUMNS_DIR


def _npy(folder, name) -> list:
    return np.load(folder / f"{name}.npy").tolist()


def _utf8(folder, name) -> bytes:
    return np.load(folder / f"{name}.utf8.npy").tobytes()


def test_repeated_text_is_written_once_and_each_row_holds_its_code(tmp_path):
    folder = _write(tmp_path, _table(ROWS))
    index = json.loads((folder / COLUMNS_INDEX).read_text())
    assert index["version"] == 2
    assert index["text"] == {"record_id": "plain", "patient_id": "dict", "study_id": "dict",
                             "sample_id": "dict", "image_paths.items": "dict",
                             "prompt": "dict", "target": "dict", "fields": "dict"}
    # patient_id: each distinct value once, in the order it first appears; a null is -1
    assert _npy(folder, "patient_id.codes") == [0, 1, 0, -1, 1]
    assert _utf8(folder, "patient_id.dict") == b"mimic:p1mimic:p2"
    assert _npy(folder, "patient_id.dict.offsets") == [0, 8, 16]
    assert not (folder / "patient_id.utf8.npy").exists()
    assert _npy(folder, "prompt.codes") == [0, 0, 0, 0, 1]
    assert _utf8(folder, "prompt.dict") == b"Describe.Which?"
    # the image paths: each record's items, each item a code into the distinct paths
    assert _npy(folder, "image_paths.lists") == [0, 2, 3, 4, 4, 4]
    assert _npy(folder, "image_paths.valid") == [1, 1, 1, 1, 0]
    assert _npy(folder, "image_paths.items.codes") == [0, 1, 2, 0]
    assert _utf8(folder, "image_paths.items.dict") == b"p1/s1/a.jpgp1/s1/b.jpgp2/s2/c.jpg"
    # an all-null column: codes -1, an empty dictionary
    assert _npy(folder, "target.codes") == [-1] * 5
    assert _npy(folder, "target.dict.offsets") == [0]
    # record_id, unique by construction: plain offsets into its bytes
    assert _npy(folder, "record_id.offsets") == [0, 2, 4, 6, 8, 10]
    assert _utf8(folder, "record_id") == b"r0r1r2r3r4"

    cols = MixtureColumns(tmp_path)
    got = cols.take(np.array([4, 0, 3, 2]), ["record_id", "patient_id", "prompt",
                                              "image_paths", "target"])
    assert got == {"record_id": ["r4", "r0", "r3", "r2"],
                   "patient_id": ["mimic:p2", "mimic:p1", None, "mimic:p1"],
                   "prompt": ["Which?", "Describe.", "Describe.", "Describe."],
                   "image_paths": [None, ["p1/s1/a.jpg", "p1/s1/b.jpg"], [], ["p1/s1/a.jpg"]],
                   "target": [None] * 4}


def test_a_full_dictionary_restarts_at_the_value_that_would_pass_its_bound(tmp_path,
                                                                           monkeypatch):
    """At most 2 values: the third distinct value starts a new dictionary, where a value seen
    before is written again; at most 19 bytes: the value that would make more does."""
    monkeypatch.setattr(column_writer, "MOST_DISTINCT", 2)
    monkeypatch.setattr(column_writer, "MOST_DICT_BYTES", 19)
    rows = {"record_id": [f"r{i}" for i in range(7)],
            "patient_id": [f"patient-{c}" for c in "abaca b"],
            "study_id": [f"study-{c}" for c in ("abc", "c", "abc", "d", "d", "abc", "c")]}
    rows["patient_id"][5] = None
    folder = _write(tmp_path / "whole", _table(rows))
    assert _npy(folder, "patient_id.codes") == [0, 1, 0, 2, 3, -1, 4]
    assert _utf8(folder, "patient_id.dict") == b"patient-apatient-bpatient-cpatient-apatient-b"
    # "study-abc" + "study-c" fill 16 bytes; "study-d" would make 23: it restarts; then
    # "study-abc" fits (16), and "study-c" restarts again
    assert _npy(folder, "study_id.codes") == [0, 1, 0, 2, 2, 3, 4]
    assert _utf8(folder, "study_id.dict") == b"study-abcstudy-cstudy-dstudy-abcstudy-c"
    assert MixtureColumns(tmp_path / "whole").take(np.arange(7), ["patient_id", "study_id"]) \
        == {"patient_id": rows["patient_id"], "study_id": rows["study_id"]}
    # the same bytes whatever the chunks the records came in
    for chunk in (1, 2, 3):
        again = _write(tmp_path / f"by{chunk}", _table(rows), chunk=chunk)
        for f in sorted(p.name for p in folder.iterdir()):
            assert (again / f).read_bytes() == (folder / f).read_bytes(), (chunk, f)


def test_a_column_whose_values_rarely_repeat_is_written_plain(tmp_path):
    """Codes and dictionary would take 4 x 3 + 8 x 3 + 2 = 38 bytes, plain text 9 x 3 + 8 + 2
    = 37: the column is plain (offsets, bytes, valid), and reads the same."""
    rows = {"record_id": ["r0", "r1", "r2"], "patient_id": ["a", None, "b"],
            "sample_id": ["s1", "s1", "s1"]}
    for chunk in (1, 3):
        folder = _write(tmp_path / f"by{chunk}", _table(rows), chunk=chunk)
        kinds = json.loads((folder / COLUMNS_INDEX).read_text())["text"]
        assert kinds["patient_id"] == "plain" and kinds["sample_id"] == "dict"
        assert _npy(folder, "patient_id.offsets") == [0, 1, 1, 2]
        assert _utf8(folder, "patient_id") == b"ab"
        assert _npy(folder, "patient_id.valid") == [1, 0, 1]
        assert not list(folder.glob("patient_id.codes.npy")) + \
            list(folder.glob("patient_id.dict.*"))
        assert MixtureColumns(tmp_path / f"by{chunk}").take(np.array([2, 1, 0]), list(rows)) \
            == {k: v[::-1] for k, v in rows.items()}


def test_random_rows_read_back_their_values(tmp_path):
    rng = np.random.default_rng(3)
    n = 3000
    words = [f"value {i}" * (i % 4) for i in range(40)]  # "" is a value, not a null
    rows = {"record_id": [f"r{i:05d}" for i in range(n)],
            "fields": [None if i % 7 == 0 else words[i] for i in rng.integers(0, 40, n)],
            "image_paths": [[words[i] for i in rng.integers(0, 40, int(k))]
                            for k in rng.integers(0, 4, n)]}
    _write(tmp_path, _table(rows), chunk=256)
    cols = MixtureColumns(tmp_path)
    pick = rng.permutation(n)[:64]
    got = cols.take(pick, list(rows))
    assert got == {k: [v[i] for i in pick.tolist()] for k, v in rows.items()}


def test_columns_of_an_older_layout_are_refused_naming_how_to_write_them_again(tmp_path):
    folder = _write(tmp_path, _table(ROWS))
    index = json.loads((folder / COLUMNS_INDEX).read_text())
    del index["version"]  # as the first layout wrote it
    (folder / COLUMNS_INDEX).write_text(json.dumps(index))
    with pytest.raises(RadHarmonyError, match=r"older layout[\s\S]*version 2[\s\S]*version 1"
                                              r"[\s\S]*write_columns\(OUT\)"):
        MixtureColumns(tmp_path)
