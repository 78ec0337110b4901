"""`radharmony info` on a VQA split: questions per task and category, answers per letter."""

from __future__ import annotations

import json

from radharmony import cli
from radharmony.fake.rexvqa import write_rexvqa


def test_info_counts_questions_tasks_and_letters(tmp_path, capsys):
    root = write_rexvqa(tmp_path, studies={"test": 12}, images=False)
    questions = json.loads((tmp_path / "metadata" / "test_vqa_data.json").read_text())
    assert cli.main(["info", "rexvqa_test", "--root", str(root), "--json", "-q"]) == 0
    (r,) = json.loads(capsys.readouterr().out)
    q = r["questions"]
    assert q["questions"] == len(questions)
    assert q["images"] == r["images"] == len({p for e in questions.values()
                                              for p in e["ImagePath"]})
    letters = {}
    for e in questions.values():
        letters[e["correct_answer"]] = letters.get(e["correct_answer"], 0) + 1
    assert q["answer_letters"] == dict(sorted(letters.items()))
    assert sum(q["tasks"].values()) == len(questions) and len(q["tasks"]) == 5
    assert q["answer_formats"] == {"mcq": len(questions)}
    assert cli.main(["info", "rexvqa_test", "--root", str(root), "-q"]) == 0
    text = capsys.readouterr().out
    assert "correct letter (mcq): A " in text and "Presence Assessment" in text


def test_export_study_formats_take_a_vqa_key(tmp_path, capsys):
    root = write_rexvqa(tmp_path / "d", studies={"test": 3})
    n = len(json.loads((tmp_path / "d" / "metadata" / "test_vqa_data.json").read_text()))
    for fmt in ("parquet", "webdataset", "llava"):
        out = tmp_path / fmt
        assert cli.main(["export", "rexvqa_test", "--root", str(root), "--level", "study",
                         "--format", fmt, "-o", str(out), "--json", "-q",
                         "--cache-dir", str(tmp_path / "cache")]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["questions"] == n and summary["format"] == fmt
    manifest = json.loads((tmp_path / "parquet" / "manifest.json").read_text())
    assert manifest["num_studies"] == n and manifest["fingerprint"]["level"] == "question"
