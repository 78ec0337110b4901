"""vqa_metrics on hand-written questions and predictions whose scores are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.vqa.metrics import extract_letter, rexrank_row, token_scores, vqa_metrics

OPTS = ["A. Yes", "B. No", "C. Cannot be determined", "D. Only on the lateral view"]


def mcq(qid, patient, task, letter):
    return {"question_id": qid, "patient_id": patient, "answer_format": "mcq",
            "options": OPTS, "answer_letter": letter, "answer": OPTS["ABCD".index(letter)][3:],
            "task": task}


TABLE = pd.DataFrame([
    mcq("q1", "p1", "Presence Assessment", "A"),
    mcq("q2", "p1", "Presence Assessment", "B"),
    mcq("q3", "p2", "Presence Assessment", "C"),
    mcq("q4", "p2", "Negation Assessment", "D"),
    mcq("q5", "p3", "Negation Assessment", "A"),
    mcq("q6", "p3", "Differential Diagnosis", "B"),
    mcq("q7", "p4", "Location and Distribution Assessment", "C"),
    mcq("q8", "p4", "Geometric Information Assessment", "D"),
    {"question_id": "c1", "patient_id": "p5", "answer_format": "closed", "options": [],
     "answer_letter": None, "answer": "yes", "task": None},
    {"question_id": "c2", "patient_id": "p5", "answer_format": "closed", "options": [],
     "answer_letter": None, "answer": "no", "task": None},
    {"question_id": "o1", "patient_id": "p6", "answer_format": "open", "options": [],
     "answer_letter": None, "answer": "right lower lobe", "task": None},
])
PREDICTIONS = {
    "q1": "A",                      # right
    "q2": "The answer is B.",       # right
    "q3": "no idea",                # no letter: wrong, counted
    "q4": "E",                      # outside the options: wrong, counted
    "q5": "(A) Yes",                # right
    "q6": "C. Cannot be determined",  # wrong
    "q7": "cannot be determined",   # the text of option C: right
    "q8": "D",                      # right
    "c1": "Yes, there is.",         # right
    "c2": "yes",                    # wrong
    "o1": "lower lobe on the right",  # tokens: 4 of 5 predicted in 3 answer tokens
}


@pytest.mark.parametrize("text, letter", [
    ("B", "B"), ("(b).", "B"), ("C. Cannot", "C"), ("The answer is D", "D"),
    ("Answer: (A)", "A"), ("**Option B**", "B"), ("no idea", None), ("", None),
    ("A large effusion", None), ("Yes", "A"), ("F", "F")])
def test_extract_letter(text, letter):
    assert extract_letter(text, OPTS) == letter


def test_known_accuracy_per_skill_and_counts(tmp_path):
    out = vqa_metrics(PREDICTIONS, TABLE, n_bootstrap=200, seed=1,
                      csv_path=tmp_path / "s.csv")
    got = out.set_index(["metric", "group"])
    assert got.loc[("mcq_accuracy", "overall"), "value"] == 5 / 8
    assert got.loc[("mcq_accuracy", "Presence Assessment"), "value"] == 2 / 3
    assert got.loc[("mcq_accuracy", "Negation Assessment"), "value"] == 1 / 2
    assert got.loc[("mcq_accuracy", "Differential Diagnosis"), "value"] == 0
    assert got.loc[("mcq_accuracy", "Location and Distribution Assessment"), "value"] == 1
    assert got.loc[("mcq_accuracy", "overall"), "no_letter"] == 1
    assert got.loc[("mcq_accuracy", "overall"), "outside_options"] == 1
    assert got.loc[("mcq_accuracy", "Negation Assessment"), "outside_options"] == 1
    assert got.loc[("closed_accuracy", "overall"), "value"] == 0.5
    f1, recall = token_scores(PREDICTIONS["o1"], "right lower lobe")
    assert (round(f1, 4), recall) == (round(2 * 0.6 * 1 / 1.6, 4), 1.0)
    assert got.loc[("open_token_f1", "overall"), "value"] == pytest.approx(f1)
    row = got.loc[("mcq_accuracy", "overall")]
    assert row.ci_low <= row.value <= row.ci_high and row.ci_low < row.ci_high
    assert row.n == 8 and row.n_patients == 4
    back = pd.read_csv(tmp_path / "s.csv")
    assert list(back.columns) == list(out.columns) and len(back) == len(out)
    again = vqa_metrics(PREDICTIONS, TABLE, n_bootstrap=200, seed=1)
    pd.testing.assert_frame_equal(again, out)  # seeded
    assert rexrank_row(out)["Overall Accuracy"] == 62.5


def test_missing_prediction_is_wrong_and_warned():
    preds = {k: v for k, v in PREDICTIONS.items() if k != "q1"}
    with pytest.warns(UserWarning, match="1 of 11 questions have no prediction.*q1"):
        out = vqa_metrics(preds, TABLE, n_bootstrap=0)
    row = out.set_index(["metric", "group"]).loc[("mcq_accuracy", "overall")]
    assert row.value == 4 / 8 and row.no_prediction == 1 and np.isnan(row.ci_low)


def test_predictions_by_sample_id_or_table_and_unknown_refused():
    by_sample = {f"rexvqa_test:{k}": v for k, v in PREDICTIONS.items()}
    a = vqa_metrics(by_sample, TABLE, n_bootstrap=0)
    table = pd.DataFrame({"question_id": list(PREDICTIONS), "prediction":
                          list(PREDICTIONS.values())})
    pd.testing.assert_frame_equal(a, vqa_metrics(table, TABLE, n_bootstrap=0))
    with pytest.raises(RadHarmonyError, match="name no question"):
        vqa_metrics({**PREDICTIONS, "zz": "A"}, TABLE, n_bootstrap=0)


def test_on_a_fake_dataset(tmp_path):
    from radharmony.datasets.rexvqa import ReXVQATestHarmonizer
    from radharmony.fake.rexvqa import write_rexvqa

    write_rexvqa(tmp_path, studies={"test": 6}, images=False)  # scoring needs the table only
    df = ReXVQATestHarmonizer(base_image_dir=tmp_path / "deid_png").harmonize()
    oracle = dict(zip(df["question_id"], df["answer_letter"]))
    out = vqa_metrics(oracle, df, n_bootstrap=50)
    assert (out["value"] == 1).all() and len(out) == 1 + df["task"].nunique()
