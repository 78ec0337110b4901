"""Stony Brook RALO: the two-line header, the readers' repeated columns, the mean scores as
``reg``, images named by row."""

from __future__ import annotations

import io

import pandas as pd
import pytest
import torch

from radharmony.datasets.ralo import SPEC, RALODataset, RALOHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.ralo import write_ralo
from radharmony.table.schema import validate

HEADER = (",,Reader 1,,Reader 2,\n"
          "Subject_ID,Exam_DateTime,Total GEOGRAPHIC,Total OPACITY,Total GEOGRAPHIC,"
          "Total OPACITY\n")


def harmonize(body: str) -> pd.DataFrame:
    raw = pd.read_csv(io.StringIO(HEADER + body), skiprows=1, dtype=str, keep_default_na=False)
    return validate(RALOHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_scores_are_the_readers_mean_and_images_follow_the_rows():
    df = harmonize("7,20200402_1030,4,3,5,2\n7,20200403_0900,8,8,8,7\n9,20200410_2200,0,,1,1\n")
    assert df["lung_extent_score"].tolist() == [4.5, 8.0, 0.5]
    assert df["lung_opacity_score"].tolist()[:2] == [2.5, 7.5]
    assert pd.isna(df["lung_opacity_score"].iloc[2])  # reader 1 left it blank: unknown
    assert df["lung_opacity_score_reader2"].tolist() == [2.0, 7.0, 1.0]
    assert df["image_path"].tolist() == ["CXR_images_scored/0.jpg", "CXR_images_scored/1.jpg",
                                         "CXR_images_scored/2.jpg"]
    assert df["patient_id"].tolist() == ["7", "7", "9"]
    assert df["study_id"].tolist()[0] == "7_20200402_1030"
    assert df["study_date"].tolist()[2] == "20200410"


@pytest.mark.parametrize("body, match", [("7,20200402_1030,9,3,5,2\n", "not a score 0-8"),
                                         ("7,yesterday,4,3,5,2\n", "Exam_DateTime")])
def test_bad_cells_name_the_row(body, match):
    with pytest.raises(MetadataError, match=match):
        harmonize(body)


def test_the_replica_reads_and_warns_of_the_unread_columns(tmp_path):
    root = write_ralo(tmp_path)
    with pytest.warns(UserWarning, match="ralo-dataset-metadata.csv.*unread.*'Age'"):
        ds = RALODataset(root, output_reg=True, cache_dir=None, dtype=torch.float32)
    assert len(ds) == 5 and (ds.harmonized_df["view"] == "AP").all()
    s = ds[0]
    assert s["reg"].tolist() == [4.5, 3.0] and s["reg_mask"].tolist() == [1.0, 1.0]
    assert ds[4]["reg_mask"].tolist() == [1.0, 0.0]
