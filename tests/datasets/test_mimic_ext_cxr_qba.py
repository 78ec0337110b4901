"""MIMIC-Ext-CXR-QBA: Parquet exports + qa.zip, read in record batches of the needed columns."""

from __future__ import annotations

import json
import zipfile

import pandas as pd
import pyarrow.parquet as pq
import pytest

from radharmony.datasets.mimic_ext_cxr_qba import (MIMICExtCXRQBADataset,
                                                   MIMICExtCXRQBAHarmonizer)
from radharmony.errors import MetadataError, MetadataNotFoundError, RowsDroppedWarning
from radharmony.fake.mimic_ext_cxr_qba import QUESTIONS, SUBSET, write_mimic_ext_cxr_qba

P, S1, S2 = "p10000032", "s50414267", "s53189527"
A1 = "02aa804e-bde0afdd-112c0b34-7bc16630-4e384014"
A2 = "2a2277a9-b0ded155-c0de8eb9-c124d10e-82c5caab"
L1 = "174413ec-4ec4c1f7-34ea26b7-c5f994f8-79ef1962"


def _answer(kind, text, subs=()):
    return {"answer_id": 1, "answer_type": kind, "answer_level": 0, "text": text,
            "localization": {A1: {"image_id": A1, "bboxes": [[1.0, 2.0, 3.0, 4.0]]}},
            "sub_answers": list(subs)}


def _export(tmp_path, *, prefix="", split=None, orphan=False):
    """A two-study export written by hand: study 1 has two frontal images, study 2 one."""
    meta = tmp_path / "exports" / "A_frontal" / "metadata" / "q1M"
    meta.mkdir(parents=True)
    q = pd.DataFrame({
        "question.question_type": ["B03_is_abnormal", "B01_describe_all",
                                   "D03_where_is_finding", "B03_is_abnormal"],
        "question.question_strategy": ["abnormal", "abnormal", "finding", "finding"],
        "question.quality.rating": [6, 5, 5, 4],
        "patient_id": [P] * 4, "study_id": [S1, S1, S1, S2],
        "question_id": ["B03_is_abnormal_001", "B01_describe_all_001",
                        "D03_where_is_finding_001", "B03_is_abnormal_001"]})
    if split:
        q["question.split"] = split
    q.set_index(["patient_id", "study_id", "question_id"]).to_parquet(
        meta / "question_metadata.parquet")
    qi = [(S1, "B03_is_abnormal_001", A2), (S1, "B03_is_abnormal_001", A1),
          (S1, "B01_describe_all_001", A2), (S1, "B01_describe_all_001", A1),
          (S1, "D03_where_is_finding_001", A1), (S2, "B03_is_abnormal_001", L1)]
    if orphan:
        qi = qi[:-1]
    pd.DataFrame([{"patient_id": P, "study_id": s, "question_id": x, "image_id": i,
                   "question_img.has_bboxes": True} for s, x, i in qi]).set_index(
        ["patient_id", "study_id", "question_id", "image_id"]).to_parquet(
        meta / "question_image_metadata.parquet")
    pd.DataFrame({"patient_id": [P] * 3, "study_id": [S1, S1, S2], "image_id": [A1, A2, L1],
                  "img.view_position": ["PA", "AP", "AP"]}).set_index(  # any level prefix
        ["patient_id", "study_id", "image_id"]).to_parquet(meta / "image_metadata.parquet")
    studies = {S1: [("B03_is_abnormal_001", "Is the study abnormal?",
                     [_answer("main_answer", "Yes, the study is abnormal.",
                              [_answer("details", "There is a small effusion.")]),
                      _answer("related_information", "The heart is normal.")]),
                    ("B01_describe_all_001", "Describe the given study.",
                     [_answer("main_answer", "Small effusion."),
                      _answer("main_answer", "Mild atelectasis.")]),
                    ("D03_where_is_finding_001", "Where is the effusion?",
                     [_answer("details", "Left base.")])],
               S2: [("B99_not_in_the_metadata_001", "Unused?", [])]}
    with zipfile.ZipFile(meta.parent.parent / "qa.zip", "w") as z:
        for study, qs in studies.items():
            z.writestr(f"{prefix}p10/{P}/{study}.qa.json", json.dumps({
                "patient_id": P, "study_id": study, "questions": [
                    {"question_id": x, "question_type": x.rsplit("_", 1)[0], "question": t,
                     "answers": a, "question_quality": {}} for x, t, a in qs]}))
    return meta / "question_metadata.parquet"


def test_hand_written_rows(tmp_path):
    with pytest.warns(RowsDroppedWarning, match=r"1 of 4 questions have no text in qa.zip .*"
                                                r"s53189527_B03_is_abnormal_001"):
        df = MIMICExtCXRQBAHarmonizer(csv_path=_export(tmp_path)).harmonize()
    assert df["question_id"].tolist() == ["s50414267_B03_is_abnormal_001",
                                          "s50414267_B01_describe_all_001",
                                          "s50414267_D03_where_is_finding_001",
                                          "s53189527_B03_is_abnormal_001"]
    assert set(df["patient_id"]) == {"10000032"} and df["study_id"].iloc[3] == "53189527"
    assert df["question"].tolist()[:3] == ["Is the study abnormal?", "Describe the given study.",
                                           "Where is the effusion?"]
    # main answers only (details and related information left out); none marked: all
    assert df["answer"].tolist() == ["Yes, the study is abnormal.",
                                     "Small effusion. Mild atelectasis.", "Left base.", None]
    assert df["question"].iloc[3] is None
    assert df["answer_format"].tolist() == ["closed", "open", "open", "closed"]
    assert df["task"].tolist() == ["abnormal", "abnormal", "finding", "finding"]
    assert df["category"].iloc[2] == "D03_where_is_finding"  # the identifier, as shipped
    assert df["quality"].tolist()[:2] == ["6", "5"]
    first = f"files/p10/{P}/{S1}/"
    assert df["image_paths"].iloc[0] == [first + A2 + ".jpg", first + A1 + ".jpg"]  # file order
    assert df["view_positions"].iloc[0] == ["AP", "PA"]
    assert df["image_path"].iloc[0] == first + A1 + ".jpg"  # the key image: PA first
    assert df["image_paths"].iloc[0] is df["image_paths"].iloc[1] or \
        df["image_paths"].iloc[0] == df["image_paths"].iloc[1]
    assert df["image_paths"].iloc[2] == [first + A1 + ".jpg"]
    assert df["split"].isna().all()  # no split column, no MIMIC split file


