"""The CT tasks (``radharmony.mixture.tasks.volumes``) on hand-written volume tables: one
volume per study by the reconstruction rule, report sections without placeholders, labels as
text and questions, RAD-ChestCT's "where is X?", exam triage and spine levels; and which
datasets feed them."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd

from radharmony import catalog
from radharmony.mixture.context import SourceContext
from radharmony.mixture.tasks import TASKS, feeders
from radharmony.mixture.tasks.volumes import chosen_volumes

NAN = float("nan")


def _context(key: str, rows: dict, spec=None) -> SourceContext:
    n = len(next(iter(rows.values())))
    base = {"sample_id": [f"{key}:v{i}" for i in range(n)],
            "patient_id": [f"p{i}" for i in range(n)], "study_id": [f"s{i}" for i in range(n)],
            "image_path": [f"v{i}.nii.gz" for i in range(n)], "view": None,
            "view_position": None, "report": None}
    base.update(rows)
    return SourceContext(name=key, key=key, spec=spec or catalog.spec(key),
                         table=pd.DataFrame(base), kwargs={}, seed=0, valid_share=0.0)


def _ct_rate(**extra) -> SourceContext:
    """Scan a: reconstructions 1 (1.5 mm) and 2 (1 mm); scan b: two at 1 mm, b_2 with finer
    pixels; scan c: one volume without findings."""
    rows = {"sample_id": ["ct_rate_train:a_1", "ct_rate_train:a_2", "ct_rate_train:b_1",
                          "ct_rate_train:b_2", "ct_rate_train:c_1"],
            "patient_id": ["p1", "p1", "p1", "p1", "p2"],
            "study_id": ["a", "a", "b", "b", "c"],
            "reconstruction": [1, 2, 1, 2, 1], "spacing_z": [1.5, 1.0, 1.0, 1.0, 2.0],
            "spacing_x": [0.75, 0.75, 0.8, 0.7, 0.7], "spacing_y": [0.75, 0.75, 0.8, 0.7, 0.7],
            "section_clinical_information": ["Cough.", "Cough.", None, None, "Fever."],
            "section_technique": ["Non-contrast."] * 5,
            "section_findings": ["Lungs clear.", "Lungs clear.", "Small nodule.",
                                 "Small nodule.", None],
            "section_impression": ["Normal.", "Normal.", "Nodule.", "Nodule.", "Opacity."],
            **extra}
    return _context("ct_rate_train", rows)


def test_the_reconstruction_rule_picks_one_volume_per_study():
    pos, studies = chosen_volumes(_ct_rate().table)
    # a: the 1 mm slices; b: equal slices, the finer pixels; c: its only volume
    assert pos.tolist() == [1, 3, 4] and studies.tolist() == ["a", "b", "c"]
    t = pd.DataFrame({"study_id": ["x", "x"], "reconstruction": [2, 1]})
    assert chosen_volumes(t)[0].tolist() == [1]  # no spacing: the lowest reconstruction
    t = pd.DataFrame({"study_id": ["x", "x"], "spacing_z": [NAN, 3.0]})
    assert chosen_volumes(t)[0].tolist() == [1]  # a missing spacing sorts last


def test_report_records_stand_on_studies_without_placeholders():
    ctx = _ct_rate()
    d = TASKS["ct_report_findings"].build(ctx)
    assert d.pos.tolist() == [1, 3] and d.item.tolist() == ["a", "b"]
    assert d.skipped == {"no_findings": 1, "other_reconstruction": 2}  # counted per study
    out = d.render(np.arange(2))
    assert out.targets == ["Lungs clear.", "Small nodule."]
    f = json.loads(out.fields[0])
    assert f["sections"] == ["findings"] and f["impression"] == "Normal."
    assert f["indication"] == "Cough." and f["technique"] == "Non-contrast."
    both = TASKS["ct_report_findings_impression"].build(ctx)
    assert both.pos.tolist() == [1, 3, 4]
    assert both.render(np.arange(3)).targets == [
        "Findings: Lungs clear.\nImpression: Normal.",
        "Findings: Small nodule.\nImpression: Nodule.", "Impression: Opacity."]
    ind = TASKS["ct_report_impression_indication"].build(ctx)
    assert ind.pos.tolist() == [1, 4]  # b has no clinical information
    assert ind.skipped == {"no_indication": 1, "other_reconstruction": 2}
    assert ind.render(np.arange(2)).slots == {"indication": ["Cough.", "Fever."]}
    assert TASKS["ct_report_impression_indication"].prompts[0] == \
        "Clinical information: {indication}\nWrite the impression of the radiology report " \
        "for this chest CT."


def test_labels_as_text_and_questions_once_per_study():
    labels = {c: [NAN] * 5 for c in catalog.spec("ct_rate_train").label_cols}
    labels["Cardiomegaly"] = [1.0, 1.0, 0.0, 0.0, NAN]
    labels["Lung nodule"] = [0.0, 0.0, 1.0, 1.0, NAN]
    ctx = _ct_rate(**labels)
    d = TASKS["ct_classify_findings"].build(ctx)
    assert d.pos.tolist() == [1, 3] and d.item.tolist() == ["a", "b"]
    assert d.skipped == {"no_labels": 1, "other_reconstruction": 2}
    assert d.render(np.arange(2)).targets == ["Present: Cardiomegaly\nAbsent: Nodule",
                                              "Present: Nodule\nAbsent: Cardiomegaly"]
    q = TASKS["ct_finding_question"].build(ctx)
    assert q.pos.tolist() == [1, 1, 3, 3]
    assert q.item(np.arange(4)) == ["a|cardiomegaly", "a|nodule", "b|cardiomegaly",
                                    "b|nodule"]
    out = q.render(np.arange(4))
    assert out.targets == ["yes", "no", "no", "yes"]
    assert out.slots["finding"] == ["cardiomegaly", "nodule", "cardiomegaly", "nodule"]


def test_where_is_an_abnormality_from_the_location_matrix():
    ctx = _context("rad_chestct", {"abnormality_locations": [
        [["nodule", "right_upper"], ["nodule", "left_lower"], ["cardiomegaly", "heart"]],
        [["calcification", "other_location"]], []]})
    d = TASKS["ct_locate_abnormality"].build(ctx)
    assert d.pos.tolist() == [0, 0] and d.skipped == {"no_located_abnormality": 2}
    assert d.item(np.arange(2)) == ["rad_chestct:v0|cardiomegaly", "rad_chestct:v0|nodule"]
    out = d.render(np.arange(2))
    assert out.targets == ["heart", "left lower, right upper"]
    assert out.slots == {"abnormality": ["cardiomegaly", "nodule"]}
    assert json.loads(out.fields[1]) == {"abnormality": "nodule",
                                         "locations": ["left_lower", "right_upper"]}


def test_pe_exam_triage_questions():
    cols = {"pe_positive_exam": [1.0, 0.0, NAN], "chronic_pe": [0.0, 0.0, 0.0],
            "acute_and_chronic_pe": [1.0, 0.0, 0.0], "central_pe": [0.0, 0.0, 0.0],
            "leftsided_pe": [1.0, 0.0, 0.0], "rightsided_pe": [0.0, 0.0, 0.0],
            "rv_lv_ratio_gte_1": [NAN, NAN, NAN]}
    d = TASKS["ct_exam_question"].build(_context("rsna_pe", cols))
    # exam 0: PE, acute and chronic, not central, left, not right (RV/LV not assessed);
    # exam 1: no PE (the PE-only questions are not asked); exam 2: indeterminate
    assert d.pos.tolist() == [0, 0, 0, 0, 0, 1] and d.skipped == {"no_exam_label": 1}
    assert [i.split("|")[1] for i in d.item(np.arange(6))] == [
        "pe_present", "pe_chronicity", "pe_central", "pe_left", "pe_right", "pe_present"]
    out = d.render(np.arange(6))
    assert out.targets == ["yes", "acute and chronic", "no", "yes", "no", "no"]
    assert out.slots["choices"][1] == "chronic, acute and chronic, acute"


def test_trauma_grades_and_spine_levels_from_declared_columns():
    spec = replace(catalog.spec("rsna_pe"), label_cols=(), extra_cols=(
        "liver_healthy", "liver_low", "liver_high", "C1", "C2", "C3", "C4", "C5", "C6",
        "C7"))
    d = TASKS["ct_exam_question"].build(_context("trauma", {
        "liver_healthy": [0.0, 1.0], "liver_low": [0.0, 0.0], "liver_high": [1.0, 0.0]},
        spec=spec))
    assert d.render(np.arange(2)).targets == ["high grade", "none"]
    levels = {f"C{k}": [0.0, 0.0] for k in range(1, 8)}
    levels["C2"], levels["C5"] = [1.0, 0.0], [1.0, NAN]
    d = TASKS["ct_level_findings"].build(_context("cspine", levels, spec=spec))
    assert d.pos.tolist() == [0] and d.skipped == {"no_level_labels": 1}
    out = d.render(np.arange(1))
    assert out.targets == ["C2, C5"] and out.slots == {"finding": ["a fracture"],
                                                         "levels": ["vertebra"]}
    lumbar = replace(spec, extra_cols=tuple(f"spinal_canal_stenosis_{d}" for d in
                                            ("l1_l2", "l2_l3", "l3_l4", "l4_l5", "l5_s1")))
    cells = dict(zip(lumbar.extra_cols, [["Normal/Mild"], ["Normal/Mild"], ["Moderate"],
                                         ["Severe"], ["Normal/Mild"]]))
    out = TASKS["ct_level_findings"].build(_context("lumbar", cells, spec=lumbar)).render(
        np.arange(1))
    assert out.targets == ["L3-L4, L4-L5"]


def test_the_volume_datasets_feed_the_ct_tasks_only():
    assert feeders(TASKS["ct_report_findings_indication"]) == ["ct_rate_train", "ct_rate_valid"]
    assert feeders(TASKS["ct_classify_findings"]) == [
        "ct_rate_train", "ct_rate_valid", "lidc_idri", "rad_chestct", "rsna_abdominal_trauma",
        "rsna_cspine", "rsna_lumbar_spine", "rsna_pe"]
    assert feeders(TASKS["ct_locate_abnormality"]) == ["rad_chestct"]
    assert feeders(TASKS["ct_exam_question"]) == ["rsna_abdominal_trauma", "rsna_pe"]
    assert feeders(TASKS["ct_level_findings"]) == ["rsna_cspine", "rsna_lumbar_spine"]
    assert feeders(TASKS["ct_detect_findings"]) == ["lidc_idri", "rsna_cspine"]  # bbox3d
    assert "ct_rate_train" not in feeders(TASKS["report_findings"])
    assert "rsna_pe" not in feeders(TASKS["classify_findings"])


class _Annotated:
    """A hand-made volume dataset with the 3-D annotation contract's hooks: row 0 has a
    nodule box and a liver mask, row 1 nothing; volumes (10, 20, 40) at (2, 1, 0.5) mm."""

    mask_labels = {1: "liver"}

    def __init__(self, ids):
        self.harmonized_df = pd.DataFrame({"sample_id": ids})

    def annotations(self, index):
        if index:
            return {}
        return {"boxes": np.array([[3.5, 1.5, -0.5, 7.5, 5.5, 4.5]]), "box_labels": ["nodule"]}

    def source_mask(self, index):
        m = np.zeros((10, 20, 40), np.uint8)
        if index == 0:
            m[2:4, 1, 5:9] = 1
        return m

    def load_volume(self, index):
        from radharmony.volumes.volume import Volume

        return Volume.from_array(np.zeros((10, 20, 40), np.int16), np.diag([2.0, 1.0, 0.5, 1]))


def _annotated_context(monkeypatch, cls) -> SourceContext:
    """Two CT-RATE volumes of a spec listing ``bbox3d``, their dataset ``cls``."""
    import radharmony.mixture.holdout as holdout

    spec = replace(catalog.spec("ct_rate_train"), outputs=frozenset({"cls", "bbox3d"}))
    ctx = _context("ct_rate_train", {"spacing_z": [1.0, 1.0]}, spec=spec)
    ctx.mixture = {"root": "unused"}
    monkeypatch.setattr(holdout, "open_dataset",
                        lambda key, root, kw: cls(ctx.table["sample_id"].tolist()))
    return ctx


def test_grounded_ct_records_from_the_annotation_hooks(monkeypatch):
    from radharmony.mixture.formats.ct3d import _reboxed
    from radharmony.mixture.tasks.grounded3d import target_for

    ctx = _annotated_context(monkeypatch, _Annotated)
    d = TASKS["ct_detect_findings"].build(ctx)
    assert d.pos.tolist() == [0] and d.skipped == {"no_boxes": 1}
    out = d.render(np.arange(1))
    # nodule: x 4..8 of 40, y 2..6 of 20, z 0..5 of 10; liver: x 5..9, y 1..2, z 2..4
    assert out.targets == ["<ref>nodule</ref><box3d>(10,10,0),(19,29,49)</box3d>\n"
                           "<ref>liver</ref><box3d>(12,5,20),(22,9,39)</box3d>"]
    f = json.loads(out.fields[0])
    assert f["box_labels"] == ["nodule", "liver"] and f["frame3d"]["shape"] == [10, 20, 40]
    # a preset's output keeping the first 20 columns: x 0..20 of the same grid
    text, counts = target_for(f, np.diag([2.0, 1.0, 0.5, 1]), (10, 20, 20))
    assert text == ("<ref>nodule</ref><box3d>(20,10,0),(39,29,49)</box3d>\n"
                    "<ref>liver</ref><box3d>(25,5,20),(44,9,39)</box3d>")
    assert counts == {"clipped": 0, "outside": 0}
    shifted = np.diag([2.0, 1.0, 0.5, 1])
    shifted[2, 3] = 0.5 * 20  # the output starts at column 20: both boxes lie before it
    tally = {"rewritten": 0, "clipped": 0, "outside": 0}
    rec = _reboxed({"fields": out.fields[0], "target": out.targets[0]},
                   {"affine": shifted.tolist(), "spatial": [10, 20, 20]}, tally)
    assert rec["target"] == "<ref>nodule</ref>\n<ref>liver</ref>"
    assert tally == {"rewritten": 1, "clipped": 0, "outside": 2}
    mm = _reboxed({"fields": out.fields[0]}, {"affine": np.diag([2.0, 1.0, 0.5, 1]).tolist(),
                                              "spatial": [10, 20, 40]}, tally, "box3d_mm")
    # nodule: x 4..8 voxels of 0.5 mm, y 2..6 of 1 mm, z 0..5 of 2 mm
    assert mm["target"].startswith("<ref>nodule</ref><box3d_mm>(2,2,0),(4,6,10)</box3d_mm>")
    assert "ct_rate_train" not in feeders(TASKS["ct_detect_findings"])


class _Spine(_Annotated):
    """Row 0: a C2 box (and a nodule, not a level); row 1: the L4-L5 disc as a point."""

    mask_labels = {}

    def annotations(self, index):
        if index == 0:
            return {"boxes": np.array([[3.5, 1.5, -0.5, 7.5, 5.5, 4.5], [0, 0, 0, 1, 1, 1.0]]),
                    "box_labels": ["C2", "nodule"]}
        return {"points": np.array([[10.0, 5.0, 3.0]]), "point_labels": ["l4_l5"]}


def test_spine_levels_located_from_boxes_and_points(monkeypatch):
    ctx = _annotated_context(monkeypatch, _Spine)
    d = TASKS["ct_locate_levels"].build(ctx)
    assert d.pos.tolist() == [0, 1] and d.skipped == {}
    assert d.item(np.arange(2)) == ["ct_rate_train:v0|C2", "ct_rate_train:v1|L4-L5"]
    out = d.render(np.arange(2))
    # the point (10, 5, 3): the voxel around it, x 10..11 of 40, y 5..6 of 20, z 3..4 of 10
    assert out.targets == ["<ref>C2</ref><box3d>(10,10,0),(19,29,49)</box3d>",
                           "<ref>L4-L5</ref><box3d>(25,25,30),(27,29,39)</box3d>"]
    assert out.slots == {"level": ["C2", "L4-L5"], "kind": ["vertebra", "disc"]}
