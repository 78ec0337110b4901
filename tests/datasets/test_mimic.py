"""MIMIC-CXR-JPG (fakes only: no real table is available): label encodings, study-level labels,
paths, official split, reports."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest
import torch

from radharmony.datasets.mimic import (LABEL_COLS, METADATA_COLUMNS, SPEC, MIMICCXRJPGDataset,
                                       MIMICCXRJPGHarmonizer)
from radharmony.errors import MetadataError
from radharmony.fake.mimic import write_mimic
from radharmony.table.schema import validate

META = ",".join(METADATA_COLUMNS) + """
d1,10000032,50414267,CHEST (PA AND LAT),PA,3056,2544,21800506,213014.531,\
CHEST (PA AND LAT),postero-anterior,Erect
d2,10000032,50414267,CHEST (PA AND LAT),LATERAL,3056,2544,21800506,213014.531,\
CHEST (PA AND LAT),lateral,Erect
d3,10000032,53189527,CHEST (PORTABLE AP),,2705,2539,21800626,165500.312,CHEST (PORTABLE AP),,
"""
HEADER = "subject_id,study_id," + ",".join(LABEL_COLS)


def table(text: str) -> pd.DataFrame:
    ids = {"dicom_id": str, "subject_id": str, "study_id": str}
    return pd.read_csv(io.StringIO(text), dtype=ids)


def harmonize(chexpert: str, negbio: str | None = None, split: str | None = None,
              reports: dict | None = None) -> pd.DataFrame:
    raw = {"metadata": table(META), "chexpert": table(chexpert),
           "negbio": None if negbio is None else table(negbio),
           "split": None if split is None else table(split), "reports": reports or {}}
    return validate(MIMICCXRJPGHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_uncertain_negative_positive_and_missing_stay_distinct():
    values = "1.0,0.0,-1.0,," + ",".join([""] * 10)
    chexpert = f"{HEADER}\n10000032,50414267,{values}\n10000032,53189527,{','.join(['0.0'] * 14)}\n"
    df = harmonize(chexpert)
    first = df.iloc[0]
    assert (first["Atelectasis"], first["Cardiomegaly"], first["Consolidation"]) == (1, 0, -1)
    assert math.isnan(first["Edema"])
    assert df.iloc[1]["Atelectasis"] == 1  # same study: the study's labels
    assert df.iloc[2]["Atelectasis"] == 0  # the patient's other study keeps its own
    assert math.isnan(df.iloc[0]["negbio_Atelectasis"])  # no NegBio table given


def test_paths_views_split_and_reports():
    chexpert = f"{HEADER}\n10000032,50414267,{','.join(['1.0'] * 14)}\n"
    split = "dicom_id,study_id,subject_id,split\nd1,50414267,10000032,train\n" \
            "d2,50414267,10000032,train\nd3,53189527,10000032,validate\n"
    with pytest.warns(UserWarning, match="1 images belong to studies without a row"):
        df = harmonize(chexpert, chexpert.replace("1.0", "0.0"), split,
                       {"50414267": "  FINAL REPORT\n FINDINGS: clear.\n"})
    assert df["image_path"].tolist()[0] == "files/p10/p10000032/s50414267/d1.jpg"
    assert df["dicom_id"].tolist() == ["d1", "d2", "d3"]
    assert df["view_position"].tolist() == ["PA", "LATERAL", None]
    assert df["split"].tolist() == ["train", "train", "valid"]
    assert df["split_raw"].tolist() == ["train", "train", "validate"]
    assert df["report"].tolist() == ["FINAL REPORT\n FINDINGS: clear."] * 2 + [None]
    assert df.iloc[0]["negbio_Pneumonia"] == 0 and df.iloc[0]["Pneumonia"] == 1
    assert math.isnan(df.iloc[2]["Pneumonia"])
    assert df["study_date"].tolist() == [21800506, 21800506, 21800626]


def test_wrong_metadata_header_is_a_clear_error():
    raw = {"metadata": table(META.replace("ViewPosition", "View")), "chexpert": None,
           "negbio": None, "split": None, "reports": {}}
    with pytest.raises(MetadataError, match="ViewPosition"):
        MIMICCXRJPGHarmonizer.harmonize_raw(raw, source="rows")


def test_fake_release_end_to_end(tmp_path):
    root = write_mimic(tmp_path)
    with pytest.warns(UserWarning, match="without a row in the CheXpert"):
        ds = MIMICCXRJPGDataset(root, output_cls=True, output_report=True, cache_dir=None,
                                dtype=torch.float32)
    df = ds.harmonized_df
    assert df["patient_id"].nunique() == 3 and df["study_id"].nunique() == 5
    assert set(df["split"]) == {"train", "valid", "test"}
    assert df.groupby("patient_id")["split"].nunique().eq(1).all()
    assert df["report"].isna().sum() == df.loc[df["report"].isna(), "study_id"].map(
        df["study_id"].value_counts()).iloc[0]  # exactly one study lacks its report
    with_report = int(df["report"].notna().to_numpy().argmax())
    sample = ds[with_report]
    assert sample["img"].shape == (1, 224, 224) and sample["cls"].shape == (14,)
    assert sample["report"].startswith("FINAL REPORT")
    assert set(sample["cls"].tolist()) <= {-1.0, 0.0, 1.0}


def test_label_values_are_never_coerced_silently():
    chexpert = f"{HEADER}\n10000032,50414267,yes,{','.join([''] * 13)}\n"
    with pytest.raises(MetadataError, match="'Atelectasis' holds a non-number"):
        harmonize(chexpert)
