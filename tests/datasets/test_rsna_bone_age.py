"""RSNA Pediatric Bone Age: three tables naming things differently, the bone age as ``reg``,
the sex as the covariate, the test split's unknown targets masked."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import radharmony
from radharmony.datasets.rsna_bone_age import SPEC, RSNABoneAgeDataset, RSNABoneAgeHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.rsna_bone_age import write_rsna_bone_age
from radharmony.table.schema import validate

NAN = float("nan")


def harmonize(train: str, valid: str | None = None, test: str | None = None,
              files=None) -> pd.DataFrame:
    tables = {"train": train, "valid": valid, "test": test}
    raw = {"tables": {k: pd.read_csv(pd.io.common.StringIO(v), dtype=str, keep_default_na=False)
                      for k, v in tables.items() if v is not None}, "files": files}
    return validate(RSNABoneAgeHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_three_headers_one_table():
    df = harmonize("id,boneage,male\n1377,180,False\n1378,12,True\n",
                   valid="Image ID,male,Bone Age (months)\n1386,TRUE,96\n",
                   test="Case ID,Sex\n4360,M\n4361,F\n")
    assert df["study_id"].tolist() == ["1377", "1378", "1386", "4360", "4361"]
    assert df["patient_id"].tolist() == df["study_id"].tolist()  # one radiograph per child
    assert df["bone_age_months"].tolist()[:3] == [180.0, 12.0, 96.0]
    assert df["bone_age_months"].isna().tolist() == [False, False, False, True, True]
    assert df["patient_sex"].tolist() == ["F", "M", "M", "M", "F"]
    assert df["split"].tolist() == ["train", "train", "valid", "test", "test"]
    assert df["image_path"].tolist() == ["1377.png", "1378.png", "1386.png", "4360.png",
                                         "4361.png"]


def test_each_id_finds_its_split_folder_first():
    files = ["boneage-test-dataset/boneage-test-dataset/5.png",
             "boneage-training-dataset/boneage-training-dataset/5.png",
             "boneage-training-dataset/boneage-training-dataset/6.png"]
    df = harmonize("id,boneage,male\n5,10,True\n6,11,True\n", test="Case ID,Sex\n7,M\n",
                   files=files)
    assert df["image_path"].tolist() == [files[1], files[2], "7.png"]


@pytest.mark.parametrize("text, match", [
    ("id,boneage,male\nx,10,True\n", "id is not a whole number"),
    ("id,boneage,male\n1,ten,True\n", "boneage is not a number"),
    ("id,boneage,male\n1,10,yes\n", "male is not a sex"),
    ("id,age,male\n1,10,True\n", "boneage"),
])
def test_bad_cells_name_the_row(text, match):
    with pytest.raises(MetadataError, match=match):
        harmonize(text)


def test_a_blank_bone_age_is_unknown_not_zero():
    df = harmonize("id,boneage,male\n1,,True\n")
    assert df["bone_age_months"].isna().all()


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    return write_rsna_bone_age(tmp_path_factory.mktemp("rba"))


def test_the_replica_reads_with_reg_and_the_covariate(fake, tmp_path):
    ds = RSNABoneAgeDataset(fake, output_reg=True, cache_dir=tmp_path, dtype=torch.float32)
    df = ds.harmonized_df
    assert df["split"].value_counts().to_dict() == {"train": 5, "valid": 2, "test": 2}
    s = ds[0]
    assert s["reg"].tolist() == [df["bone_age_months"].iat[0]]
    assert s["reg_mask"].tolist() == [1.0] and s["male"].tolist() == [1.0]  # True -> M
    last = ds[len(ds) - 1]  # a test image: no ground truth in the Kaggle mirror
    assert last["reg"].tolist() == [0.0] and last["reg_mask"].tolist() == [0.0]
    assert last["male"].tolist() == [0.0]  # "F"
    batch = radharmony.collate(ds.__getitems__([0, len(ds) - 1]))
    assert batch["reg"].shape == (2, 1) and batch["male"].tolist() == [[1.0], [0.0]]
    plain = RSNABoneAgeDataset(fake, cache_dir=None)
    assert "reg" not in plain[0] and "male" not in plain[0]
