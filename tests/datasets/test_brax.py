"""BRAX: CheXpert-style cells, both spreadsheet names, thin strips dropped, ages."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.brax import LABEL_MAP, SPEC, BRAXDataset, BRAXHarmonizer
from radharmony.datasets.chexpert import LABELS
from radharmony.errors import MetadataError, RowsDroppedWarning
from radharmony.fake.brax import write_brax
from radharmony.table.schema import validate

LAB = ",".join(LABELS)
ROWS = f"""PngPath,PatientID,AccessionNumber,ViewPosition,PatientSex,PatientAge,Rows,Columns,{LAB}
images/id_a/Study_1/Series_1/image-1.png,a,77,PA,M,85 or more,3000,2500,,1.0,-1.0,,,,,,,,0.0,,,1.0
images/id_a/Study_1/Series_1/image-2.png,a,77,,M,85 or more,2500,3000,1.0,,,,,,,,,,,,,
images/id_b/Study_2/Series_3/image-3.png,b,,AP,F,45 - 49,40,1200,,,,,,,,,,,,,,
"""


def harmonize(text=ROWS):
    raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_values=[""])
    return validate(BRAXHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_cells_keep_uncertain_and_missing_apart_and_strips_drop():
    with pytest.warns(RowsDroppedWarning, match="1 thin strips"):
        df = harmonize()
    assert len(df) == 2
    first = df.iloc[0]
    assert first["Enlarged Cardiomediastinum"] == 1 and first["Cardiomegaly"] == -1
    assert np.isnan(first["No Finding"]) and first["Pleural Effusion"] == 0
    assert first["Support Devices"] == 1
    assert df.iloc[1]["No Finding"] == 1
    assert first["patient_age"] == 85 and first["patient_age_group"] == "85 or more"
    assert df["view_position"].tolist() == ["PA", None]
    assert df["study_id"].tolist() == ["77", "77"] and df["patient_id"].tolist() == ["a", "a"]


def test_study_falls_back_to_the_study_folder():
    text = ROWS.replace(",a,77,", ",a,,")
    with pytest.warns(RowsDroppedWarning):
        df = harmonize(text)
    assert df["study_id"].tolist() == ["Study_1", "Study_1"]


def test_unknown_cell_is_an_error():
    with pytest.warns(RowsDroppedWarning), pytest.raises(MetadataError, match="unknown value"):
        harmonize(ROWS.replace("-1.0", "maybe"))


def test_label_map_covers_every_label():
    assert list(LABEL_MAP) == list(LABELS)
    from radharmony.vocabulary import mapping  # the hierarchy bounds Lung Lesion's children
    m = mapping()
    rows = m[(m["dataset"] == "brax") & (m["source_label"] == "Lung Lesion")]
    assert ("nodule", "broader") in set(zip(rows["finding"], rows["relation"]))


@pytest.mark.parametrize("name", ["master_spreadsheet_update.csv", "master_spreadsheet.csv"])
def test_either_spreadsheet_name_is_found(tmp_path, name):
    root = write_brax(tmp_path, name=name)
    with pytest.warns(RowsDroppedWarning):
        ds = BRAXDataset(root, output_cls=True, uncertain="zeros", cache_dir=None,
                         dtype=torch.float32)
    assert len(ds) == 12 and ds.harmonized_df["patient_id"].nunique() == 4
    assert (ds[0]["cls"] >= 0).all()
