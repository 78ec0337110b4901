"""3-D boxes as text (``radharmony.mixture.boxes3d``): written from source voxels through a
preset's geometry, read back by ``parse_boxes`` within one bin (or one mm) on random
geometries; clipping, malformed tokens, masks as boxes."""

from __future__ import annotations

import numpy as np
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture.box_parse import parse_boxes
from radharmony.mixture.boxes3d import (BINS, VolumeFrame, box3d_text, mask_boxes)
from radharmony.volumes.presets import PRESETS, Preset
from radharmony.volumes.volume import Volume


def _same_grid(shape=(10, 20, 40), spacing=(2.0, 1.0, 0.5)) -> VolumeFrame:
    """Output = source: no resampling, crop or reorientation."""
    aff = np.diag([*spacing, 1.0])
    return VolumeFrame(tuple(map(tuple, aff)), tuple(map(tuple, aff)), shape)


def test_a_box_in_bins_and_in_millimetres_written_out():
    f = _same_grid()
    box = np.array([[3.5, 1.5, -0.5, 7.5, 5.5, 4.5]])  # voxels x 4-7, y 2-5, z 0-4
    text, counts = box3d_text("nodule", box, f, "box3d")
    # x edges 4..8 of 40 -> bins 10..19; y 2..6 of 20 -> 10..29; z 0..5 of 10 -> 0..49
    assert text == "<ref>nodule</ref><box3d>(10,10,0),(19,29,49)</box3d>"
    assert counts["clipped"] == counts["outside"] == 0
    back = parse_boxes("The answer: " + text + ".", f, "box3d")
    assert back.items[0][0] == "nodule" and back.items[0][1].tolist() == box.tolist()
    text, _ = box3d_text("nodule", box, f, "box3d_mm")
    # x: 4..8 voxels of 0.5 mm; y: 2..6 of 1 mm; z: 0..5 of 2 mm
    assert text == "<ref>nodule</ref><box3d_mm>(2,2,0),(4,6,10)</box3d_mm>"
    assert parse_boxes(text, f.as_dict(), "box3d_mm").items[0][1].tolist() == box.tolist()


def test_boxes_past_the_output_are_clipped_or_left_out_and_counted():
    f = _same_grid()
    boxes = np.array([[-5.5, 1.5, 0.5, 7.5, 5.5, 4.5], [50.0, 1.0, 1.0, 60.0, 2.0, 2.0]])
    text, counts = box3d_text("mass", boxes, f, "box3d")
    assert text == "<ref>mass</ref><box3d>(0,10,10),(19,29,49)</box3d>"
    assert (counts["clipped"], counts["outside"]) == (1, 1)
    assert box3d_text("mass", boxes[1:], f, "box3d")[0] == "<ref>mass</ref>"


def test_malformed_tokens_are_counted_never_guessed():
    f = _same_grid()
    text = ("<ref>a</ref><box3d>(1,2,3),(4,5,6)</box3d>"      # fine
            "<box3d>(5,2,3),(4,5,6)</box3d>"                    # x reversed
            "<box3d>(1,2,3),(4,5,100)</box3d>"                  # past bin 99
            "<box3d>(1,2,3),(4,5)</box3d>"                      # five numbers
            "<ref>b</ref><box3d>(1.5,2,3),(4,5,6)</box3d>")     # not whole
    r = parse_boxes(text, f, "box3d")
    assert r.malformed == 4 and r.ok
    assert [p for p, _ in r.items] == ["a", "b"] and r.items[1][1] is None
    bad = parse_boxes("<box3d>(9,9,9),(1,1,1)</box3d>", f, "box3d")
    assert not bad.ok and bad.items == []
    with pytest.raises(RadHarmonyError, match="box3d or box3d_mm"):
        box3d_text("a", np.zeros((1, 6)), f, "box3")


@pytest.mark.parametrize("seed", range(6))
def test_round_trip_on_random_geometries_within_one_bin(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(8, 24, 3))
    aff = np.diag([*rng.uniform(0.5, 3.0, 3), 1.0])
    aff[:3, 3] = rng.uniform(-200, 200, 3)
    if seed % 2:  # some sources arrive oblique-free but flipped in world space
        aff[:3, :3] = aff[:3, :3] @ np.diag([1.0, -1.0, 1.0])
    vol = Volume.from_array(rng.integers(-1000, 1000, shape).astype(np.int16), aff)
    size = tuple(int(n) for n in rng.integers(6, 30, 3))
    preset = [Preset("t", spacing=tuple(rng.uniform(0.6, 3.0, 3)), size=size,
                     orientation=("SPL", "RAS", "IPL")[seed % 3]),
              Preset("t", size=size, fit="resize", window="minmax", clip=False,
                     orientation=("LAI", "SPL")[seed % 2]),
              PRESETS["m3d"]][seed % 3]
    array, info = preset.geometry(vol)
    frame = VolumeFrame.of(vol, info, array.shape)
    n = np.asarray(array.shape[::-1], float)  # output extent along x, y, z
    for _ in range(20):
        lo = rng.uniform(-0.5, np.asarray(shape[::-1]) - 1.5)
        box = np.concatenate([lo, lo + rng.uniform(0.5, np.asarray(shape[::-1]) / 2)])[None]
        for dialect, tol in (("box3d", n / BINS), ("box3d_mm", 1.0 / frame.spacing[::-1])):
            text, counts = box3d_text("x", box, frame, dialect)
            if counts["outside"]:
                assert "<box3d" not in text
                continue
            got = parse_boxes(text, frame, dialect).items[0][1]
            want = np.clip(frame.to_output(box), -0.5, np.tile(n, 2) - 0.5)
            out = frame.to_output(got)
            tol6 = np.tile(tol, 2) + 1e-6
            assert (np.abs(out - want) <= tol6).all(), (dialect, out, want)
            # the box read contains the box written
            assert (out[:, :3] <= want[:, :3] + 1e-6).all()
            assert (out[:, 3:] >= want[:, 3:] - 1e-6).all()


def test_masks_as_boxes_in_source_voxels():
    m = np.zeros((6, 8, 10), np.uint8)
    m[2:4, 1, 5:9] = 1
    m[5, 7, 0] = 3
    boxes, names = mask_boxes(m, {1: "C1", 2: "C2", 3: "T1"})
    assert names == ["C1", "T1"]  # C2 absent: no box
    assert boxes.tolist() == [[4.5, 0.5, 1.5, 8.5, 1.5, 3.5], [-0.5, 6.5, 4.5, 0.5, 7.5, 5.5]]
