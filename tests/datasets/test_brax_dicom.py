"""BRAX as DICOM: DicomPath (or its mirror of PngPath) as image_path, brax's native ids,
labels and strips unchanged, DICOM pixels read as the PNG shows them (MONOCHROME1 too)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.brax import BRAXDataset
from radharmony.datasets.brax_dicom import SPEC, BRAXDicomDataset, BRAXDicomHarmonizer
from radharmony.datasets.chexpert import LABELS
from radharmony.errors import MetadataError, RowsDroppedWarning
from radharmony.fake.brax import write_brax
from radharmony.table.schema import sample_ids, validate

LAB = ",".join(LABELS)
ROWS = f"""DicomPath,PngPath,PatientID,AccessionNumber,ViewPosition,PatientSex,PatientAge,Rows,Columns,{LAB}
Anonymized_DICOMs/id_a/Study_1/Series_1/image-1.dcm,images/id_a/Study_1/Series_1/image-1.png,a,77,PA,M,85 or more,3000,2500,,1.0,-1.0,,,,,,,,0.0,,,1.0
,images/id_a/Study_1/Series_1/image-2.png,a,77,,M,85 or more,2500,3000,1.0,,,,,,,,,,,,,
"""


def harmonize(text=ROWS):
    raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_values=[""])
    return validate(BRAXDicomHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_dicom_path_or_its_mirror_and_the_png_native_id():
    df = harmonize()
    assert df["image_path"].tolist() == ["Anonymized_DICOMs/id_a/Study_1/Series_1/image-1.dcm",
                                         "Anonymized_DICOMs/id_a/Study_1/Series_1/image-2.dcm"]
    assert df["image_id"].tolist() == ["images/id_a/Study_1/Series_1/image-1",
                                       "images/id_a/Study_1/Series_1/image-2"]
    assert list(sample_ids(df, SPEC)) == ["brax_dicom:images/id_a/Study_1/Series_1/image-1",
                                          "brax_dicom:images/id_a/Study_1/Series_1/image-2"]
    assert df.loc[0, "Cardiomegaly"] == -1 and df.loc[1, "No Finding"] == 1
    assert df["patient_age"].tolist() == [85, 85]


def test_a_dicom_path_that_is_not_dcm_is_an_error():
    with pytest.raises(MetadataError, match="DicomPath"):
        harmonize(ROWS.replace("image-1.dcm", "image-1.png"))


def test_same_native_ids_and_pixels_as_the_png_key(tmp_path):
    root = write_brax(tmp_path, dicom=True)
    kw = dict(cache_dir=None, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowsDroppedWarning)
        dcm, png = BRAXDicomDataset(root, **kw), BRAXDataset(root, **kw)
    assert [s.split(":", 1)[1] for s in dcm.harmonized_df["sample_id"]] == \
        [s.split(":", 1)[1] for s in png.harmonized_df["sample_id"]]
    assert (dcm.harmonized_df["patient_id"] == png.harmonized_df["patient_id"]).all()
    for i in range(3):  # row 2 is written MONOCHROME1, rows 0-1 MONOCHROME2
        assert float((dcm[i]["img"] - png[i]["img"]).abs().mean()) < 0.02
