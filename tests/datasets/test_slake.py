"""SLAKE: English X-ray questions of the three split files, the Chinese rows left out."""

from __future__ import annotations

import json

from radharmony.datasets.slake import SLAKEChestDataset
from radharmony.fake.slake import write_slake


def test_english_xray_questions_of_all_splits(tmp_path):
    imgs = write_slake(tmp_path)
    raw = {n: json.loads((tmp_path / n).read_text()) for n in
           ("train.json", "validation.json", "test.json")}
    ds = SLAKEChestDataset(imgs, cache_dir=None)
    df = ds.harmonized_df
    want = [e for n in raw for e in raw[n] if e["q_lang"] == "en" and e["modality"] == "X-Ray"]
    assert df["question_id"].tolist() == [str(e["qid"]) for e in want]
    assert any(e["q_lang"] == "zh" for e in raw["train.json"])  # bilingual rows in the fake
    assert df["question"].str.isascii().all()
    assert df["split"].value_counts().to_dict() == {"train": 11, "valid": 5, "test": 5}
    assert set(df["split_raw"]) == {"train", "validation", "test"}
    assert set(df["answer_format"]) == {"open", "closed"}
    assert ds[0]["img"].shape == (1, 1, 224, 224) and ds[0]["category"] == "Lung"
