"""GEMeX-VQA: four question files, choices lettered "A: ...", multi-choice letter lists."""

from __future__ import annotations

import json

import pytest

from radharmony.datasets.gemex import GEMeXVQADataset, GEMeXVQAHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.gemex import write_gemex

OPEN = "open_ended_question.jsonl"


def test_four_kinds_one_table(tmp_path):
    root = write_gemex(tmp_path, images=False)
    df = GEMeXVQAHarmonizer(csv_path=root / "GEMeX-VQA" / OPEN).harmonize()
    n = len(df) // 4
    assert df["question_id"].str.split("_").str[0].value_counts().to_dict() == {
        "open": n, "closed": n, "single": n, "multi": n}
    single = df[df["question_id"].str.startswith("single")].iloc[0]
    assert single.options == ["A. Right", "B. Left", "C. Both sides", "D. Neither"]
    assert (single.answer_letter, single.answer, single.answer_format) == ("B", "Left", "mcq")
    multi = df[df["question_id"].str.startswith("multi")].iloc[0]
    assert (multi.answer_letter, multi.answer) == ("A,C", "Pleural effusion; Atelectasis")
    closed = df[df["question_id"].str.startswith("closed")].iloc[0]
    assert (closed.answer_format, closed.options, closed.answer_letter) == ("closed", [], None)
    assert df["image_paths"].str[0].str.startswith("files/p").all()
    assert (df["patient_id"] == df["image_paths"].str[0].str.split("/").str[2].str[1:]).all()
    assert df["explanation"].notna().all() and df["report"].notna().all()
    assert df["visual_locations"].iloc[0] == [[0.52, 0.55, 0.3, 0.25]]


def test_answer_not_among_choices_refused(tmp_path):
    root = write_gemex(tmp_path, images=False)
    f = root / "GEMeX-VQA" / "single_choice_question.jsonl"
    lines = f.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["answer"] = "Upper lobe"
    lines[1] = json.dumps(bad)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MetadataError, match="single_choice_question.jsonl line 2: answer "
                                            "'Upper lobe' is neither a letter nor an option"):
        GEMeXVQAHarmonizer(csv_path=root / "GEMeX-VQA" / OPEN).harmonize()


def test_report_output(tmp_path):
    root = write_gemex(tmp_path)
    ds = GEMeXVQADataset(root, root / "GEMeX-VQA" / OPEN, output_report=True,
                         cache_dir=None)
    assert ds[0]["report"].startswith("FINDINGS:")
