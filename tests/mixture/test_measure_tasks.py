"""The mixture tasks of the label kinds: ``estimate_measures`` (regression targets as text) and
``grade_findings`` (grades and sides as text), on hand tables; which datasets feed them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from radharmony import catalog
from radharmony.mixture.context import SourceContext
from radharmony.mixture.tasks import TASKS, feeders

NAN = float("nan")


def _context(key: str, extra: dict) -> SourceContext:
    n = len(next(iter(extra.values())))
    table = pd.DataFrame({"sample_id": [f"{key}:{i}" for i in range(n)],
                          "patient_id": [f"p{i}" for i in range(n)],
                          "study_id": [f"s{i}" for i in range(n)],
                          "image_path": [f"{i}.png" for i in range(n)], "view": None,
                          "view_position": None, "report": None, **extra})
    return SourceContext(name=key, key=key, spec=catalog.spec(key), table=table, kwargs={},
                         seed=0, valid_share=0.0)


def test_measures_as_text_and_unknown_ones_skipped():
    ctx = _context("ralo", {"lung_extent_score": [4.5, NAN, NAN],
                            "lung_opacity_score": [3.0, 2.0, NAN]})
    draft = TASKS["estimate_measures"].build(ctx)
    assert draft.pos.tolist() == [0, 1] and draft.skipped == {"no_measure": 1}
    out = draft.render(np.arange(2))
    assert out.targets == ["Lung extent score: 4.5 of 8\nLung opacity score: 3 of 8",
                           "Lung opacity score: 2 of 8"]
    assert out.slots["measures"][0] == "lung extent score, lung opacity score"
    assert json.loads(out.fields[1])["measures"] == {"lung_opacity_score": 2.0}
    bones = _context("rsna_bone_age", {"bone_age_months": [132.0]})
    assert TASKS["estimate_measures"].build(bones).render(np.arange(1)).targets == \
        ["Bone age: 132 months"]


def test_grades_with_the_sides_the_source_gave():
    ctx = _context("taix_ray", {"cardiomegaly_grade": [2.0, NAN],
                                "pulmonary_congestion_grade": [0.0, NAN],
                                "pleural_effusion_grade": [3.0, NAN],
                                "lung_opacity_grade": [1.0, NAN],
                                "atelectasis_grade": [NAN, NAN],
                                "pleural_effusion_side": ["right", None],
                                "lung_opacity_side": [None, None],
                                "atelectasis_side": [None, None]})
    draft = TASKS["grade_findings"].build(ctx)
    assert draft.pos.tolist() == [0] and draft.skipped == {"no_grade": 1}
    out = draft.render(np.arange(1))
    assert out.targets == ["Cardiomegaly: mild\nPulmonary vascular congestion: none\n"
                           "Pleural effusion: moderate, right\nLung opacity: questionable"]
    cells = json.loads(out.fields[0])["grades"]
    assert cells["pleural_effusion"] == {"grade": 3, "side": "right"}
    assert cells["lung_opacity"] == {"grade": 1, "side": None}  # no side given: none invented


def test_the_new_datasets_feed_their_tasks():
    assert feeders(TASKS["estimate_measures"]) == ["ralo", "rsna_bone_age"]
    assert feeders(TASKS["grade_findings"]) == ["taix_ray", "taix_ray_original"]
    assert "taix_ray" in feeders(TASKS["classify_findings"])
