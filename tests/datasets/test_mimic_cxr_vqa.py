"""MIMIC-CXR-VQA: three split files, answers as lists, one MIMIC image per question."""

from __future__ import annotations

import json

from radharmony.datasets.mimic_cxr_vqa import MIMICCXRVQADataset
from radharmony.fake.mimic_cxr_vqa import write_mimic_cxr_vqa


def test_split_files_answers_and_images(tmp_path):
    root = write_mimic_cxr_vqa(tmp_path)
    folder = root / "mimiccxrvqa" / "dataset"
    raw = {s: json.loads((folder / f"{s}.json").read_text()) for s in ("train", "valid",
                                                                       "test")}
    ds = MIMICCXRVQADataset(root, csv_path=folder / "train.json", cache_dir=None)
    df = ds.harmonized_df
    assert len(df) == sum(map(len, raw.values()))
    assert df["split"].value_counts().to_dict() == {s: len(v) for s, v in raw.items() if v}
    first = raw["train"][1]
    row = df[df["question_id"] == "train_1"].iloc[0]
    assert row.answer == ", ".join(first["answer"]) or row.answer is None
    assert (row.patient_id, row.study_id) == (str(first["subject_id"]), str(first["study_id"]))
    assert row.image_paths == [first["image_path"]]
    assert df.loc[df["task"] == "verify", "answer_format"].eq("closed").all()
    assert df.loc[df["task"] != "verify", "answer_format"].eq("open").all()
    assert df["answer"].isna().any()  # an empty answer list
    assert ds[0]["img"].shape == (1, 1, 224, 224)
