"""ReXVQA: questions over ReXGradient's studies, one row per question, ReXGradient's splits."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from radharmony.datasets.rexgradient import (ReXGradientTestHarmonizer,
                                             ReXGradientTrainHarmonizer)
from radharmony.datasets.rexvqa import (ReXVQATestDataset, ReXVQATestHarmonizer,
                                        ReXVQATrainHarmonizer)
from radharmony.errors import MetadataError, RowsDroppedWarning, SchemaError
from radharmony.fake.rexvqa import write_rexvqa
from radharmony.vqa import collate_vqa


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("rexvqa")
    write_rexvqa(root, studies={"train": 12, "valid": 4, "test": 6}, seed=2, per_study=3.0)
    return root


def question(**over):
    q = {"question": "Is there a pleural effusion?", "options": ["A. Yes", "B. No",
                                                             "C. Unclear", "D. Bilateral"],
         "correct_answer": "B", "correct_answer_explanation": "No effusion is described.",
         "task_name": "Presence Assessment", "category": "Lung and Pleural Opacity",
         "subcategory": "Pleural Effusion", "class": "normal", "study_id": "pP1_aA1_sS1",
         "StudyInstanceUid": "S1", "PatientID": "P1", "AccessionNumber": "A1",
         "ImagePath": ["../deid_png/P1/A1/studies/S1/series/E/instances/I1.png",
                       "../deid_png/P1/A1/studies/S1/series/E/instances/I2.png"],
         "ImageViewPosition": ["LATERAL", "PA"], "ImageModality": ["DX", "DX"],
         "PatientSex": "F", "PatientAge": "061Y", "StudyDate": 20200101,
         "Manufacturer": "['GE']", "Indication": "Cough", "Comparison": "None.",
         "Findings": "Clear lungs.", "Impression": float("nan")}
    q.update(over)
    return q


def harmonize(tmp_path, text: str):
    p = tmp_path / "test_vqa_data.json"
    p.write_text(text)
    return ReXVQATestHarmonizer(csv_path=p).harmonize()


def test_one_row_per_question_with_its_images_and_key_image(tmp_path):
    other = [p.replace("S1", "S2") for p in question()["ImagePath"]]
    df = harmonize(tmp_path, json.dumps({"q1": question(), "q2": question(
        correct_answer="A", StudyInstanceUid="S2", ImagePath=other,
        ImageViewPosition=["LATERAL", ""])}))
    assert df["question_id"].tolist() == ["q1", "q2"]
    r = df.iloc[0]
    assert r.image_paths == ["P1/A1/studies/S1/series/E/instances/I1.png",
                             "P1/A1/studies/S1/series/E/instances/I2.png"]
    assert r.image_path == r.image_paths[1] and r.view_position == "PA"  # PA is the key image
    assert (r.answer, r.answer_letter, r.answer_format) == ("No", "B", "mcq")
    assert r.options == ["A. Yes", "B. No", "C. Unclear", "D. Bilateral"]
    assert (r.task, r.category, r.subcategory) == ("Presence Assessment",
                                                   "Lung and Pleural Opacity",
                                                   "Pleural Effusion")
    assert r.report == "INDICATION:\nCough\n\nFINDINGS:\nClear lungs."  # NaN impression gone
    assert df.iloc[1].view_positions == ["LATERAL", None] and df.iloc[1].answer == "Yes"
    assert df.iloc[1].image_path == df.iloc[1].image_paths[0]  # no frontal: the first


def test_a_studys_fields_are_read_once_from_its_first_question(tmp_path):
    df = harmonize(tmp_path, json.dumps({"q1": question(), "q2": question(
        correct_answer="A", Findings="Other text.")}))
    assert df["report"].nunique() == 1 and df["image_paths"].iloc[0] is \
        df["image_paths"].iloc[1]  # shared, not copied


def test_repeated_question_id_refused_naming_it(tmp_path):
    body = json.dumps(question())
    with pytest.raises(MetadataError, match="'q7'"):
        harmonize(tmp_path, '{"q7": %s, "q8": %s, "q7": %s}' % (body, body, body))


def test_chunked_reading_equals_whole_and_finds_repeats_across_chunks(tmp_path, monkeypatch):
    from radharmony.table import read_json

    questions = {f"q{i}": question(correct_answer="ABCD"[i % 4]) for i in range(40)}
    questions["q3"]["Impression"] = float("nan")
    text = json.dumps(questions, indent=2)  # the files' form: NaN bare
    whole = harmonize(tmp_path, text)
    monkeypatch.setattr(read_json, "CHUNK_BYTES", 3000)  # about two questions a chunk
    parts = list(read_json.iter_json_entries(tmp_path / "test_vqa_data.json",
                                             entry_fields=("question",)))
    assert len(parts) > 10 and sum(map(len, parts)) == 40
    assert [k for p in parts for k in p] == list(questions)
    chunked = harmonize(tmp_path, text)
    import pandas as pd
    pd.testing.assert_frame_equal(chunked, whole)
    repeated = text[:-2] + ',\n  "q1": ' + json.dumps(question(), indent=2).replace(
        "\n", "\n  ") + "\n}"
    with pytest.raises(MetadataError, match="'q1' twice"):
        harmonize(tmp_path, repeated)


def test_answer_letter_outside_the_options_refused(tmp_path):
    with pytest.raises(SchemaError, match=r"question 'q1'.*answer letter 'E' outside"):
        harmonize(tmp_path, json.dumps({"q1": question(correct_answer="E")}))


def test_lettered_options_in_other_forms_are_normalised(tmp_path):
    df = harmonize(tmp_path, json.dumps({"q1": question(options=["A: Yes", "B: No"]),
                                         "q2": question(options=["Yes", "No", "Maybe"])}))
    assert df["options"].tolist() == [["A. Yes", "B. No"], ["A. Yes", "B. No", "C. Maybe"]]


def test_splits_are_rexgradients(root):
    meta = root / "download" / "metadata"
    for vqa, rex in ((ReXVQATrainHarmonizer, ReXGradientTrainHarmonizer),
                     (ReXVQATestHarmonizer, ReXGradientTestHarmonizer)):
        q = vqa(base_image_dir=root / "deid_png").harmonize()
        split = vqa.split
        g = rex(csv_path=meta / f"{split}_metadata_view_position.json").harmonize()
        assert set(q["study_id"]) == set(g["study_id"])  # every study asked about
        assert {p for ps in q["image_paths"] for p in ps} == set(g["image_path"])
        assert len(q) > q["study_id"].nunique()  # several questions per study
    train = ReXVQATrainHarmonizer(base_image_dir=root / "deid_png").harmonize()
    test = ReXVQATestHarmonizer(base_image_dir=root / "deid_png").harmonize()
    assert not set(train["patient_id"]) & set(test["patient_id"])


def test_samples_stack_a_studys_images_and_collate_pads(root, tmp_path):
    ds = ReXVQATestDataset(root / "deid_png", cache_dir=tmp_path / "c", dtype=torch.float32)
    counts = [len(p) for p in ds.harmonized_df["image_paths"]]
    i, j = counts.index(max(counts)), counts.index(min(counts))
    assert max(counts) > min(counts)
    s = ds[i]
    assert s["img"].shape == (max(counts), 1, 224, 224) and s["img_mask"].all()
    assert s["views"] == list(ds.harmonized_df["view"].iloc[[i]]) or len(s["views"]) == \
        max(counts)
    assert s["image_paths"][s["key_image"]] == ds.harmonized_df["image_path"].iloc[i]
    batch = collate_vqa([ds[i], ds[j]])
    assert batch["img"].shape == (2, max(counts), 1, 224, 224)
    assert batch["img_mask"].sum(1).tolist() == [max(counts), min(counts)]
    assert batch["question_id"] == [s["question_id"], ds[j]["question_id"]]
    fixed = ReXVQATestDataset(root / "deid_png", cache_dir=None, max_images=6)
    assert fixed[j]["img"].shape[0] == 6 and fixed[j]["img_mask"].sum() == min(counts)


def test_question_with_absent_image_counted_and_named(tmp_path):
    write_rexvqa(tmp_path, studies={"test": 5}, seed=4, per_study=2.0)
    full = ReXVQATestDataset(tmp_path / "deid_png", cache_dir=None)
    df = full.harmonized_df
    gone = df["image_paths"].iloc[0][0]
    (tmp_path / "deid_png" / gone).unlink()
    hit = df[df["image_paths"].map(lambda ps: gone in ps)]["question_id"].tolist()
    with pytest.warns(RowsDroppedWarning, match=rf"{len(hit)} of {len(df)} questions.*"
                                                rf"kept.*{hit[0]}"):
        kept = ReXVQATestDataset(tmp_path / "deid_png", cache_dir=None)
    assert len(kept) == len(df)
    with pytest.raises(Exception, match=hit[0]):
        kept[0]
    with pytest.warns(RowsDroppedWarning, match="dropped"):
        dropped = ReXVQATestDataset(tmp_path / "deid_png", cache_dir=None, on_missing="drop")
    assert len(dropped) == len(df) - len(hit)
    assert not set(hit) & set(dropped.harmonized_df["question_id"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dropped[0]  # the rest read fine


def test_repeated_question_id_within_one_indented_chunk_refused(tmp_path):
    """The indented form is parsed into records: a repeated key shows as one record more
    decoded than kept (no byte scan)."""
    body = json.dumps(question(), indent=2).replace("\n", "\n  ")
    text = '{\n  "q7": %s,\n  "q7": %s,\n  "q8": %s\n}' % (body, body, body)
    with pytest.raises(MetadataError, match="repeated key 'q7'"):
        harmonize(tmp_path, text)


def test_reused_chunk_buffer_with_an_entry_longer_than_a_chunk(tmp_path, monkeypatch):
    """Chunks read into one buffer: an entry longer than a chunk, and a study whose
    questions fall in different chunks (its fields from its first question), read as whole."""
    from radharmony.table import read_json

    questions = {f"q{i}": question(correct_answer="ABCD"[i % 4]) for i in range(30)}
    questions["q5"]["correct_answer_explanation"] = "Long. " * 2000  # 12 kB > a chunk
    questions["q9"]["Findings"] = "Only in q9's copy."  # the study's first question: q0
    text = json.dumps(questions, indent=2)
    whole = harmonize(tmp_path, text)
    monkeypatch.setattr(read_json, "CHUNK_BYTES", 2500)
    chunked = harmonize(tmp_path, text)
    import pandas as pd
    pd.testing.assert_frame_equal(chunked, whole)
    assert chunked.loc[5, "explanation"] == "Long. " * 2000
    assert set(chunked["report"]) == {"INDICATION:\nCough\n\nFINDINGS:\nClear lungs."}


def test_a_question_and_its_study_name_one_patient(root):
    """ReXVQA asks about ReXGradient's patients: both declare the identity family
    ``rexgradient``, so a mixture holding out ReXGradient's test patients drops their
    questions too, and puts a patient's questions and reports on one side of its split."""
    from radharmony.mixture.context import patient_keys

    meta = root / "download" / "metadata"
    q = ReXVQATestHarmonizer(base_image_dir=root / "deid_png").harmonize()
    g = ReXGradientTestHarmonizer(csv_path=meta / "test_metadata_view_position.json").harmonize()
    asked = set(patient_keys(q, "rexvqa_test", ReXVQATestHarmonizer.spec))
    held = set(patient_keys(g, "rexgradient_test", ReXGradientTestHarmonizer.spec))
    assert asked and asked == held and all(k.startswith("rexgradient:") for k in held)
