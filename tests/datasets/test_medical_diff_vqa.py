"""Medical-Diff-VQA: main/reference pairs, difference questions with the prior's images."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from radharmony.datasets.medical_diff_vqa import (MedicalDiffVQADataset,
                                                  MedicalDiffVQAHarmonizer)
from radharmony.errors import MetadataError
from radharmony.fake.medical_diff_vqa import write_medical_diff_vqa


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_medical_diff_vqa(tmp_path_factory.mktemp("diff"))


def test_difference_questions_carry_the_prior_study(root):
    ds = MedicalDiffVQADataset(root, cache_dir=None, dtype=torch.float32)
    df = ds.harmonized_df
    pairs = pd.read_csv(root / "mimic_pair_questions.csv", dtype=str)
    assert len(df) == len(pairs) and df["question_id"].tolist() == [str(i) for i in
                                                                   range(len(pairs))]
    diff = df["task"] == "difference"
    assert diff.sum() == 2 * df["study_id"].nunique()
    assert df.loc[diff, "ref_image_paths"].map(len).eq(1).all()
    assert df.loc[~diff, "ref_image_paths"].isna().all()
    assert (df["ref_study_id"] != df["study_id"]).all()
    i = int(diff.to_numpy().nonzero()[0][0])
    s = ds[i]
    assert s["ref_study_id"] == pairs["ref_id"][i] and s["ref_img"].shape == (1, 1, 224, 224)
    assert "ref_img" not in ds[0] and ds[0]["ref_study_id"] == pairs["ref_id"][0]
    assert set(df["answer_format"]) == {"open", "closed"}
    assert df.loc[df["answer"] == "yes", "answer_format"].eq("closed").all()
    assert set(df["split"].dropna()) <= {"train", "valid", "test"}
    assert (df["image_paths"].str[0].str.startswith("files/p")).all()


def test_reference_of_another_patient_refused(root, tmp_path):
    pairs = pd.read_csv(root / "mimic_pair_questions.csv", dtype=str)
    subjects = pairs["subject_id"].unique()
    other = pairs.loc[pairs["subject_id"] == subjects[1], "study_id"].iloc[0]
    pairs.loc[3, "ref_id"] = other
    bad = tmp_path / "mimic_pair_questions.csv"
    pairs.to_csv(bad, index=False)
    (tmp_path / "mimic_all.csv").write_bytes((root / "mimic_all.csv").read_bytes())
    with pytest.raises(MetadataError, match=rf"row 3: the reference study '{other}' belongs "
                                            rf"to patient '{subjects[1]}'"):
        MedicalDiffVQAHarmonizer(csv_path=bad).harmonize()
