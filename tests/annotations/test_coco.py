"""COCO compressed RLE and shape rasterization, pinned on hand-worked examples."""

from __future__ import annotations

import numpy as np
import pytest

from radharmony.annotations.coco import (coco_rle_decode, coco_rle_encode, ellipse_mask,
                                         polygon_mask, rectangle_mask, shape_box)
from radharmony.errors import MetadataError


def test_compressed_counts_by_hand():
    # column-major runs 1 bg, 1 fg, 1 bg, 2 fg, 1 bg; from the 4th count on, deltas to i-2
    mask = coco_rle_decode({"size": [3, 2], "counts": "11110"})
    assert mask.tolist() == [[0, 1], [1, 1], [0, 0]]
    assert coco_rle_encode(mask) == {"size": [3, 2], "counts": "11110"}
    assert coco_rle_encode(mask, compressed=False)["counts"] == [1, 1, 1, 2, 1]


def test_multi_character_and_negative_deltas():
    # 40 = 8 + 32: groups 8 (with the continue bit: chr(8 + 32 + 48) = 'X') then 1 ('1')
    assert coco_rle_decode({"size": [1, 41], "counts": "X11"}).sum() == 1
    # runs [0, 30, 2]: a mask starting with foreground, then 2 background
    m = np.ones((32,), np.uint8)
    m[30:] = 0
    m = m.reshape(4, 8, order="F")
    enc = coco_rle_encode(m)
    assert enc["counts"][0] == "0" and (coco_rle_decode(enc) == m).all()
    runs = [3, 40, 5, 2, 7, 3]  # 4th count 2 = 40 - 38: a negative delta
    m = np.repeat(np.arange(6) % 2, runs).astype(np.uint8).reshape(6, 10, order="F")
    assert (coco_rle_decode(coco_rle_encode(m)) == m).all()


@pytest.mark.parametrize("shape", [(5, 7), (64, 48), (333, 250)])
def test_round_trip_random(shape):
    rng = np.random.default_rng(sum(shape))
    m = (rng.random(shape) > 0.8).astype(np.uint8)
    m[: shape[0] // 2, : shape[1] // 3] = 1
    for compressed in (True, False):
        assert (coco_rle_decode(coco_rle_encode(m, compressed=compressed)) == m).all()


@pytest.mark.parametrize("rle, match", [({"size": [2, 2], "counts": "3"}, "do not cover"),
                                        ({"size": [2, 2], "counts": "X"}, "ends inside"),
                                        ({"size": [2, 2], "counts": "1 "}, "invalid character"),
                                        ({"counts": "1"}, "not a COCO RLE")])
def test_bad_rle_raises_naming_the_entry(rle, match):
    with pytest.raises(MetadataError, match=match) as err:
        coco_rle_decode(rle, where="gt.json, cxr X")
    assert "cxr X" in str(err.value)


def test_shapes():
    r = rectangle_mask(1, 1, 3, 2, (4, 5))
    assert r.tolist() == [[0, 0, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]
    e = ellipse_mask(0, 0, 10, 6, (6, 10))
    assert e[3, 5] == 1 and e[0, 0] == 0 and e[3, 0] == 1 and e.sum() < 60
    p = polygon_mask([[(0, 0), (4, 0), (4, 4), (0, 4)], [8, 0, 9, 0, 9, 1]], (6, 10))
    assert p[2, 2] == 1 and p[5, 5] == 0 and p[0, 9] == 1
    assert shape_box([(3, 4), (1, 9), (7, 2)]) == (1.0, 2.0, 7.0, 9.0)
    with pytest.raises(MetadataError, match="not a polygon"):
        polygon_mask([[(0, 0), (1, 1)]], (3, 3))
