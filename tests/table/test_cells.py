"""Nested table cells read back from JSON text: the same values ``json.loads`` gives."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from radharmony.cells import decode_json_columns, encode_json_columns

CELLS = ['[1, 2]', '{"x": NaN, "y": Infinity}', '[123456789012345678901234567890]',
         '[{"x_min": 0.25, "label": "Nodule", "reader": null}]', '"caf\\u00e9"', '[]', '{}',
         '["1.2.826.0.1.3680043.8.498.1234567890123456789"]', '[-0.0, 1e-310, 2.5e300]',
         # a UID's long digit run and, deeper, an integer past 64 bits
         '{"uid": "1.2.3.12345678901234567890", "n": [1, {"b": 99999999999999999999}]}']


def test_decoded_cells_equal_the_standard_parser_s():
    got = decode_json_columns(pd.DataFrame({"c": CELLS + [None]}), ["c"])["c"].tolist()
    want = [json.loads(c) for c in CELLS] + [None]
    assert json.dumps(got) == json.dumps(want)  # NaN compares by its text
    assert type(got[2][0]) is int  # past 64 bits: still an int, not a float
    assert type(got[-2]["n"][1]["b"]) is int  # nested too


def test_a_round_trip_keeps_nested_cells():
    df = pd.DataFrame({"boxes": [[{"x": 1, "y": [2.5]}], None, []], "t": ["a", "b", "c"]})
    enc, cols = encode_json_columns(df)
    assert cols == ["boxes"]
    back = decode_json_columns(enc.copy(), cols)
    assert back["boxes"].tolist() == df["boxes"].tolist()


def test_bad_json_still_raises():
    with pytest.raises(ValueError):
        decode_json_columns(pd.DataFrame({"c": ["[1,"]}), ["c"])


def test_repeated_texts_decode_to_equal_values_that_rows_do_not_share():
    """Each distinct text is parsed once, yet every row holds its own lists and dicts: changing
    one row's value leaves the others as they were."""
    texts = ['["A. left", "B. right"]', '{"a": 1, "b": "x"}', '[{"x": [1, 2]}]', '[[1], [2]]',
             '"same"', '7', '[1, NaN]', '[]', '[123456789012345678901234567890]']
    cells = [t for t in texts for _ in range(3)] + [None, float("nan")]
    got = decode_json_columns(pd.DataFrame({"c": cells}), ["c"])["c"].tolist()
    want = [json.loads(c) for c in cells[:-2]] + [None, None]
    assert json.dumps(got) == json.dumps(want)
    assert type(got[-3][0]) is int  # past 64 bits, repeated: still an int
    mutable = [v for v in got if isinstance(v, (list, dict))]
    inner = [x for v in mutable for x in (v.values() if isinstance(v, dict) else v)
             if isinstance(x, (list, dict))]
    assert len({id(v) for v in mutable + inner}) == len(mutable) + len(inner)


def test_a_column_not_all_text_still_decodes_per_cell():
    got = decode_json_columns(pd.DataFrame({"c": ["[1]", b"[1]", "[1]", 3]}), ["c"])["c"]
    assert got.tolist() == [[1], None, [1], None]
    assert got[0] is not got[2]
