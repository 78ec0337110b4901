"""RSNA Pneumonia: label and box meanings, honest patient grouping, real counts, fake samples."""

from __future__ import annotations

import io

import pandas as pd
import pytest
import torch

from radharmony.datasets.rsna import SPEC, RSNAPneumoniaDataset, RSNAPneumoniaHarmonizer
from radharmony.fake.rsna import write_rsna
from radharmony.table.schema import validate
from txv_data import txv_file

LABELS = """patientId,x,y,width,height,Target
img-a,,,,,0
img-b,264.0,152.0,213.0,379.0,1
img-b,562.0,152.0,256.0,453.0,1
img-c,,,,,0
"""
MAPPING = [{"img_id": "00000013_005.png", "subset_img_id": "img-a"},
           {"img_id": "00000013_006.png", "subset_img_id": "img-b"}]


def harmonize(raw: dict) -> pd.DataFrame:
    raw = {"classes": None, "headers": None, "mapping": None, **raw}
    raw["labels"] = pd.read_csv(io.StringIO(LABELS), dtype={"patientId": str})
    return validate(RSNAPneumoniaHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_one_row_per_image_target_and_boxes_in_pixels():
    with pytest.warns(UserWarning, match="patient_id is the image id"):
        df = harmonize({}).set_index("study_id")
    assert list(df.index) == ["img-a", "img-b", "img-c"]
    assert df.loc["img-b", "Pneumonia"] == 1 and df.loc["img-a", "Pneumonia"] == 0
    box = df.loc["img-b", "boxes"][1]
    assert (box["x_min"], box["y_min"], box["x_max"], box["y_max"]) == (562, 152, 818, 605)
    assert box["label"] == "Pneumonia" and df.loc["img-a", "boxes"] == []
    assert df.loc["img-a", "patient_id"] == "img-a" and df.loc["img-a", "view_position"] is None


def test_mapping_restores_nih_patients_and_warns_for_the_rest():
    with pytest.warns(UserWarning, match="1 RSNA images have no NIH original"):
        df = harmonize({"mapping": MAPPING}).set_index("study_id")
    assert df.loc["img-a", "patient_id"] == df.loc["img-b", "patient_id"] == "00000013"
    assert df.loc["img-b", "nih_image"] == "00000013_006"
    assert df.loc["img-c", "patient_id"] == "img-c"


CLASSES = """patientId,class
img-a,Normal
img-b,Lung Opacity
img-b,Lung Opacity
img-c,No Lung Opacity / Not Normal
"""


def test_detailed_class_makes_normal_images_certain_negatives():
    from radharmony.vocabulary import derive_findings

    classes = pd.read_csv(io.StringIO(CLASSES))
    with pytest.warns(UserWarning, match="no NIH original"):
        df = harmonize({"classes": classes}).set_index("study_id")
    got = df[["Pneumonia", "Lung Opacity", "No Finding"]].astype(float).fillna(-9)
    assert got.loc["img-a"].tolist() == [0, 0, 1]      # Normal
    assert got.loc["img-b"].tolist() == [1, 1, 0]      # Lung Opacity
    assert got.loc["img-c"].tolist() == [0, -9, 0]     # Not Normal: opacity unknown
    canon = derive_findings(df, SPEC, findings=["lung_opacity", "pneumonia", "no_finding",
                                                "consolidation", "pleural_effusion"])
    canon = canon.astype(float).fillna(-9)
    assert canon.loc["img-a"].tolist() == [0, 0, 1, 0, -9]   # effusion: not RSNA's to say
    assert canon.loc["img-b"].tolist() == [1, -9, 0, -9, -9]  # pneumonia: approximate only
    assert canon.loc["img-c"].tolist() == [-9, -9, 0, -9, -9]
    with pytest.warns(UserWarning, match="no NIH original"):
        bare = harmonize({}).set_index("study_id")  # no class file: only Target's 1 speaks
    assert bare["Lung Opacity"].fillna(-9).tolist() == [-9, 1, -9]
    assert bare["No Finding"].isna().all()


def test_unknown_detailed_class_names_the_fix():
    from radharmony.errors import MetadataError

    classes = pd.read_csv(io.StringIO(CLASSES.replace("Normal\n", "Abnormal\n", 1)))
    with pytest.raises(MetadataError, match="unknown class.*'Abnormal'"):
        harmonize({"classes": classes})


def test_header_table_gives_view_sex_age():
    headers = pd.DataFrame({"PatientID": ["img-a", "img-b"], "ViewPosition": ["AP", "PA"],
                            "PatientSex": ["F", "M"], "PatientAge": [43, 155]})
    with pytest.warns(UserWarning):
        df = harmonize({"headers": headers}).set_index("study_id")
    assert df.loc["img-a", "view_position"] == "AP" and df.loc["img-b", "patient_age"] == 155
    assert df.loc["img-c", "patient_sex"] is None


def test_real_tables_counts_and_patient_ids_are_image_ids():
    labels = txv_file("kaggle_stage_2_train_labels.csv.zip")
    txv_file("kaggle_stage_2_train_images_dicom_headers.csv.gz")  # read beside the labels
    with pytest.warns(UserWarning, match="26684 RSNA images have no NIH original"):
        df = RSNAPneumoniaHarmonizer(csv_path=labels).harmonize()
    assert len(df) == SPEC.expected["images"] == 26_684
    assert int(df["Pneumonia"].sum()) == SPEC.expected["positive"] == 6_012
    assert df["boxes"].map(len).sum() == SPEC.expected["boxes"] == 9_555
    assert ((df["boxes"].map(len) > 0) == (df["Pneumonia"] == 1)).all()
    # the header table's PatientID is the image id: no patient grouping in the challenge files
    assert (df["patient_id"] == df["study_id"]).all() and df["patient_id"].nunique() == 26_684
    assert df["view_position"].value_counts().to_dict() == {"PA": 14_511, "AP": 12_173}


def test_fake_dataset_samples(tmp_path):
    image_dir = write_rsna(tmp_path, n_images=6)
    ds = RSNAPneumoniaDataset(image_dir, output_cls=True, output_bbox=True, cache_dir=None,
                              dtype=torch.float32)
    df = ds.harmonized_df
    assert len(ds) == 6 and df["detailed_class"].notna().all()
    assert df["patient_id"].nunique() == 3  # the mapping pairs the images
    i = int(df["boxes"].map(len).to_numpy().argmax())
    rec = df["boxes"].iloc[i][0]
    sample = ds[i]
    scale = 224 / 256
    assert sample["cls"].tolist() == [1.0, 1.0, 0.0] and sample["img"].shape == (1, 224, 224)
    normal = df["detailed_class"] == "Normal"  # the fake writes the class file
    assert normal.any() and (df.loc[normal, "No Finding"] == 1).all()
    assert (df.loc[normal, "Lung Opacity"] == 0).all()
    assert sample["bbox"][0].tolist() == pytest.approx(
        [rec["x_min"] * scale, rec["y_min"] * scale, rec["x_max"] * scale,
         rec["y_max"] * scale], abs=1e-3)
    train, val = ds.get_datasets(2)
    assert not set(train.harmonized_df["patient_id"]) & set(val.harmonized_df["patient_id"])


def test_non_numeric_box_field_names_the_row():
    from radharmony.errors import MetadataError

    raw = {"classes": None, "headers": None, "mapping": None,
           "labels": pd.read_csv(io.StringIO(LABELS.replace("562.0", "x562")),
                                 dtype={"patientId": str})}
    with pytest.raises(MetadataError, match="column 'x' holds a non-number at row 2"):
        RSNAPneumoniaHarmonizer.harmonize_raw(raw, source="rows")
