"""VQA-RAD: the chest subset, answer types with their trailing space, the phrase-type split."""

from __future__ import annotations

import json

import pytest

from radharmony.datasets.vqa_rad import VQARADChestHarmonizer
from radharmony.errors import SchemaError
from radharmony.fake.vqa_rad import FILE, write_vqa_rad


def q(qid, **over):
    e = {"qid": qid, "phrase_type": "freeform", "qid_linked_id": "x", "image_case_url": "u",
         "image_name": "synpic1.jpg", "image_organ": "CHEST", "evaluation": "given",
         "question": "Is there an effusion?", "question_rephrase": "NULL",
         "question_relation": "NULL", "question_frame": "NULL", "question_type": "PRES",
         "answer": "Yes", "answer_type": "CLOSED "}
    e.update(over)
    return e


def harmonize(tmp_path, entries):
    (tmp_path / FILE).write_text(json.dumps(entries))
    return VQARADChestHarmonizer(csv_path=tmp_path / FILE).harmonize()


def test_hand_written_rows(tmp_path):
    df = harmonize(tmp_path, [q(0), q(1, image_organ="HEAD"),
                              q(2, answer=2, answer_type="OPEN", phrase_type="test_para"),
                              q(3, image_organ=" CHEST", image_name="synpic2.jpg")])
    assert df["question_id"].tolist() == ["0", "2", "3"]  # HEAD left out
    assert df["answer_format"].tolist() == ["closed", "open", "closed"]  # "CLOSED " read
    assert df["answer"].tolist() == ["Yes", "2", "Yes"]
    assert df["split"].tolist() == ["train", "test", "train"]
    assert df["split_raw"].tolist() == ["freeform", "test_para", "freeform"]
    assert df["patient_id"].tolist() == ["synpic1", "synpic1", "synpic2"]
    assert df["image_paths"].tolist() == [["synpic1.jpg"], ["synpic1.jpg"], ["synpic2.jpg"]]
    assert df["options"].tolist() == [[], [], []]


def test_repeated_qid_refused_naming_both(tmp_path):
    with pytest.raises(SchemaError, match="question_id '5' occurs twice, at rows 0 and 2"):
        harmonize(tmp_path, [q(5), q(6), q(5, question="again?")])


def test_fake_keeps_the_quirks(tmp_path):
    write_vqa_rad(tmp_path, images=False)
    raw = json.loads((tmp_path / FILE).read_text())
    assert {"CLOSED ", "CLOSED", "OPEN"} <= {e["answer_type"] for e in raw}
    assert {e["image_organ"] for e in raw} == {"CHEST", "HEAD", "ABD"}
    df = VQARADChestHarmonizer(csv_path=tmp_path / FILE).harmonize()
    assert len(df) == sum(e["image_organ"] == "CHEST" for e in raw)
    assert set(df["split"]) == {"train", "test"}
