"""RSNA 2023 abdominal trauma: hand-written rows -> one row per series (the patient's labels on
each of its series, organ grades, aortic_hu, incomplete_organ), one-hot groups checked, slice
labels placed through the file an instance_number names (a series stored in descending z), a
label on a missing file counted, named and dropped, 12-bit signed pixels sign-extended, and
organ segmentations matched through geometry."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.rsna_abdominal_trauma import (
    COLUMNS, IMAGE_LABEL_COLUMNS, IMAGE_LABEL_FILE, SERIES_COLUMNS, SERIES_FILE,
    RSNAAbdominalTraumaHarmonizer, slice_injuries)
from radharmony.errors import MetadataError, RadHarmonyError
from radharmony.fake.rsna_abdominal_trauma import (one_hot, organ_labels,
                                                   write_rsna_abdominal_trauma)
from radharmony.fake.rsna_cspine import write_label_map
from radharmony.vocabulary import derive_findings

#: train.csv: P1 liver low + extravasation; P2 healthy; P3 kidney high + bowel
PATIENT_ROWS = [["1", *one_hot(("liver_low", "extravasation_injury"))], ["2", *one_hot(())],
                ["3", *one_hot(("kidney_high", "bowel_injury"))]]
#: the series table: P1 two phases, one series of a patient train.csv lacks
SERIES_ROWS = [["1", "11", 150.5, 0], ["1", "12", 400.0, 1], ["2", "21", None, 0],
               ["3", "31", 220.0, 0], ["9", "91", 100.0, 0]]
IMAGE_ROWS = [["3", "31", 7, "Bowel"], ["1", "11", 40, "Active_Extravasation"],
              ["3", "31", 8, "Bowel"], ["8", "81", 1, "Bowel"]]


def write_tables(root: Path, patients=PATIENT_ROWS, series=SERIES_ROWS, images=IMAGE_ROWS):
    root.mkdir(parents=True, exist_ok=True)
    for name, columns, rows in (("train.csv", COLUMNS, patients),
                                (SERIES_FILE, SERIES_COLUMNS, series),
                                (IMAGE_LABEL_FILE, IMAGE_LABEL_COLUMNS, images)):
        pd.DataFrame(rows, columns=list(columns)).to_csv(root / name, index=False)
    return root


def test_hand_written_rows_become_one_row_per_series(tmp_path):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        df = RSNAAbdominalTraumaHarmonizer(base_image_dir=write_tables(tmp_path)).harmonize()
    said = " | ".join(str(w.message) for w in rec)
    assert "1 series of patients not in train.csv: their labels are NaN" in said
    assert "1 image-level labels name a series not in train_series_meta.csv (rows 3)" in said
    assert df["series_id"].tolist() == ["11", "12", "21", "31", "91"]
    assert df["patient_id"].tolist() == ["1", "1", "2", "3", "9"] == df["study_id"].tolist()
    assert df["image_path"].tolist()[:2] == ["train_images/1/11", "train_images/1/12"]
    head = df.iloc[:4]
    assert head["liver_injury"].tolist() == [1, 1, 0, 0]
    assert head["extravasation_injury"].tolist() == [1, 1, 0, 0]
    assert head["kidney_injury"].tolist() == [0, 0, 0, 1]
    assert head["bowel_injury"].tolist() == [0, 0, 0, 1]
    assert head["any_injury"].tolist() == [1, 1, 0, 1]
    # healthy 0, low 2 (mild), high 4 (severe)
    assert head["liver_injury_grade"].tolist() == [2, 2, 0, 0]
    assert head["kidney_injury_grade"].tolist() == [0, 0, 0, 4]
    assert df.iloc[4][["liver_injury", "any_injury", "liver_injury_grade"]].isna().all()
    assert df["aortic_hu"].tolist()[:2] == [150.5, 400.0] and np.isnan(df["aortic_hu"].iloc[2])
    assert df["incomplete_organ"].tolist() == [0, 1, 0, 0, 0]
    assert df["injury_slices"].tolist() == [[[40, "Active_Extravasation", 1]], [], [],
                                            [[7, "Bowel", 0], [8, "Bowel", 2]], []]
    assert not df["has_mask"].any()


def test_the_2024_patient_table_is_read_in_place_of_train_csv(tmp_path):
    root = write_tables(tmp_path, series=SERIES_ROWS[:4], images=IMAGE_ROWS[:3])
    fixed = [list(r) for r in PATIENT_ROWS]
    fixed[1] = ["2", *one_hot(("spleen_low",))]
    pd.DataFrame(fixed, columns=list(COLUMNS)).to_csv(root / "train_2024.csv", index=False)
    df = RSNAAbdominalTraumaHarmonizer(base_image_dir=root).harmonize()
    assert df["spleen_injury"].tolist() == [0, 0, 1, 0]
    assert df["spleen_injury_grade"].tolist() == [0, 0, 2, 0]


def test_injuries_map_to_canonical_findings(tmp_path):
    h = RSNAAbdominalTraumaHarmonizer(base_image_dir=write_tables(tmp_path, series=SERIES_ROWS[
        :4], images=IMAGE_ROWS[:3]))
    out = derive_findings(h.harmonize(), h.spec, findings=[
        "liver_injury", "active_extravasation", "bowel_injury", "abdominal_injury"])
    assert out.iloc[0].tolist() == [1.0, 1.0, 0.0, 1.0]
    assert out.iloc[3].tolist() == [0.0, 0.0, 1.0, 1.0]
    # no injury of the five says nothing of an abdominal injury of another kind
    assert out.iloc[2].tolist()[:3] == [0.0, 0.0, 0.0] and np.isnan(out.iloc[2, 3])
    assert h.spec.grades == ("kidney_injury", "liver_injury", "spleen_injury")
    assert h.spec.identity is None  # no family shared with RSNA PE or the spine release


def test_bad_one_hot_groups_and_cells_are_named(tmp_path):
    bad = [list(r) for r in PATIENT_ROWS]
    bad[1][COLUMNS.index("liver_low")] = 1  # healthy and low
    with pytest.raises(MetadataError, match="row 1: liver_healthy/_low/_high are not one-hot"):
        RSNAAbdominalTraumaHarmonizer(base_image_dir=write_tables(tmp_path / "a", bad)
                                      ).harmonize()
    bad = [list(r) for r in PATIENT_ROWS]
    bad[2][COLUMNS.index("bowel_healthy")] = 1
    with pytest.raises(MetadataError, match="row 2: bowel_healthy and bowel_injury are not"):
        RSNAAbdominalTraumaHarmonizer(base_image_dir=write_tables(tmp_path / "b", bad)
                                      ).harmonize()
    images = [list(r) for r in IMAGE_ROWS]
    images[2][3] = "Liver"
    with pytest.raises(MetadataError, match="row 2: injury_name is unknown"):
        RSNAAbdominalTraumaHarmonizer(base_image_dir=write_tables(
            tmp_path / "c", series=SERIES_ROWS[:4], images=images)).harmonize()


def test_slice_injuries_hand_worked():
    assert slice_injuries([1, 4], ["Bowel", "Active_Extravasation"], 5, injured=True
                          ).tolist() == [[0, 0], [1, 0], [0, 0], [0, 0], [0, 1]]
    assert slice_injuries([], [], 2, injured=False).tolist() == [[0, 0], [0, 0]]
    assert np.isnan(slice_injuries([], [], 2, injured=True)).all()


def test_slice_labels_follow_the_file_an_instance_number_names(tmp_path):
    """Series 31111 is stored in descending z: ``5.dcm`` is the second slice from the feet."""
    from radharmony.datasets.rsna_abdominal_trauma import RSNAAbdominalTraumaDataset

    root = write_rsna_abdominal_trauma(tmp_path, bad_label=True)
    ds = RSNAAbdominalTraumaDataset(root, cache_dir=None)
    with pytest.warns(UserWarning, match=r"1 slice labels on a slice with no file, dropped "
                                         r"\(row 3: .*train_images/10004/21057/99\.dcm\)"):
        first = ds.slice_labels(0)
    assert first.tolist() == [[0, 0], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]]
    assert np.isnan(ds.slice_labels(1)).all()   # injured patient, no slice listed
    assert ds.slice_labels(2).tolist() == [[0, 0]] * 6  # healthy patient
    assert ds.slice_labels(3).tolist() == [[0, 0], [1, 0], [0, 0], [0, 0], [0, 0], [0, 0]]
    import pydicom

    pixels = pydicom.dcmread(root / "train_images/10007/31111/5.dcm").pixel_array
    assert (ds[3]["img"][0, 1].numpy() == pixels.astype(np.int32) - 1024).all()


def test_output_slice_labels_puts_both_injuries_on_the_returned_slices(tmp_path):
    """``output_slice_labels=True``: the (D, 2) labels ride in the sample, through a preset
    (a slice at half the step takes its nearest source slice's row; padding NaN) and a flip
    along D (the rows reversed with the slices)."""
    from radharmony.augment.volumes import RandomFlip3D
    from radharmony.datasets.rsna_abdominal_trauma import RSNAAbdominalTraumaDataset
    from radharmony.volumes.presets import Preset

    root = write_rsna_abdominal_trauma(tmp_path)
    ds = RSNAAbdominalTraumaDataset(root, cache_dir=None, output_slice_labels=True)
    want = [[0, 0], [1, 0], [0, 0], [0, 0], [0, 0], [0, 0]]
    assert ds[3]["slice_labels"].tolist() == want
    d, h, w = ds[3]["spacing"].tolist()
    fine = Preset("fine_d", spacing=(d / 2, h, w), size=(14, *ds[3]["img"].shape[-2:]),
                  pad=-1.0, out=(-1.0, 1.0))
    labels = RSNAAbdominalTraumaDataset(root, cache_dir=None, output_slice_labels=True,
                                        preset=fine)[3]["slice_labels"]
    # the preset's slice k lies at source slice -0.5 + k / 2: k = 0 and 12, 13 are padding,
    # k = 1 is slice 0, a tie (k = 2: 0.5) goes to the later slice
    assert labels.shape == (14, 2) and labels[[0, 12, 13]].isnan().all()
    assert labels[1:12].tolist() == [want[j] for j in (0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5)]
    flipped = RandomFlip3D(p=1.0, axis=0)(ds[3])
    assert flipped["slice_labels"].tolist() == want[::-1]


def test_slice_labels_follow_world_z_when_the_normal_points_to_the_feet(tmp_path):
    """Rows toward A: the slice normal points to the feet, so ``1.dcm`` (first along it) is
    the highest slice; instances 2 and 3 are d = 4 and 3 from the feet."""
    from radharmony.datasets.rsna_abdominal_trauma import RSNAAbdominalTraumaDataset

    root = write_rsna_abdominal_trauma(tmp_path, orientation=(1.0, 0, 0, 0, -1.0, 0))
    ds = RSNAAbdominalTraumaDataset(root, cache_dir=None)
    assert ds.slice_labels(0).tolist() == [[0, 0], [0, 0], [0, 0], [0, 1], [0, 1], [0, 0]]
    assert ds.slice_labels(3).tolist() == [[0, 0], [0, 0], [0, 0], [0, 0], [1, 0], [0, 0]]


def test_twelve_signed_bits_are_sign_extended(tmp_path):
    from radharmony.datasets.rsna_abdominal_trauma import RSNAAbdominalTraumaDataset
    import pydicom

    root = write_rsna_abdominal_trauma(tmp_path)
    stored = pydicom.dcmread(root / "train_images/10005/18667/1.dcm", force=True)
    assert (stored.PixelRepresentation, stored.BitsStored, stored.BitsAllocated) == (1, 12, 16)
    img = RSNAAbdominalTraumaDataset(root, cache_dir=None)[2]["img"]
    assert int(img.min()) == -1024 and int(img.max()) < 1000  # air, never 3072


def test_organ_segmentations_are_matched_through_geometry(tmp_path):
    from radharmony.datasets.rsna_abdominal_trauma import RSNAAbdominalTraumaDataset

    root = write_rsna_abdominal_trauma(tmp_path, segmented=(0, 3))
    ds = RSNAAbdominalTraumaDataset(root, cache_dir=None, output_mask=True, output_grade=True)
    assert ds.harmonized_df["has_mask"].tolist() == [True, False, False, True]
    s = ds[3]  # descending z: matched through the headers all the same
    assert (s["mask"][0].numpy() == organ_labels((6, 16, 18))).all()
    assert s["grade"].tolist() == [4.0, 0.0, 0.0] and s["grade_mask"].tolist() == [1, 1, 1]
    with pytest.raises(RadHarmonyError, match="has no segmentation"):
        ds[1]
    write_label_map(root / "segmentations/21057.nii", root / "train_images/10004/21057",
                    organ_labels((6, 16, 18)), offset=(0.5, 0, 0))
    with pytest.raises(RadHarmonyError, match="segmentations/21057.nii is not on the grid of "
                                              "its image .*train_images/10004/21057"):
        ds[0]


def test_a_merge_of_ct_datasets_masks_what_a_source_does_not_say(tmp_path):
    """Spine, trauma and PE rows in one label space: each source's findings known on its own
    rows only (NaN, masked, elsewhere); the organ grades NaN outside the trauma rows; no
    patient shared between the releases."""
    from radharmony import merge
    from radharmony.datasets.rsna_abdominal_trauma import RSNAAbdominalTraumaDataset
    from radharmony.datasets.rsna_cspine import RSNACSpineDataset
    from radharmony.datasets.rsna_pe import RSNAPEDataset
    from radharmony.fake.rsna_cspine import write_rsna_cspine
    from radharmony.fake.rsna_pe import write_rsna_pe

    flags = {"output_cls": True, "output_grade": True, "cache_dir": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PE has no grade output: masked in the merge
        sources = [RSNACSpineDataset(write_rsna_cspine(tmp_path / "spine"), **flags),
                   RSNAAbdominalTraumaDataset(write_rsna_abdominal_trauma(tmp_path / "t"),
                                              **flags),
                   RSNAPEDataset(write_rsna_pe(tmp_path / "pe", n_studies=2), **flags)]
        m = merge(sources, findings=["cervical_spine_fracture", "liver_injury",
                                     "abdominal_injury", "pulmonary_embolism"])
    df = m.harmonized_df.set_index("source")
    spine, trauma, pe = (df.loc[k] for k in ("rsna_cspine", "rsna_abdominal_trauma",
                                               "rsna_pe"))
    assert spine["cervical_spine_fracture"].tolist() == [1, 1, 0, 0]
    assert spine[["liver_injury", "abdominal_injury", "pulmonary_embolism"]].isna().all().all()
    assert trauma["liver_injury"].tolist() == [1, 1, 0, 0]
    assert trauma["abdominal_injury"].tolist()[:2] == [1, 1]
    assert np.isnan(trauma["abdominal_injury"].iloc[2])  # none of five: other kinds unsaid
    assert trauma[["cervical_spine_fracture", "pulmonary_embolism"]].isna().all().all()
    assert pe[["cervical_spine_fracture", "liver_injury"]].isna().all().all()
    assert trauma["liver_injury_grade"].tolist() == [2, 2, 0, 0]
    assert spine["liver_injury_grade"].isna().all() and pe["liver_injury_grade"].isna().all()
    assert m.family_joins.empty
    prefixes = {p.split(":")[0] for p in m.harmonized_df["patient_id"]}
    assert prefixes == {"rsna_cspine", "rsna_abdominal_trauma", "rsna_pe"}


def test_a_merge_of_ct_datasets_reads_each_volume_through_its_source(tmp_path):
    """Merged volume samples: the source's own volume (reader, geometry) under the merged
    label space; splits and filters read the right volume; volumes and radiographs refused
    in one merge."""
    from radharmony import merge
    from radharmony.combine import MergeError
    from radharmony.datasets.rsna_cspine import RSNACSpineDataset
    from radharmony.datasets.rsna_pe import RSNAPEDataset
    from radharmony.fake.rsna_cspine import write_rsna_cspine
    from radharmony.fake.rsna_pe import write_rsna_pe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spine = RSNACSpineDataset(write_rsna_cspine(tmp_path / "spine"), cache_dir=None)
        pe = RSNAPEDataset(write_rsna_pe(tmp_path / "pe", n_studies=2), cache_dir=None)
        m = merge([spine, pe], findings=["cervical_spine_fracture", "pulmonary_embolism"])
    assert m.spec.row_unit == "volume"
    last = len(m) - 1  # a PE row
    for index, source, j in ((1, spine, 1), (last, pe, len(pe) - 1)):
        got, own = m[index], source[j]
        assert torch.equal(got["img"], own["img"]) and torch.equal(got["affine"], own["affine"])
        assert got["sample_id"] == own["sample_id"] and got["source"] == source.spec.key
    assert m[1]["cls"].tolist() == [1, 0] and m[1]["cls_mask"].tolist() == [1, 0]
    assert m[last]["cls_mask"].tolist() == [0, 1]  # PE says nothing of the spine
    only_pe = m.filter(m.harmonized_df["source"] == "rsna_pe")
    assert torch.equal(only_pe[len(only_pe) - 1]["img"], pe[len(pe) - 1]["img"])
    batch = m.__getitems__([0, last])
    assert [s["source"] for s in batch] == ["rsna_cspine", "rsna_pe"]
    from radharmony.fake import make_fake
    from radharmony.registry import get_dataset_class

    nih = get_dataset_class("nih_cxr14")(**make_fake("nih_cxr14", tmp_path / "nih"),
                                         cache_dir=None)
    with pytest.raises(MergeError, match="volumes and images in one merge"):
        merge([spine, nih])
