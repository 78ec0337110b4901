"""RSNA-STR PE: hand-written slice rows -> one row per series (exam labels, the derived PE
label, RV/LV not assessed on negative exams, patient = study, no DICOM read), and slice labels
that follow the slices in world z order, never the CSV's order or the files' names."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.rsna_pe import (COLUMNS, EXAM_LABELS, RSNAPEHarmonizer, labels_in_order,
                                         slice_order)
from radharmony.errors import MetadataError
from radharmony.fake.rsna_pe import uid, write_rsna_pe, write_series
from radharmony.fake.volumes import synthetic_ct
from radharmony.vocabulary import derive_findings

S1, S2, S3 = "1.2.3.1", "1.2.3.2", "1.2.3.3"   # studies: positive, negative, indeterminate


def row(study, series, sop, pe, **exam):
    return {"StudyInstanceUID": study, "SeriesInstanceUID": series, "SOPInstanceUID": sop,
            "pe_present_on_image": pe, **{c: exam.get(c, 0) for c in EXAM_LABELS}}


POS = {"rv_lv_ratio_gte_1": 1, "rightsided_pe": 1, "acute_and_chronic_pe": 1}
#: the CSV's order mixes studies' slices and never follows z
ROWS = [row(S1, S1 + ".9", "a3", 1, **POS), row(S2, S2 + ".9", "b1", 0,
                                                  negative_exam_for_pe=1),
        row(S1, S1 + ".9", "a1", 0, **POS), row(S3, S3 + ".9", "c1", 0, indeterminate=1),
        row(S1, S1 + ".9", "a2", 1, **POS), row(S2, S2 + ".9", "b2", 0,
                                                  negative_exam_for_pe=1)]


def write_table(root: Path, rows=ROWS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(root / "train.csv", index=False)
    return root


def test_hand_written_slices_become_one_row_per_series(tmp_path):
    df = RSNAPEHarmonizer(base_image_dir=write_table(tmp_path)).harmonize()
    assert df["series_instance_uid"].tolist() == [S1 + ".9", S2 + ".9", S3 + ".9"]
    assert df["patient_id"].tolist() == [S1, S2, S3]  # patient = study: no patient id shipped
    assert df["study_id"].tolist() == [S1, S2, S3]
    assert df["image_path"].tolist() == [f"train/{S1}/{S1}.9", f"train/{S2}/{S2}.9",
                                         f"train/{S3}/{S3}.9"]
    assert df["num_slices"].tolist() == [3, 2, 1] and df["pe_slices"].tolist() == [2, 0, 0]
    # the pairs in the CSV's order: the order along z is the dataset's business
    assert df["slice_sop_uids"].tolist() == [["a3", "a1", "a2"], ["b1", "b2"], ["c1"]]
    assert df["slice_pe_present"].tolist() == [[1, 0, 1], [0, 0], [0]]
    assert df["pe_positive_exam"].tolist()[:2] == [1.0, 0.0]
    assert np.isnan(df["pe_positive_exam"].iloc[2])  # indeterminate: unknown
    assert df["rv_lv_ratio_gte_1"].iloc[0] == 1 and df["rv_lv_ratio_lt_1"].iloc[0] == 0
    assert df[["rv_lv_ratio_gte_1", "rv_lv_ratio_lt_1"]].iloc[1:].isna().all().all()
    assert df["negative_exam_for_pe"].tolist() == [0, 1, 0]
    assert df["indeterminate"].tolist() == [0, 0, 1]
    assert set(df["split"]) == {"train"}


def test_exam_labels_map_to_canonical_findings(tmp_path):
    h = RSNAPEHarmonizer(base_image_dir=write_table(tmp_path))
    out = derive_findings(h.harmonize(), h.spec, findings=[
        "pulmonary_embolism", "right_pulmonary_embolism", "left_pulmonary_embolism",
        "chronic_pulmonary_embolism", "right_ventricular_dilatation"])
    assert out.iloc[0].tolist() == [1.0, 1.0, 0.0, 1.0, 1.0]
    # negative exam: no PE, so none of any side and no chronic PE (the hierarchy bounds
    # them: chronic_pe's own 0 never would, it is narrower); the RV was not assessed
    assert out.iloc[1].tolist()[:4] == [0.0, 0.0, 0.0, 0.0]
    assert np.isnan(out.iloc[1].tolist()[4])
    assert np.isnan(out.iloc[2, 0])


def test_the_table_reads_no_dicom_and_names_bad_cells(tmp_path, monkeypatch):
    import radharmony.volumes.dicom_headers as headers

    def refuse(*args, **kwargs):
        raise AssertionError("a DICOM header was read to harmonize")

    monkeypatch.setattr(headers, "scan", refuse)
    monkeypatch.setattr(headers, "read_header", refuse)
    root = write_table(tmp_path / "a")
    assert len(RSNAPEHarmonizer(base_image_dir=root).harmonize(cache_dir=tmp_path / "c")) == 3
    bad = [dict(r) for r in ROWS]
    bad[4]["pe_present_on_image"] = 2
    with pytest.raises(MetadataError, match="row 4: label 'pe_present_on_image'"):
        RSNAPEHarmonizer(base_image_dir=write_table(tmp_path / "b", bad)).harmonize()
    bad[4]["pe_present_on_image"] = None  # an empty cell: the column is read as floats
    with pytest.raises(MetadataError, match="row 4: pe_present_on_image is empty"):
        RSNAPEHarmonizer(base_image_dir=write_table(tmp_path / "e", bad)).harmonize()
    differ = [dict(r) for r in ROWS]
    differ[2]["central_pe"] = 1
    with pytest.warns(UserWarning, match="1 series have exam labels that differ.*central_pe"):
        df = RSNAPEHarmonizer(base_image_dir=write_table(tmp_path / "d", differ)).harmonize()
    assert np.isnan(df["central_pe"].iloc[0]) and df["central_pe"].iloc[1] == 0


def test_slice_order_follows_the_d_axis():
    files = ["/x/s0.dcm", "/x/s1.dcm", "/x/s2.dcm"]
    # LPS: D toward S 2 mm a slice from z = -300, H toward P, W toward L
    affine = np.array([[0, 0, 0.7, -100.0], [0, 0.7, 0, -100.0], [2.0, 0, 0, -300.0],
                       [0, 0, 0, 1]])
    assert slice_order(files, (-100.0, -100.0, -300.0), affine, 3) == ["s0", "s1", "s2"]
    assert slice_order(files, (-100.0, -100.0, -296.0), affine, 3) == ["s2", "s1", "s0"]
    with pytest.raises(Exception, match="not at either end"):
        slice_order(files, (-100.0, -100.0, -298.0), affine, 3)
    assert labels_in_order(["s2", "s9", "s0"], ["s0", "s2"], [1, 0]).tolist()[::2] == [0, 1]


# -- volumes ------------------------------------------------------------------------------------
def write_study(root: Path, orientation, rows_of):
    """One series of 6 slices, 2.5 mm apart from z = -250 along the normal of
    ``orientation``; ``rows_of(sops)`` gives the CSV rows from the SOP UIDs (normal order)."""
    study, series = uid(7, 1), uid(7, 1, 2)
    sops = write_series(root, study, series, synthetic_ct((6, 16, 18)), z0=-250.0,
                        orientation=orientation, step=2.5)
    write_table(root, rows_of(study, series, sops))
    return sops


@pytest.mark.parametrize("orientation", [(1.0, 0.0, 0.0, 0.0, 1.0, 0.0),
                                         (1.0, 0.0, 0.0, 0.0, -1.0, 0.0)])
def test_slice_label_k_is_the_kth_slice_in_world_z(tmp_path, orientation):
    """PE on the two highest slices (toward the head). With the second
    orientation the normal points to the feet: the reader's sort runs from the head, the
    canonical order flips it; the CSV lists the slices in yet another order."""
    def rows_of(study, series, sops):
        z = -250.0 + 2.5 * np.arange(6) * (1 if orientation[4] > 0 else -1)
        pe = (z >= z.max() - 2.5).astype(int)  # the two highest slices
        return [row(study, series, sops[k], int(pe[k]), **POS) for k in (3, 0, 5, 1, 4, 2)]

    write_study(tmp_path, orientation, rows_of)
    from radharmony.datasets.rsna_pe import RSNAPEDataset

    ds = RSNAPEDataset(tmp_path, cache_dir=tmp_path / "cache", output_slice_labels=True)
    for _ in range(2):  # read, then from the volume cache
        s = ds[0]
        z = s["affine"][2, 0].item() * np.arange(6) + s["affine"][2, 3].item()
        if orientation[4] > 0:
            assert z.tolist() == pytest.approx([-250.0, -247.5, -245.0, -242.5, -240.0, -237.5])
            assert s["slice_labels"].tolist() == [0, 0, 0, 0, 1, 1]
        else:
            assert z.tolist() == pytest.approx([-262.5, -260.0, -257.5, -255.0, -252.5, -250.0])
            assert s["slice_labels"].tolist() == [0, 0, 0, 0, 1, 1]
        assert s["slice_labels"].dtype == torch.float32


def test_the_fake_pins_pe_slices_in_z_order(tmp_path):
    from radharmony.datasets.rsna_pe import RSNAPEDataset

    base = write_rsna_pe(tmp_path, n_studies=2)
    csv = pd.read_csv(base / "train.csv", dtype=str)
    files = sorted(p.name[:-4] for p in (base / "train").rglob("*.dcm"))
    assert sorted(csv["SOPInstanceUID"]) == files  # files named by their SOP UIDs
    ds = RSNAPEDataset(base, cache_dir=None, output_slice_labels=True, output_cls=True)
    assert ds[0]["slice_labels"].tolist() == [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    assert ds[1]["slice_labels"].tolist() == [0] * 10
    along = [Path(f).name for f in ds.load_volume(0).source.files]  # the reader's sort
    assert along != sorted(along)  # file names do not follow z
    assert ds[0]["cls"][0].item() == 1 and ds[1]["cls"][0].item() == 0
    in_csv = csv[csv["StudyInstanceUID"] == ds.harmonized_df["study_id"][0]]
    assert in_csv["pe_present_on_image"].astype(int).tolist() != [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]


def test_slice_labels_follow_a_preset_slice_axis(tmp_path):
    """1.25 mm slices resampled to 0.625 mm (grid convention: output slice k samples source
    k / 2) and padded to 21: a resampled slice takes the nearest source slice's label (a tie
    to the later one), a padded slice is NaN; a crop drops slices."""
    from radharmony.datasets.rsna_pe import RSNAPEDataset
    from radharmony.volumes.presets import Preset

    base = write_rsna_pe(tmp_path, n_studies=1)
    (d, h, w) = RSNAPEDataset(base, cache_dir=None)[0]["spacing"].tolist()
    assert d == pytest.approx(1.25)
    fine = Preset("fine_d", spacing=(0.625, h, w), size=(21, 20, 24), pad=-1.0, out=(-1.0, 1.0))
    ds = RSNAPEDataset(base, cache_dir=tmp_path / "cache", output_slice_labels=True,
                       preset=fine)
    for _ in range(2):  # computed, then from the preset cache
        labels = ds[0]["slice_labels"]
        assert labels.shape == (21,) and ds[0]["img"].shape == (1, 21, 20, 24)
        assert labels[1:-1].tolist() == [0] * 5 + [1] * 6 + [0] * 8
        assert labels[[0, -1]].isnan().all()
    crop = Preset("crop_d", spacing=(1.25, h, w), size=(4, 20, 24))  # slices 3..6 kept
    ds = RSNAPEDataset(base, cache_dir=None, output_slice_labels=True, preset=crop)
    assert ds[0]["slice_labels"].tolist() == [1, 1, 1, 0]


def test_slice_labels_follow_a_volume_augmentation(tmp_path):
    """A flip along D (head-feet) as the train transform reverses the slices and their labels
    together; a turn in the axial plane leaves them."""
    from radharmony.augment import Compose
    from radharmony.augment.volumes import RandomFlip3D, RandomTurn3D
    from radharmony.datasets.rsna_pe import RSNAPEDataset

    base = write_rsna_pe(tmp_path, n_studies=1)
    ds = RSNAPEDataset(base, cache_dir=None, output_slice_labels=True)
    aug = Compose([RandomFlip3D(p=1.0, axis=0), RandomTurn3D(p=1.0, plane=(1, 2))])
    sample = ds.get_datasets(train_transform=aug)[0]
    assert sample["slice_labels"].tolist() == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0]
    assert sample["affine"][2, 0].item() == pytest.approx(-1.25)      # D now runs toward I
