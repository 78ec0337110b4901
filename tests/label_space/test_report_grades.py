"""The report labeler's severity and side words (``report_grades``): hand-written sentences pin
each rule; TAIX-Ray-style reports read back their grades; a hand-made OpenI archive scores
sides and severities against MeSH modifiers; the real OpenI archive, where installed, pins
the held-out agreement."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from radharmony.reports import label_reports, report_grades

FINDINGS = ["pleural_effusion", "pneumothorax", "atelectasis", "lung_opacity", "cardiomegaly",
            "edema", "pneumonia"]


def read(text: str, finding: str) -> tuple:
    r = report_grades([f"FINDINGS: {text}"], findings=FINDINGS).iloc[0]
    grade = float(r[f"{finding}_grade"])
    side = r.get(f"{finding}_side")
    return (None if math.isnan(grade) else grade), side


@pytest.mark.parametrize("text, finding, grade, side", [
    ("Small left pleural effusion.", "pleural_effusion", 2.0, "left"),
    ("Moderate right and small left pleural effusions.", "pleural_effusion", 3.0, "both"),
    ("Large left-sided pneumothorax.", "pneumothorax", 4.0, "left"),
    ("Bibasilar atelectasis.", "atelectasis", None, "both"),
    ("Right and left effusions.", "pleural_effusion", None, "both"),
    ("Effusion on the right, small.", "pleural_effusion", 2.0, "right"),
    ("Mild to moderate cardiomegaly.", "cardiomegaly", 3.0, None),
    ("Severe pulmonary edema.", "edema", 4.0, None),
    # a hedge is questionable, a negation none, without a side
    ("Possible right lower lobe pneumonia.", "pneumonia", 1.0, "right"),
    ("No left pleural effusion.", "pleural_effusion", 0.0, None),
    ("No pneumothorax.", "pneumothorax", 0.0, None),
    # words of another mention, or past a terminator, are not this mention's
    ("Left effusion and right pneumothorax.", "pneumothorax", None, "right"),
    ("Left effusion and right pneumothorax.", "pleural_effusion", None, "left"),
    ("Mild cardiomegaly with pleural effusion.", "pleural_effusion", None, None),
    ("Right and left effusions, which are large.", "pleural_effusion", None, "both"),
    # a coordinated mention shares the words before its partner
    ("Left basilar infiltrate versus atelectasis.", "atelectasis", 1.0, "left"),
    # an unmentioned finding has neither
    ("Heart size is normal.", "pleural_effusion", None, None),
])
def test_severity_and_side_words(text, finding, grade, side):
    assert read(text, finding) == (grade, side)


def test_the_worst_positive_mention_decides_and_sides_add_up():
    text = "Small left effusion. Large right effusion. Possible pneumothorax."
    assert read(text, "pleural_effusion") == (4.0, "both")
    assert read(text, "pneumothorax") == (1.0, None)
    # a positive mention outranks an uncertain one: its grade, its sides only
    assert read("Possible right effusion. Small left effusion.", "pleural_effusion") == \
        (2.0, "left")


def test_columns_index_and_the_labels_agree():
    texts = pd.Series(["FINDINGS: Small left pleural effusion.", None], index=["a", "b"])
    t = report_grades(texts, findings=["pleural_effusion", "cardiomegaly"])
    assert list(t.columns) == ["pleural_effusion_grade", "pleural_effusion_side",
                               "cardiomegaly_grade"]
    assert list(t.index) == ["a", "b"] and t.loc["b"].isna().all()
    labels = label_reports(texts, vocabulary="canonical")
    assert labels.loc["a", "pleural_effusion"] == 1.0  # the same mention pass decided it
    with pytest.raises(Exception, match="pleural_effusions"):
        report_grades(texts, findings=["pleural_effusions"])


def test_taix_style_reports_read_back_their_grades():
    from radharmony.fake.taix_ray import taix_style_reports
    from radharmony.reports.evaluate_grades import taix_agreement

    texts, grades = taix_style_reports(200, seed=3)
    t = taix_agreement(texts, grades)
    assert (t["agreement"] == 1.0).all(), t
    assert set(t["finding"]) == {"cardiomegaly", "pulmonary_congestion", "pleural_effusion",
                                 "lung_opacity", "atelectasis"}


def test_openi_sides_and_severities_against_mesh(tmp_path):
    from radharmony.reports.evaluate_grades import openi_agreement
    from tests.openi_reports import write_reports

    reports = [  # (number, findings, impression, MeSH major)
        (1, "Small left pleural effusion.", "Effusion.", ["Pleural Effusion/left/small"]),
        (3, "Large right pleural effusion.", "Effusion.", ["Pleural Effusion/right/large"]),
        (5, "Bilateral effusions.", "Effusions.", ["Pleural Effusion/bilateral"]),
        (7, "Effusion.", "No pneumothorax.", ["Pleural Effusion/left"]),  # no side said
        (9, "Left basilar atelectasis.", "Atelectasis.", ["Pulmonary Atelectasis/base/right"]),
    ]
    path = write_reports(tmp_path / "NLMCXR_reports.tgz", reports)
    t = openi_agreement(path, ids="all").set_index(["finding", "kind"])
    eff = t.loc[("pleural_effusion", "side")]
    assert (eff["n"], eff["agree"], eff["none_said"]) == (4, 3, 1)
    assert t.loc[("pleural_effusion", "grade"), "agreement"] == 1.0  # small 2, large 4
    ate = t.loc[("atelectasis", "side")]
    assert (ate["n"], ate["agree"], ate["none_said"]) == (1, 0, 0)


def test_real_openi_held_out_agreement():
    from txv_data import txv_file

    from radharmony.reports.evaluate_grades import openi_agreement

    t = openi_agreement(txv_file("NLMCXR_reports.tgz"), ids="odd").set_index(["finding", "kind"])
    # measured on the odd (held-out) ids: 68/77 effusion sides, 214/249 opacity sides
    assert t.loc[("pleural_effusion", "side"), "agree"] >= 66
    assert t.loc[("lung_opacity", "side"), "agree"] >= 210
    assert t.loc[("pleural_effusion", "grade"), "agreement"] >= 0.85
