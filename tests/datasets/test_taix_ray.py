"""TAIX-Ray: grades 0-4 per finding and side as shipped -> presence (cls), the worse side's grade
(grade) and the side (side); the images inside the Parquet shards written out byte for byte."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from radharmony.datasets.taix_ray import (COLUMNS, GRADED, SPEC, TAIXRayDataset,
                                          TAIXRayHarmonizer, TAIXRayOriginalDataset,
                                          extract_images, shards)
from radharmony.errors import MetadataError
from radharmony.fake.taix_ray import write_taix_ray
from radharmony.table.schema import validate
from radharmony.vocabulary import derive_findings

NAN = float("nan")


def rows(*grades, split="train") -> dict:
    """A raw table of one row per tuple of the eight grades (the card's order)."""
    n = len(grades)
    t = pd.DataFrame({"UID": [f"u{i}" for i in range(n)], "Fold": 0, "Split": split,
                      "PatientID": [f"p{i // 2}" for i in range(n)], "PhysicianID": "d",
                      "StudyDate": "2013-05-25", "Age": 26_647, "Sex": "M"})
    for j, c in enumerate(GRADED):
        t[c] = [g[j] for g in grades]
    return {"table": t[list(COLUMNS)], "images": None, "prefix": "images/data"}


def harmonize(raw) -> pd.DataFrame:
    return validate(TAIXRayHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_grades_sides_and_presence_by_hand():
    df = harmonize(rows((2, 1, 3, 0, 0, 0, 2, 2),      # right effusion, atelectasis both
                        (0, 0, 0, 1, 0, 3, 0, 0),      # left effusion questionable
                        (1, 0, 1, 2, 0, 0, 0, 0)))     # questionable right, mild left
    assert df["HeartSize"].tolist() == [1.0, 0.0, -1.0]  # mild / none / questionable
    assert df["PulmonaryCongestion"].tolist() == [-1.0, 0.0, 0.0]
    assert df["PleuralEffusion"].tolist() == [1.0, -1.0, 1.0]
    assert df["pleural_effusion_grade"].tolist() == [3.0, 1.0, 2.0]  # the worse side
    assert df["pleural_effusion_side"].tolist() == ["right", "left", "left"]
    assert df["atelectasis_side"].tolist() == ["both", None, None]
    assert df["lung_opacity_side"].tolist() == [None, "left", None]
    assert df["cardiomegaly_grade"].tolist() == [2.0, 0.0, 1.0]
    assert df["grades_raw"].iloc[1]["PleuralEffusion_Left"] == 1
    assert df["age_days"].tolist() == [26_647] * 3
    assert df["patient_age_years"].iloc[0] == pytest.approx(72.96)
    assert df["image_path"].tolist() == ["images/data/train/u0.png", "images/data/train/u1.png",
                                         "images/data/train/u2.png"]


def test_canonical_findings_through_the_vocabulary():
    df = harmonize(rows((2, 0, 3, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0, 0, 0)))
    d = derive_findings(df, SPEC, findings=["cardiomegaly", "pleural_effusion",
                                            "pulmonary_congestion", "atelectasis",
                                            "enlarged_cardiomediastinum", "lung_opacity"])
    assert d["pleural_effusion"].tolist() == [1.0, 0.0]
    assert d["cardiomegaly"].tolist() == [1.0, 0.0]
    assert d["enlarged_cardiomediastinum"].tolist()[0] == 1.0  # cardiomegaly implies it
    assert d["lung_opacity"].tolist() == [0.0, 0.0]  # the template's own opacity item
    assert d["atelectasis"].tolist() == [0.0, 0.0]


def test_an_unknown_grade_stays_unknown_and_a_bad_one_names_the_row():
    df = harmonize(rows((NAN, 0, 2, NAN, 0, 0, 0, 0)))
    assert pd.isna(df["HeartSize"].iloc[0]) and pd.isna(df["cardiomegaly_grade"].iloc[0])
    assert pd.isna(df["pleural_effusion_grade"].iloc[0])  # one side unknown: the worse unknown
    assert df["pleural_effusion_side"].iloc[0] is None
    with pytest.raises(MetadataError, match="HeartSize is not a grade 0-4"):
        harmonize(rows((5, 0, 0, 0, 0, 0, 0, 0)))
    with pytest.raises(MetadataError, match="Split is not"):
        harmonize(rows((0,) * 8, split="validation"))


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    return write_taix_ray(tmp_path_factory.mktemp("taix"))


def test_the_replica_reads_in_both_configurations(fake, tmp_path):
    assert [p.name for p in shards(fake, "data")] == ["test-00000-of-00001.parquet",
                                                      "train-00000-of-00001.parquet",
                                                      "val-00000-of-00001.parquet"]
    assert extract_images(fake, progress=False) == 0  # the maker extracted them already
    small = TAIXRayDataset(fake, output_grade=True, output_side=True, output_cls=True,
                           cache_dir=None, dtype=torch.float32)
    big = TAIXRayOriginalDataset(fake, cache_dir=None)
    assert len(small) == len(big) == 6
    assert small.harmonized_df["split"].value_counts().to_dict() == {"train": 3, "test": 2,
                                                                      "valid": 1}
    assert (small.harmonized_df["patient_id"] == big.harmonized_df["patient_id"]).all()
    assert big.harmonized_df["image_path"].str.startswith("images/original/").all()
    s = small[0]
    assert s["grade"].shape == (5,) and s["side"].shape == (3, 2)
    assert s["side_mask"].tolist() == [1.0, 0.0, 1.0]  # test row: severe left effusion, right
    assert s["side"].tolist() == [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]  # atelectasis


def test_without_extracted_images_the_table_still_reads(tmp_path):
    root = write_taix_ray(tmp_path, extract=False)
    df = TAIXRayHarmonizer(base_image_dir=root).harmonize()
    assert len(df) == 6 and df["image_path"].str.endswith(".png").all()
