"""vqa_metrics on hand-written questions and predictions whose scores are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.vqa.metrics import (extract_letter, find_letters, rexrank_row, token_scores,
                                    vqa_metrics)

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


#: answer styles models write, each with the letter read from it (AMBIGUOUS: two letters)
OPTS5 = ["A. Atelectasis", "B. Pleural effusion", "C. A nodule", "D. Cardiomegaly",
         "E. No abnormality"]
AMBIGUOUS = "two letters"
STYLES = [
    ("C", "C"), ("c", "C"), ("(C)", "C"), ("(c).", "C"), ("[C]", "C"), ("C.", "C"),
    ("<answer>C</answer>", "C"), ("<answer> c </answer>", "C"),
    ("Reasoning first.\n<answer>C</answer>", "C"),
    ("\\boxed{C}", "C"), ("Final answer: $\\boxed{C}$", "C"), ("\\boxed{\\text{C}}", "C"),
    ("**C**", "C"), ("**C. a nodule**", "C"), ("**Answer:** C", "C"), ("`C`", "C"),
    ("__C__", "C"), ("### Answer\nC", "C"),
    ("C. A nodule", "C"), ("C) a nodule", "C"), ("(C) A nodule", "C"), ("C: a nodule", "C"),
    ("b) atelectasis", "B"), ("b. pleural effusion", "B"), ("C - a nodule", "C"),
    ("The answer is C", "C"), ("The answer is C.", "C"), ("The correct answer is (C).", "C"),
    ("Answer: C", "C"), ("answer: c", "C"), ("ANSWER: C", "C"), ("Option C", "C"),
    ("option c", "C"), ("The correct option is C: a nodule.", "C"),
    ("I would choose C", "C"), ("I would choose option c because of the round opacity.", "C"),
    ("I'd go with C.", "C"), ("My final answer is C", "C"), ("Choice: (c)", "C"),
    ("Selected option: C", "C"), ("C is correct.", "C"), ("C is the best answer.", "C"),
    ("A is the correct answer.", "A"),
    ("Looking at the image, C.", "C"), ("The answer is C, not A.", "C"),
    ("Answer: C\nExplanation: Option A is incorrect because the lung is expanded.", "C"),
    ("Answer: C\nExplanation: A nodule is seen in the right upper lobe.", "C"),
    ("The answer is a nodule", "C"), ("Answer: a nodule", "C"), ("a nodule", "C"),
    ("A nodule", "C"), ("A nodule in the right upper lobe.", "C"),
    ("Pleural effusion", "B"), ("pleural effusion.", "B"), ("The answer is pleural effusion", "B"),
    ("There is a small pleural effusion on the left.", "B"),
    ("No abnormality", "E"), ("Cardiomegaly", "D"),
    ("A large effusion", None), ("I am not sure.", None), ("no idea", None), ("", None),
    ("e.g. a mass", None), ("The X-ray is unremarkable", None),
    ("A or C", AMBIGUOUS), ("Options A and C are both possible.", AMBIGUOUS),
    ("(A) or (C)", AMBIGUOUS), ("C. A nodule\nB. Pleural effusion", AMBIGUOUS),
    ("<answer>A</answer><answer>C</answer>", AMBIGUOUS),
    ("It is either atelectasis or a nodule, A or C.", AMBIGUOUS),
    ("F", "F"), ("The answer is F", "F"),
    ("It is C.", "C"), ("i think it's c", "C"), ("It is a nodule.", "C"),
    ("There is no pleural effusion; a nodule is seen.", "C"),
    ("Not A.", None), ("Option A is incorrect; option C is correct.", "C"),
    ("The findings suggest cardiomegaly (D).", "D"), ("D) Cardiomegaly", "D"),
    ("Cardiomegaly.", "D"), ("There is no pleural effusion.", None), ("No idea.", None),
    ("<ANSWER>b</ANSWER>", "B"), ("- C", "C"), ("> C. A nodule", "C"),
]


@pytest.mark.parametrize("text, letter", STYLES)
def test_answer_styles(text, letter):
    letters = find_letters(text, OPTS5)
    if letter is AMBIGUOUS:
        assert len(letters) == 2 and extract_letter(text, OPTS5) is None, letters
    else:
        assert letters == ((letter,) if letter else ()) and extract_letter(text, OPTS5) == letter


def test_the_style_table_is_broad():
    assert len(STYLES) >= 40 and len({t for t, _ in STYLES}) == len(STYLES)
    assert sum(letter is AMBIGUOUS for _, letter in STYLES) >= 5
    assert sum(letter is None for _, letter in STYLES) >= 5


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
    assert got.loc[("mcq_accuracy", "overall"), "ambiguous"] == 0
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


def test_two_letters_are_wrong_and_counted_apart_from_no_letter():
    preds = {**PREDICTIONS, "q1": "A or B", "q8": "D, or perhaps (B)",
             "q2": "<answer>B</answer> (A is less likely)"}  # the tags alone are read
    out = vqa_metrics(preds, TABLE, n_bootstrap=0).set_index(["metric", "group"])
    row = out.loc[("mcq_accuracy", "overall")]
    # q1 (A or B) and q8 (D, then (B)) are ambiguous: 3 of 8 right; q3 still has no letter
    assert (row.value, row.ambiguous, row.no_letter, row.outside_options) == (3 / 8, 2, 1, 1)
    assert out.loc[("mcq_accuracy", "Presence Assessment"), "ambiguous"] == 1
    assert out.loc[("mcq_accuracy", "Geometric Information Assessment"), "value"] == 0
