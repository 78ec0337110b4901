"""RSNA 2022 cervical spine: hand-written rows -> one row per study (labels, boxes grouped by
study in the box table's order, patient = study, no DICOM read), boxes placed through the file
a slice_number names (never its rank: a study stored in descending z), a box on a missing
slice counted, named and dropped, and the segmentation matched through geometry (refused off
the series' grid, naming both files)."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radharmony.datasets.rsna_cspine import (BOX_COLUMNS, BOX_FILE, COLUMNS,
                                             RSNACSpineHarmonizer, box_voxels)
from radharmony.errors import MetadataError, RadHarmonyError
from radharmony.fake.rsna_cspine import (STUDIES, vertebra_labels, write_rsna_cspine,
                                         write_segmentation)
from radharmony.vocabulary import derive_findings

A, B, C = "1.2.3.1", "1.2.3.2", "1.2.3.3"
#: train.csv: StudyInstanceUID, patient_overall, C1..C7
STUDY_ROWS = [[A, 1, 0, 1, 0, 0, 0, 0, 0], [B, 0, 0, 0, 0, 0, 0, 0, 0],
              [C, 1, 0, 0, 0, 0, 1, 1, 0]]
#: train_bounding_boxes.csv, studies interleaved; the last names a study train.csv lacks
BOX_ROWS = [[C, 10.0, 20.0, 30.0, 40.0, 101], [A, 1.5, 2.5, 3.0, 4.0, 7],
            [C, 11.0, 21.0, 31.0, 41.0, 102], ["9.9.9", 1.0, 1.0, 1.0, 1.0, 1]]


def write_tables(root: Path, studies=STUDY_ROWS, boxes=BOX_ROWS, masks=(A,)) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(studies, columns=list(COLUMNS)).to_csv(root / "train.csv", index=False)
    if boxes is not None:
        pd.DataFrame(boxes, columns=list(BOX_COLUMNS)).to_csv(root / BOX_FILE, index=False)
    for study in masks:
        (root / "segmentations").mkdir(exist_ok=True)
        (root / "segmentations" / f"{study}.nii").write_bytes(b"")
    return root


def test_hand_written_rows_become_one_row_per_study(tmp_path):
    with pytest.warns(UserWarning, match=r"1 boxes name a study not in train.csv \(rows 3\)"):
        df = RSNACSpineHarmonizer(base_image_dir=write_tables(tmp_path)).harmonize()
    assert df["patient_id"].tolist() == [A, B, C] == df["study_id"].tolist()
    assert df["image_path"].tolist() == [f"train_images/{s}" for s in (A, B, C)]
    assert df["patient_overall"].tolist() == [1, 0, 1]
    assert df["C2"].tolist() == [1, 0, 0] and df["C5"].tolist() == [0, 0, 1]
    # [x, y, width, height, slice_number, row of the box table], in the table's order
    assert df["fracture_boxes"].tolist() == [
        [[1.5, 2.5, 3.0, 4.0, 7, 1]], [],
        [[10.0, 20.0, 30.0, 40.0, 101, 0], [11.0, 21.0, 31.0, 41.0, 102, 2]]]
    assert df["num_boxes"].tolist() == [1, 0, 2]
    assert df["has_mask"].tolist() == [True, False, False]


def test_labels_map_to_the_canonical_fracture(tmp_path):
    h = RSNACSpineHarmonizer(base_image_dir=write_tables(tmp_path, boxes=None))
    with pytest.warns(UserWarning, match="no boxes"):
        df = h.harmonize()
    out = derive_findings(df, h.spec, findings=["cervical_spine_fracture", "fracture",
                                                "rib_fracture"])
    assert out["cervical_spine_fracture"].tolist() == [1.0, 0.0, 1.0]
    # no parent: a chest radiograph's "no fracture" must not say the cervical spine is intact
    assert out["fracture"].isna().all() and out["rib_fracture"].isna().all()


def test_bad_cells_are_named_and_no_dicom_is_read(tmp_path, monkeypatch):
    import radharmony.volumes.dicom_headers as headers

    def refuse(*args, **kwargs):
        raise AssertionError("a DICOM header was read to harmonize")

    monkeypatch.setattr(headers, "scan", refuse)
    bad = [list(r) for r in BOX_ROWS[:3]]
    bad[2][5] = 101.5
    with pytest.raises(MetadataError, match="row 2: slice_number is not a whole number"):
        RSNACSpineHarmonizer(base_image_dir=write_tables(tmp_path / "a", boxes=bad)).harmonize()
    bad[2][5], bad[1][1] = 102, "x"
    with pytest.raises(MetadataError, match="row 1: x is not a number"):
        RSNACSpineHarmonizer(base_image_dir=write_tables(tmp_path / "b", boxes=bad)).harmonize()
    twice = STUDY_ROWS + [STUDY_ROWS[0]]
    with pytest.raises(MetadataError, match="row 3: a study is listed twice"):
        RSNACSpineHarmonizer(base_image_dir=write_tables(tmp_path / "c", twice)).harmonize()


def test_box_voxels_hand_worked():
    # sorted (slice, row, column) array: slices 2 mm toward S, rows toward P, columns toward L
    raw = np.array([[0, 0, 0.8, -12.0], [0, 0.8, 0, -10.0], [2.0, 0, 0, -40.0], [0, 0, 0, 1]])
    # x 4..10 (pixel edges) covers columns 4..9: centres -> 3.5 .. 9.5; rank 2: z 1.5 .. 2.5
    assert box_voxels([[4, 5, 6, 3]], [2], raw, raw).tolist() == [[3.5, 4.5, 1.5, 9.5, 7.5,
                                                                    2.5]]
    # rows toward A (column cosine -y): the canonical order flips H (16 rows: h = 15 - r)
    flipped = raw.copy()
    flipped[:3, 1] = [0, -0.8, 0]
    canonical = flipped.copy()
    canonical[:3, 1], canonical[1, 3] = [0, 0.8, 0], -10.0 - 0.8 * 15
    assert box_voxels([[4, 5, 6, 3]], [2], flipped, canonical).tolist() == [
        [3.5, 7.5, 1.5, 9.5, 10.5, 2.5]]
    # slices sorted toward the feet (6 of them): rank 2 is d = 3 from the feet
    down = raw.copy()
    down[:3, 0] = [0, 0, -2.0]
    canonical = raw.copy()
    canonical[2, 3] = -40.0 - 2.0 * 5
    assert box_voxels([[4, 5, 6, 3]], [2], down, canonical).tolist() == [
        [3.5, 4.5, 2.5, 9.5, 7.5, 3.5]]


def read_file_pixels(path: Path) -> np.ndarray:
    import pydicom

    ds = pydicom.dcmread(path)
    return ds.pixel_array.astype(np.int32) + int(ds.RescaleIntercept)


def test_boxes_follow_the_file_a_slice_number_names(tmp_path):
    """Study 1 is stored in descending z: ``2.dcm`` is the fifth slice from the feet (rank 4
    of 6), never the second."""
    from radharmony.datasets.rsna_cspine import RSNACSpineDataset

    root = write_rsna_cspine(tmp_path)
    ds = RSNACSpineDataset(root, cache_dir=None)
    up, down = ds.annotations(0), ds.annotations(1)
    assert up["boxes"].tolist() == [[3.5, 4.5, 1.5, 9.5, 7.5, 2.5],
                                    [3.5, 4.5, 2.5, 9.5, 7.5, 3.5]]
    assert down["boxes"].tolist() == [[1.5, 2.5, 3.5, 6.5, 6.5, 4.5]]
    assert down["box_labels"] == ["cervical_spine_fracture"]
    assert ds.annotations(2) == {}
    # the slice each box lies on holds the pixels of the file its slice_number names
    for index, number, depth in ((0, 3, 2), (1, 2, 4)):
        img = ds[index]["img"][0].numpy()
        study = ds.harmonized_df["study_id"].iat[index]
        pixels = read_file_pixels(root / "train_images" / study / f"{number}.dcm")
        assert (img[depth] == pixels).all()
        assert STUDIES[index]["boxes"][0][4] == number


def test_a_box_on_a_missing_slice_is_counted_named_and_dropped(tmp_path):
    from radharmony.datasets.rsna_cspine import RSNACSpineDataset

    root = write_rsna_cspine(tmp_path, bad_box=True)
    ds = RSNACSpineDataset(root, cache_dir=None)
    assert ds.harmonized_df["num_boxes"].tolist() == [2, 2, 0, 0]
    with pytest.warns(UserWarning, match=r"1 boxes on a slice with no file, dropped "
                                         r"\(row 3: .*/99\.dcm\)"):
        out = ds.annotations(1)
    assert out["boxes"].tolist() == [[1.5, 2.5, 3.5, 6.5, 6.5, 4.5]]


def test_the_segmentation_is_matched_through_geometry(tmp_path):
    from radharmony.datasets.rsna_cspine import RSNACSpineDataset

    root = write_rsna_cspine(tmp_path, segmented=(0, 2))
    ds = RSNACSpineDataset(root, cache_dir=tmp_path / "cache", output_mask=True)
    assert ds.harmonized_df["has_mask"].tolist() == [True, False, True, False]
    for _ in range(2):  # read, then from the volume cache
        s = ds[0]
        assert s["mask"].shape == s["img"].shape
        assert (s["mask"][0].numpy() == vertebra_labels((6, 16, 18))).all()
    with pytest.raises(RadHarmonyError, match="has no segmentation"):
        ds[1]
    m3d = RSNACSpineDataset(root, cache_dir=None, output_mask=True, preset="m3d")[0]
    assert m3d["mask"].shape == m3d["img"].shape and set(m3d["mask"].unique().tolist()) == \
        {0, 2, 3}


@pytest.mark.parametrize("change", ["offset", "shape"])
def test_a_mask_off_the_series_grid_is_refused_naming_both(tmp_path, change):
    from radharmony.datasets.rsna_cspine import RSNACSpineDataset

    root = write_rsna_cspine(tmp_path)
    ds = RSNACSpineDataset(root, cache_dir=None, output_mask=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ds.check_masks() == []
    study = ds.harmonized_df["study_id"].iat[0]
    if change == "offset":  # 0.01 mm: beyond the 1e-3 mm tolerance
        write_segmentation(root, study, vertebra_labels((6, 16, 18)), offset=(0, 0.01, 0))
        found = r"largest affine difference 0\.0100\d* mm"  # float32 header
    else:
        write_segmentation(root, study, vertebra_labels((5, 16, 18)))
        found = r"shape \(5, 16, 18\)"
    with pytest.raises(RadHarmonyError, match=f"segmentations/{study}.nii is not on the grid "
                                              f"of its image .*train_images/{study}") as info:
        ds[0]
    assert info.match(found)
    # counted and named (file, row) from the headers, before any sample is read
    with pytest.warns(UserWarning, match=f"rsna_cspine: 1 segmentations off their series' "
                                         f"grid \\(row 0: .*segmentations/{study}.nii"):
        assert ds.check_masks() == [0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ds.annotations(0)["boxes"].shape == (2, 6)  # the boxes do not need the mask


def test_the_boxes_are_sample_outputs_on_the_returned_volume(tmp_path):
    """``output_bbox3d=True``: as read the hook's voxels unchanged (descending z included);
    with a preset the same world box, its voxels on the preset's grid."""
    from radharmony.datasets.rsna_cspine import RSNACSpineDataset

    root = write_rsna_cspine(tmp_path)
    plain = RSNACSpineDataset(root, cache_dir=None, output_bbox3d=True)[1]
    assert plain["bbox3d"].tolist() == [[1.5, 2.5, 3.5, 6.5, 6.5, 4.5]]
    assert plain["bbox3d_labels"] == ["cervical_spine_fracture"]
    merlin = RSNACSpineDataset(root, cache_dir=None, output_bbox3d=True, preset="merlin")[1]
    assert np.allclose(merlin["bbox3d_mm"].numpy(), plain["bbox3d_mm"].numpy())
    assert merlin["bbox3d"].shape == (1, 6)