def test_members_under_qa_and_the_files_own_split(tmp_path):
    path = _export(tmp_path, prefix="qa/", split=["train", "train", "train", "validate"])
    with pytest.warns(RowsDroppedWarning):
        df = MIMICExtCXRQBAHarmonizer(csv_path=path).harmonize()
    assert df["question"].iloc[0] == "Is the study abnormal?"  # the replica's default form
    assert df["split"].tolist() == ["train", "train", "train", "valid"]
    assert df["split_raw"].iloc[3] == "validate"


def test_question_without_image_dropped_and_named(tmp_path):
    with pytest.warns(RowsDroppedWarning, match=r"1 of 4 questions have no row in "
                                                r"question_image_metadata.parquet .*dropped.*"
                                                r"s53189527_B03_is_abnormal_001"):
        df = MIMICExtCXRQBAHarmonizer(csv_path=_export(tmp_path, orphan=True)).harmonize()
    assert len(df) == 3 and df["image_paths"].map(len).tolist() == [2, 2, 1]


def test_missing_qa_zip_and_wrong_file_refused(tmp_path):
    path = _export(tmp_path)
    path.with_name("question_image_metadata.parquet").write_text("not parquet")
    with pytest.raises(MetadataError, match="question_image_metadata.parquet cannot be read "
                                            "as Parquet"):
        MIMICExtCXRQBAHarmonizer(csv_path=path).harmonize()
    (path.parents[2] / "qa.zip").unlink()
    with pytest.raises(MetadataNotFoundError, match=r"qa.zip .*A_frontal/qa.zip"):
        MIMICExtCXRQBAHarmonizer(csv_path=path).harmonize()


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    return write_mimic_ext_cxr_qba(tmp_path_factory.mktemp("qba"))


def test_replica_subset_images_and_mimic_split(replica):
    meta = replica / "mimic-ext-cxr-qba" / "exports" / SUBSET / "metadata"
    full = MIMICExtCXRQBADataset(replica, csv_path=meta / "question_metadata.parquet",
                                 cache_dir=None)
    sub = MIMICExtCXRQBADataset(replica, csv_path=meta / "q1M" / "question_metadata.parquet",
                                cache_dir=None)
    df, q = full.harmonized_df, pq.read_table(meta / "question_metadata.parquet")
    assert len(df) == q.num_rows and len(sub.harmonized_df) == -(-q.num_rows // 2)
    assert q.schema.names[-3:] == ["patient_id", "study_id", "question_id"]  # pandas' index
    assert df["question"].notna().all() and df["answer"].notna().all()
    assert df["image_paths"].map(len).max() == 2  # a study with two frontal images
    assert set(df["view_positions"].explode()) <= {"PA", "AP"}
    assert set(df["category"]) == {ident for ident, *_ in QUESTIONS}  # identifiers
    closed = df["category"].str.contains(r"^[A-D]\d*_(?:is|has)_", regex=True)
    assert df["answer_format"].eq("closed").tolist() == closed.tolist()
    with zipfile.ZipFile(meta.parent / "qa.zip") as z:
        assert all(n.startswith("qa/p1") for n in z.namelist())
    split = pd.read_csv(replica / "mimic-cxr-2.0.0-split.csv.gz", dtype=str)
    of = dict(zip(split["study_id"], split["split"].map({"train": "train", "validate": "valid",
                                                        "test": "test"})))
    assert df["split"].tolist() == df["study_id"].map(of).tolist()
    s = full[int(df["image_paths"].map(len).argmax())]
    assert s["img"].shape == (2, 1, 224, 224) and s["img_mask"].all()


def test_parquet_read_in_batches_of_the_needed_columns(replica, monkeypatch):
    """Peak memory follows the columns read, not the file: every Parquet file is read through
    iter_batches, several batches each, never whole and never a column not needed."""
    import radharmony.table.read_parquet as rp

    path = (replica / "mimic-ext-cxr-qba" / "exports" / SUBSET / "metadata" /
            "question_metadata.parquet")
    want = MIMICExtCXRQBAHarmonizer(csv_path=path).harmonize()
    calls = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in real(self, *args, **kwargs):
            calls.append((kwargs["batch_size"], tuple(kwargs["columns"]), batch.num_rows))
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    monkeypatch.setattr(pq, "read_table", None)  # a whole-file read would fail
    monkeypatch.setattr(rp, "BATCH_ROWS", 16)
    got = MIMICExtCXRQBAHarmonizer(csv_path=path).harmonize()
    pd.testing.assert_frame_equal(got, want)
    assert {b for b, _, _ in calls} == {16} and max(n for *_, n in calls) == 16
    read = {cols for _, cols, _ in calls}
    assert ("study_id", "question_id", "image_id") in read  # not the question_img.* columns
    assert all("question.contains_report_answers" not in c for c in read)
    assert sum(1 for _, c, _ in calls if c[0] == "patient_id") > 1  # questions: several batches
