"""CT-RATE: hand-written rows (ids, XYSpacing, the v1/v2 rescale, names), the fake's volumes read
exactly (v1 rescaled once, v2 never), one volume per study, the table cache."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radharmony.datasets.ct_rate import (LABELS, CTRATETrainHarmonizer, CTRATEValidHarmonizer,
                                         numbers)
from radharmony.errors import MetadataError
from radharmony.fake.ct_rate import METADATA_HEADER, write_ct_rate

#: two reconstructions of one scan (v1 intercept -1024, non-square pixels on the second) and
#: one of another patient (-8192); every other metadata column empty
META = [{"VolumeName": "train_7_a_1.nii.gz", "XYSpacing": "[0.75, 0.75]", "ZSpacing": "1.5",
         "RescaleSlope": "1", "RescaleIntercept": "-1024",
         "ImagePositionPatient": "[-175.0, -190.0, -300.5]",
         "ImageOrientationPatient": "[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]",
         "PatientSex": "F", "PatientAge": "058Y"},
        {"VolumeName": "train_7_a_2.nii.gz", "XYSpacing": "[0.703125, 0.8]", "ZSpacing": "1",
         "RescaleSlope": "1", "RescaleIntercept": "-1024",
         "ImagePositionPatient": "[-175.0, -190.0, -300.5]",
         "ImageOrientationPatient": "[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]",
         "PatientSex": "F", "PatientAge": "058Y"},
        {"VolumeName": "train_12_b_1.nii.gz", "XYSpacing": "[0.58, 0.58]", "ZSpacing": "2.5",
         "RescaleSlope": "1.0", "RescaleIntercept": "-8192.0",
         "ImagePositionPatient": "[-150.0, -160.0, -420.0]",
         "ImageOrientationPatient": "[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]",
         "PatientSex": "M", "PatientAge": "071Y"}]
REPORTS = ('VolumeName,ClinicalInformation_EN,Technique_EN,Findings_EN,Impressions_EN\n'
           'train_7_a_1.nii.gz,Cough.,Non-contrast axial images.,"Mild emphysema, no nodule.",'
           'Emphysema.\n'
           'train_12_b_1.nii.gz,,Axial images.,Clear lungs.,Normal.\n')
LABEL_ROWS = {"train_7_a_1.nii.gz": {"Emphysema": 1, "Lung nodule": 0},
              "train_7_a_2.nii.gz": {"Emphysema": 1},
              "train_12_b_1.nii.gz": {"Medical material": 1, "Pericardial effusion": 1}}


def write_dataset(root: Path, *, trees=()) -> Path:
    """The three CSVs from the rows above under ``root/dataset``; ``trees``: (tree, name)
    pairs of empty volume files to place."""
    base = root / "dataset"
    (base / "metadata").mkdir(parents=True)
    pd.DataFrame([{c: row.get(c, "") for c in METADATA_HEADER} for row in META]).to_csv(
        base / "metadata" / "train_metadata.csv", index=False)
    (base / "radiology_text_reports").mkdir()
    (base / "radiology_text_reports" / "train_reports.csv").write_text(REPORTS)
    (base / "multi_abnormality_labels").mkdir()
    pd.DataFrame([{"VolumeName": n, **{k: v.get(k, 0) for k in LABELS}}
                  for n, v in LABEL_ROWS.items()]).to_csv(
        base / "multi_abnormality_labels" / "train_predicted_labels.csv", index=False)
    for tree, name in trees:
        patient, scan = name.split("_")[1], name.split("_")[2]
        path = base / tree / f"train_{patient}" / f"train_{patient}_{scan}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    return base


def test_hand_written_rows_pin_ids_spacing_labels_and_reports(tmp_path):
    base = write_dataset(tmp_path)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        df = CTRATETrainHarmonizer(base_image_dir=base).harmonize()
    assert any("1 of 3 volumes have no row in the report table" in str(w.message) for w in rec)
    assert df["patient_id"].tolist() == ["train_7", "train_7", "train_12"]
    assert df["study_id"].tolist() == ["train_7_a", "train_7_a", "train_12_b"]
    assert df["volume_name"].tolist() == ["train_7_a_1", "train_7_a_2", "train_12_b_1"]
    assert df["reconstruction"].tolist() == [1, 2, 1]
    # no volume tree at all: the current release's (v2) paths, nothing to rescale
    assert df["image_path"].tolist() == ["train_fixed/train_7/train_7_a/train_7_a_1.nii.gz",
                                         "train_fixed/train_7/train_7_a/train_7_a_2.nii.gz",
                                         "train_fixed/train_12/train_12_b/train_12_b_1.nii.gz"]
    assert df["volume_version"].tolist() == [2, 2, 2]
    assert df["rescale_slope"].isna().all() and df["rescale_intercept"].isna().all()
    # XYSpacing: two numbers each, the second kept where it differs
    assert df["spacing_x"].tolist() == [0.75, 0.703125, 0.58]
    assert df["spacing_y"].tolist() == [0.75, 0.8, 0.58]
    assert df["spacing_z"].tolist() == [1.5, 1.0, 2.5]
    assert df["image_position_patient"].iloc[2] == [-150.0, -160.0, -420.0]
    assert df["image_orientation_patient"].iloc[0] == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert (df["patient_sex"].tolist(), df["patient_age"].tolist()) == \
        (["F", "F", "M"], ["058Y", "058Y", "071Y"])
    assert df.loc[0, "Emphysema"] == 1 and df.loc[0, "Lung nodule"] == 0
    assert df.loc[2, "Medical material"] == 1 and df.loc[2, "Pericardial effusion"] == 1
    assert df.loc[2, "Emphysema"] == 0
    # the scan's report serves its second reconstruction, which has no report row
    assert df.loc[0, "report"] == ("CLINICAL INFORMATION:\nCough.\n\nTECHNIQUE:\nNon-contrast "
                                   "axial images.\n\nFINDINGS:\nMild emphysema, no nodule.\n\n"
                                   "IMPRESSION:\nEmphysema.")
    assert df.loc[1, "report"] == df.loc[0, "report"]
    assert df.loc[1, "section_findings"] == "Mild emphysema, no nodule."
    assert df.loc[2, "section_clinical_information"] is None
    assert df.loc[2, "report"] == "TECHNIQUE:\nAxial images.\n\nFINDINGS:\nClear lungs.\n\n" \
                                  "IMPRESSION:\nNormal."
    assert set(df["split"]) == {"train"} and set(df["split_raw"]) == {"train"}


def test_the_version_is_found_per_volume_and_only_v1_is_rescaled(tmp_path):
    """v2 (``train_fixed/``) wins where a volume is in both trees; a volume only in the v1
    tree (``train/``) takes the metadata's rescale; nothing is rescaled twice."""
    base = write_dataset(tmp_path, trees=[("train_fixed", "train_7_a_1.nii.gz"),
                                          ("train", "train_7_a_1.nii.gz"),
                                          ("train", "train_7_a_2.nii.gz"),
                                          ("train", "train_12_b_1.nii.gz")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = CTRATETrainHarmonizer(base_image_dir=base).harmonize()
    assert df["volume_version"].tolist() == [2, 1, 1]
    assert df["image_path"].tolist() == ["train_fixed/train_7/train_7_a/train_7_a_1.nii.gz",
                                         "train/train_7/train_7_a/train_7_a_2.nii.gz",
                                         "train/train_12/train_12_b/train_12_b_1.nii.gz"]
    assert df["rescale_slope"].tolist()[1:] == [1.0, 1.0] and np.isnan(df["rescale_slope"][0])
    assert df["rescale_intercept"].tolist()[1:] == [-1024.0, -8192.0]
    assert np.isnan(df["rescale_intercept"][0])


def test_only_the_v1_tree_makes_every_unlisted_volume_v1(tmp_path):
    base = write_dataset(tmp_path, trees=[("train", "train_7_a_1.nii.gz")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = CTRATETrainHarmonizer(base_image_dir=base).harmonize()
    assert df["volume_version"].tolist() == [1, 1, 1]
    assert df["image_path"].iloc[2] == "train/train_12/train_12_b/train_12_b_1.nii.gz"


def test_valid_split_finds_the_valid_labels_beside_validation_files(tmp_path):
    base = write_ct_rate(tmp_path, split="valid", n_patients=2, metadata_only=True)
    assert (base / "multi_abnormality_labels" / "valid_predicted_labels.csv").is_file()
    assert (base / "metadata" / "validation_metadata.csv").is_file()
    df = CTRATEValidHarmonizer(base_image_dir=base).harmonize()  # no warning: all found
    assert df["patient_id"].tolist() == ["valid_1", "valid_1", "valid_2", "valid_2", "valid_2"]
    assert df["image_path"].iloc[0] == "valid_fixed/valid_1/valid_1_a/valid_1_a_1.nii.gz"
    assert not df[list(LABELS)].isna().any().any()
    assert set(df["split"]) == {"valid"}


def test_xy_spacing_is_two_numbers_or_an_error():
    cells = pd.Series(["[0.75, 0.75]", " [0.5,0.6] ", "[1e-1, 2]"])
    assert numbers(cells, 2, source="t", column="XYSpacing").tolist() == \
        [[0.75, 0.75], [0.5, 0.6], [0.1, 2.0]]
    for bad in ("0.75", "[0.75]", "[0.75, 0.75, 1]", "[0.75, x]"):
        with pytest.raises(MetadataError, match="XYSpacing is not a list of 2 numbers"):
            numbers(pd.Series(["[0.7, 0.7]", bad]), 2, source="t", column="XYSpacing")


def test_a_bad_volume_name_is_named(tmp_path):
    base = write_dataset(tmp_path)
    meta = base / "metadata" / "train_metadata.csv"
    meta.write_text(meta.read_text().replace("train_12_b_1.nii.gz", "train_12_b.nii.gz", 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(MetadataError, match=r"row 2: VolumeName is not .*train_12_b\.nii"):
            CTRATETrainHarmonizer(base_image_dir=base).harmonize()
