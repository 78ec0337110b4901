"""Scoring grounded outputs (radharmony.mixture.grounding_scores.grounding_metrics): hand-counted detection
precision, recall and AP with readers that agree and disagree, MS-CXR's union IoU, unparsed
outputs, and the patient bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture.grounding_scores import grounding_metrics, union_iou
from radharmony.mixture.records import fields_json

FRAME = {"width": 1000, "height": 1000, "mode": "original", "size": None}


def det(*boxes, dialect="chexagent"):
    return fields_json({"task_kind": "detection", "dialect": dialect, "frame": FRAME,
                        "boxes": [{"finding": f, "box": b, "reader": r} for f, b, r in boxes]})


def phrase(*boxes, dialect="radfact"):
    return fields_json({"task_kind": "phrase", "dialect": dialect, "frame": FRAME,
                        "boxes": [{"phrase": "opacity", "box": b, "reader": None}
                                  for b in boxes]})


RECORDS = pd.DataFrame({
    "record_id": ["a", "b", "c", "d", "e"],
    "patient_id": ["p1", "p2", "p2", "p3", "p3"],
    "fields": [
        # two readers agree on one nodule (IoU 0.82: one finding); one effusion
        det(("Nodule", [100, 100, 200, 200], "R1"), ("Nodule", [110, 100, 210, 200], "R2"),
            ("Effusion", [500, 500, 700, 700], "R1")),
        # two readers disagree (IoU 0): two nodule findings
        det(("Nodule", [0, 0, 100, 100], "R1"), ("Nodule", [800, 800, 900, 900], "R2"),
            ("Cardiomegaly", [300, 300, 600, 600], "R1")),  # never predicted
        det(("Effusion", [500, 500, 700, 700], None)),
        phrase([0, 0, 100, 100], [100, 0, 200, 100]),
        phrase([0, 0, 100, 100]),
    ]})
OUTPUTS = [
    "<|ref|>nodule<|/ref|><|box|>(10,10),(20,20)<|/box|> and "
    "<|ref|>Effusion.<|/ref|><|box|>(0,0),(10,10)<|/box|>",  # nodule found, effusion missed
    "<|ref|>Nodule<|/ref|><|box|>(80,80),(90,90)<|/box|>",  # R2's nodule: a valid match
    "<|box|>(1,2)<|/box|>",  # unparsed
    '[{"text": "opacity", "boxes": [{"x_min": 0.05, "y_min": 0, "x_max": 0.15, '
    '"y_max": 0.1}]}]',  # half of the union
    "I cannot find it.",  # no JSON list in a JSON dialect: unparsed, IoU 0
]


def test_hand_counted_metrics():
    s = grounding_metrics(OUTPUTS, RECORDS, n_bootstrap=0)
    # nodule: 2 matched of 2 predicted, 3 findings; effusion: 0 of 1 predicted, 2 findings;
    # cardiomegaly: 1 finding, never predicted (AP 0, not undefined)
    per = s.per_class.set_index("class")
    assert per.loc["Nodule", ["findings", "predicted", "matched"]].tolist() == [3, 2, 2]
    assert per.loc["Effusion", ["findings", "predicted", "matched"]].tolist() == [2, 1, 0]
    assert per.loc["Nodule", "ap50"] == pytest.approx(2 / 3)
    assert per.loc["Effusion", "ap50"] == 0.0
    assert per.loc["Cardiomegaly", ["findings", "predicted", "ap50"]].tolist() == [1, 0, 0.0]
    assert s["map50"] == pytest.approx((2 / 3 + 0 + 0) / 3)
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == pytest.approx(2 / 6)
    assert s["miou"] == pytest.approx(0.25)  # (0.5 + 0) / 2
    assert s["unparsed"] == pytest.approx(2 / 5)
    assert s.per_record["ok"].tolist() == [True, True, False, True, False]
    assert s.per_record["iou"].tolist()[3:] == [0.5, 0.0]
    assert s.per_record["malformed"].tolist() == [0, 0, 1, 0, 0]
    assert np.isnan(s.summary.set_index("metric").loc["map50", "ci_low"])


def test_predictions_by_record_id_and_the_bootstrap():
    by_id = dict(zip(RECORDS["record_id"], OUTPUTS))
    a = grounding_metrics(by_id, RECORDS.to_dict("records"), n_bootstrap=200, seed=3)
    b = grounding_metrics(list(reversed(OUTPUTS))[::-1], RECORDS, n_bootstrap=200, seed=3)
    pd.testing.assert_frame_equal(a.summary, b.summary)
    row = a.summary.set_index("metric").loc["unparsed"]
    assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["ci_high"] > row["ci_low"]
    assert row["n_records"] == 5


def test_union_iou():
    assert union_iou([[0, 0, 100, 100], [100, 0, 200, 100]], [[50, 0, 150, 100]]) == 0.5
    assert union_iou([[0, 0, 10, 10], [0, 0, 10, 10]], [[0, 0, 10, 10]]) == 1.0
    assert union_iou([[0, 0, 10, 10], [5, 0, 15, 10]], [[0, 0, 10, 10]]) == \
        pytest.approx(100 / 150)
    assert union_iou(np.zeros((0, 4)), [[0, 0, 1, 1]]) == 0.0


def test_errors_name_the_fix():
    with pytest.raises(RadHarmonyError, match="one prediction per record"):
        grounding_metrics(OUTPUTS[:2], RECORDS)
    with pytest.raises(RadHarmonyError, match="Some records have no prediction"):
        grounding_metrics({"a": ""}, RECORDS)
    bad = RECORDS.assign(fields=[fields_json({"task_kind": "vqa"})] * 5)
    with pytest.raises(RadHarmonyError, match="Record a is not a scorable grounded record"):
        grounding_metrics(OUTPUTS, bad)
    with pytest.raises(RadHarmonyError, match="patient_id"):
        grounding_metrics(OUTPUTS, RECORDS.drop(columns="patient_id"))


def test_maira2_records_are_scored_on_the_crop_the_model_sees():
    """MAIRA-2's processor centre-crops a 400 x 300 image to x 50..350: a reader's box wholly
    left of it cannot be found, and one reaching past it counts as its clipped part (the
    target's own box), so a model that outputs exactly the targets scores recall 1."""
    frame = {"width": 400, "height": 300, "mode": "original", "size": None}
    fields = fields_json({"task_kind": "detection", "dialect": "maira2", "frame": frame,
                          "boxes": [{"finding": "Nodule", "box": [0, 0, 40, 300], "reader": "R1"},
                                    {"finding": "Nodule", "box": [0, 10, 100, 100],
                                     "reader": "R1"},
                                    {"finding": "Effusion", "box": [200, 100, 300, 200],
                                     "reader": "R1"}]})
    records = pd.DataFrame({"record_id": ["m"], "patient_id": ["p"], "fields": [fields]})
    # 3 source pixels per bin from x = 50: [50, 10, 100, 100] -> bins 0, 3, 16, 33 (IoU 0.95
    # with the clipped box, 0.48 with the whole one); the effusion -> 50, 33, 83, 66
    out = ["<obj>Nodule<box><x0><y3><x16><y33></box></obj>"
           "<obj>Effusion<box><x50><y33><x83><y66></box></obj>"]
    s = grounding_metrics(out, records, n_bootstrap=0)
    per = s.per_class.set_index("class")
    assert per.loc["Nodule", ["findings", "predicted", "matched"]].tolist() == [1, 1, 1]
    assert per.loc["Effusion", ["findings", "predicted", "matched"]].tolist() == [1, 1, 1]
    assert s.per_record["outside_frame"].tolist() == [1]
    assert s["recall"] == 1.0
