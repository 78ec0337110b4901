"""The viewer's question pages: a question with its images, options and correct letter."""

from __future__ import annotations

import json

import pytest

from radharmony.datasets.medical_diff_vqa import MedicalDiffVQADataset
from radharmony.datasets.rexvqa import ReXVQATestDataset
from radharmony.fake.medical_diff_vqa import write_medical_diff_vqa
from radharmony.fake.rexvqa import write_rexvqa
from radharmony.viewer.app import NotFound, ViewerApp
from radharmony.viewer.questions import question_json, route


def test_question_json_and_images(tmp_path):
    ds = ReXVQATestDataset(write_rexvqa(tmp_path / "d", studies={"test": 4}), cache_dir=None)
    app = ViewerApp([ds])
    body, kind = route(app, "/api/question", {"index": "1"})
    s = json.loads(body)
    row = ds.harmonized_df.iloc[1]
    assert kind == "application/json" and s["total"] == len(ds)
    assert (s["question"], s["options"], s["answer_letter"], s["explanation"]) == \
        (row.question, row.options, row.answer_letter, row.explanation)
    assert len(s["views"]) == len(row.image_paths) and s["n_ref_images"] == 0
    png, kind = route(app, "/question.png", {"index": "1", "j": str(len(s["views"]) - 1)})
    assert kind == "image/png" and png[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(NotFound):
        route(app, "/question.png", {"index": "1", "ref": "1"})
    assert route(app, "/api/other", {}) is None


def test_difference_question_shows_its_reference(tmp_path):
    ds = MedicalDiffVQADataset(write_medical_diff_vqa(tmp_path / "m"), cache_dir=None)
    i = int((ds.harmonized_df["task"] == "difference").to_numpy().nonzero()[0][0])
    app = ViewerApp([ds])
    s = question_json(app, None, i)
    assert s["n_ref_images"] == 1 and s["ref_study_id"] == ds.harmonized_df["ref_study_id"][i]
    png, _ = route(app, "/question.png", {"index": str(i), "ref": "1"})
    assert png[:4] == b"\x89PNG"
