"""VQA questions as LLaVA conversations, through the study exporter's to_llava."""

from __future__ import annotations

import json

from radharmony.datasets.rexvqa import ReXVQATestDataset
from radharmony.datasets.vqa_rad import VQARADChestDataset
from radharmony.export.study_formats import to_llava
from radharmony.fake.rexvqa import write_rexvqa
from radharmony.fake.vqa_rad import write_vqa_rad


def test_mcq_questions_with_options_in_the_prompt(tmp_path):
    ds = ReXVQATestDataset(write_rexvqa(tmp_path / "d", studies={"test": 4}), cache_dir=None)
    out = to_llava(ds, tmp_path / "vqa.json", progress=False)
    entries = json.loads((tmp_path / "vqa.json").read_text())
    df = ds.harmonized_df
    assert out["entries"] == len(entries) == len(df)
    assert out["images"] == len({p for ps in df["image_paths"] for p in ps})
    e, row = entries[0], df.iloc[0]
    human, gpt = (t["value"] for t in e["conversations"])
    assert human.count("<image>") == len(row.image_paths) == len(e["image"])
    assert row.question in human and all(o in human for o in row.options)
    assert human.endswith("Answer with the option's letter from the given choices directly.")
    assert gpt == row.answer_letter and e["id"] == ds.sample_ids[0]
    assert all((tmp_path / f).is_file() for f in e["image"])


def test_open_questions_and_original_images(tmp_path):
    ds = VQARADChestDataset(write_vqa_rad(tmp_path / "d"), cache_dir=None)
    to_llava(ds, tmp_path / "rad.json", images="original", progress=False)
    entries = json.loads((tmp_path / "rad.json").read_text())
    by_id = {e["question_id"]: e for e in entries}
    for row in ds.harmonized_df.itertuples():
        e = by_id[row.question_id]
        assert e["conversations"][1]["value"] == row.answer
        assert e["image"] == [str(ds.base_image_dir / row.image_paths[0])]
        assert "single word or phrase" in e["conversations"][0]["value"]
