"""Any bytes given to the JSON and CSV metadata readers: a value or a radharmony error naming
the file, never another exception."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from radharmony.errors import MetadataError, RadHarmonyError
from radharmony.table.read_csv import read_csv_table, read_table
from radharmony.table.read_json import read_coco, read_json_file, read_jsonl

PROFILE = settings.get_profile("radharmony-property")

JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=12).map(lambda v: json.dumps(v).encode())
#: bytes: random, JSON-like, or JSON cut and spliced with random bytes
BYTES = st.one_of(
    st.binary(max_size=300),
    JSON_TEXT,
    st.tuples(JSON_TEXT, st.binary(max_size=20), st.integers(0, 400)).map(
        lambda t: t[0][:t[2]] + t[1] + t[0][t[2]:]),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.lists(JSON_TEXT | st.binary(max_size=30), max_size=5).map(b"\n".join),
)


_TMP = tempfile.TemporaryDirectory(prefix="rh-prop-")  # removed at exit


def _file(data: bytes, name: str) -> Path:
    path = Path(_TMP.name) / name  # one file per reader, rewritten by each example
    path.write_bytes(data)
    return path


def _named(exc: RadHarmonyError, path: Path) -> None:
    assert path.name in str(exc), str(exc)


@PROFILE
@given(BYTES)
@example(b"[" * 100_000 + b"]" * 100_000)  # nested past the parser's recursion limit
@example(b'{"a": NaN}')
@example(b"\xff\xfe{}")
def test_json_file_reader(data):
    path = _file(data, "meta.json")
    try:
        read_json_file(path, what="a JSON object")
    except MetadataError as exc:
        _named(exc, path)


@PROFILE
@given(BYTES)
@example(b"[" * 100_000 + b"]" * 100_000 + b"\n{}")
def test_jsonl_reader(data):
    path = _file(data, "meta.jsonl")
    try:
        out = read_jsonl(path)
    except MetadataError as exc:
        _named(exc, path)
    else:
        assert len(out) == len(data.splitlines()) or data.endswith(b"\r")


@PROFILE
@given(BYTES | st.fixed_dictionaries(
    {"images": st.lists(st.integers(), max_size=2), "annotations": st.just([]),
     "categories": st.none() | st.just([])}).map(lambda d: json.dumps(d).encode()))
@example(b"[" * 100_000 + b"]" * 100_000)
def test_coco_reader(data):
    path = _file(data, "coco.json")
    try:
        out = read_coco(path, description="a COCO file")
    except MetadataError as exc:
        _named(exc, path)
    else:
        assert all(isinstance(out[k], list) for k in ("images", "annotations", "categories"))


CSV_TEXT = st.lists(st.lists(st.sampled_from(["a", "b", "", "1", '"x,y"', '"', "\r", "ñ",
                                              "[w,h]", " "]), max_size=4),
                    max_size=6).map(lambda rows: "\n".join(",".join(r) for r in rows).encode())


@PROFILE
@given(st.binary(max_size=300) | CSV_TEXT | st.tuples(CSV_TEXT, st.binary(max_size=8)).map(
    lambda t: t[0] + t[1]))
@example(b"a,b\n1,2,3\n")
@example(b"a,b\n\xe9,1\n")
@example(b"")
@example(b'a,b\n"1,2\n')
def test_csv_readers(data):
    path = _file(data, "meta.csv")
    try:
        df = read_table(path, description="a table", columns=["a"])
    except MetadataError as exc:
        _named(exc, path)
    else:
        assert "a" in df.columns
    try:
        df = read_csv_table(path, ["a", "b"], description="a table")
    except MetadataError as exc:
        _named(exc, path)
    else:
        assert list(df.columns) == ["a", "b"]
