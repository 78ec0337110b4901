"""EmoryCXR v2: study labels and reports broadcast to images, missing label/report rows,
demographics, the unverified-columns warning."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from radharmony.datasets.chexpert import LABELS
from radharmony.datasets.emory_cxr import SPEC, EmoryCXRHarmonizer
from radharmony.errors import MetadataError, UnverifiedFormatWarning
from radharmony.fake.emory_cxr import write_emory_cxr
from radharmony.table.schema import validate

META = """empi_anon,AccessionNumber_anon,ImagePath,ViewPosition,Sex,Age,BMI,Frontal
101,9001,101/9001/1.2.3.png,PA,Male,64,31.2,True
101,9001,101/9001/1.2.4.png,LL,Male,64,31.2,False
202,9002,202/9002/1.2.5.png,,Female,,,True
"""
LAB = ",".join(LABELS)


def table(text):
    return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_values=[""])


def harmonize(labels=None, reports=None, meta=META):
    raw = {"metadata": table(meta), "labels": None if labels is None else table(labels),
           "reports": None if reports is None else table(reports)}
    return validate(EmoryCXRHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_study_labels_and_reports_reach_every_image_of_the_study():
    cells = ["1", "", "0"] + [""] * (len(LABELS) - 3)
    df = harmonize(labels=f"AccessionNumber_anon,{LAB}\n9001," + ",".join(cells) + "\n",
                   reports="AccessionNumber_anon,deid_report\n9001,\"FINDINGS: Clear.\n"
                           "IMPRESSION: Normal.\"\n")
    assert df["patient_id"].tolist() == ["101", "101", "202"]
    assert df["study_id"].tolist() == ["9001", "9001", "9002"]
    assert df["image_path"].tolist() == ["101/9001/1.2.3.png", "101/9001/1.2.4.png",
                                         "202/9002/1.2.5.png"]
    assert df["No Finding"].tolist()[:2] == [1.0, 1.0]
    assert df["Cardiomegaly"].tolist()[:2] == [0.0, 0.0]
    assert np.isnan(df.loc[0, "Enlarged Cardiomediastinum"])
    assert df.iloc[2][list(LABELS)].isna().all()  # 9002 has no label row
    assert df["report"].tolist() == ["FINDINGS: Clear.\nIMPRESSION: Normal."] * 2 + [None]
    assert df["patient_sex"].tolist() == ["M", "M", "F"]
    assert df.loc[0, "patient_age"] == 64 and np.isnan(df.loc[2, "patient_age"])
    assert df.loc[0, "bmi"] == pytest.approx(31.2)
    assert df["view_position"].tolist() == ["PA", "LL", None]
    assert df["frontal"].tolist() == [1, 0, 1]


def test_without_the_label_table_every_label_is_missing():
    df = harmonize()
    assert df[list(LABELS)].isna().all(axis=None) and df["report"].isna().all()


def test_unknown_label_cell_and_absolute_path_are_errors():
    with pytest.raises(MetadataError, match="unknown value"):
        harmonize(labels=f"AccessionNumber_anon,{LAB}\n9001,yes" + "," * (len(LABELS) - 1) + "\n")
    with pytest.raises(MetadataError, match="ImagePath"):
        harmonize(meta=META.replace("101/9001/1.2.3.png", "/abs/1.2.3.png"))


def test_fake_release_reads_with_the_warning(tmp_path):
    base = write_emory_cxr(tmp_path, images=False)
    with pytest.warns(UnverifiedFormatWarning, match="metadata.csv"):
        df = EmoryCXRHarmonizer(base_image_dir=base).harmonize()
    assert len(df) == 12 and df["patient_id"].nunique() == 4
    assert df["report"].isna().sum() == 2  # one accession without a report row, 2 images
    assert df.groupby("study_id")["No Finding"].nunique(dropna=False).max() == 1
