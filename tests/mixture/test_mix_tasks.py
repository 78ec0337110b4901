"""The task registry, ``radharmony tasks``, and the tasks' pure pieces (targets, negatives)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np

from radharmony import catalog
from radharmony.mixture.tasks import TASKS, capabilities
from radharmony.mixture.tasks.labels import labels_text
from radharmony.mixture.tasks.matching import negatives
from radharmony.mixture.tasks.reports import both_target

TASK_NAMES = ["report_findings", "report_findings_indication", "report_impression",
              "report_impression_indication", "report_findings_impression",
              "report_findings_impression_indication", "summarize_impression",
              "classify_findings", "finding_question",
              "estimate_measures", "grade_findings",  # issue 54: regression targets, grades
              "classify_view", "vqa_mcq", "vqa_closed",
              "vqa_open", "image_text_matching",
              # issue 42: grounding and temporal families
              "detect_findings", "detect_no_finding", "grounded_diagnosis", "phrase_grounding",
              "grounded_captioning", "anatomical_grounding", "locate_foreign_objects",
              "grounded_report", "report_findings_with_prior", "progression", "vqa_difference",
              # issue 54: figure captions (ROCO)
              "caption_image", "image_keywords",
              # issue 52: CT volumes
              "ct_report_findings", "ct_report_findings_indication", "ct_report_impression",
              "ct_report_impression_indication", "ct_report_findings_impression",
              "ct_report_findings_impression_indication", "ct_classify_findings",
              "ct_finding_question", "ct_locate_abnormality", "ct_exam_question",
              "ct_level_findings", "ct_detect_findings", "ct_locate_levels"]


def test_the_registry_holds_the_text_and_label_tasks():
    assert list(TASKS) == TASK_NAMES
    assert TASKS["report_findings_indication"].needs == ("study", "findings", "indication")
    assert TASKS["summarize_impression"].family == "text"
    assert TASKS["vqa_mcq"].needs == ("questions",)


def test_capabilities_come_from_the_spec_alone():
    assert capabilities(catalog.spec("chexpert")) == {"images", "study", "labels", "views"}
    assert capabilities(catalog.spec("rexvqa_train")) == {"images", "questions"}
    rex = catalog.spec("rexgradient_train")
    assert "labels" not in capabilities(rex)  # ReXGradient ships no labels...
    assert "labels" in capabilities(rex, {"labels": "report"})  # ...its report labeler's are
    assert {"prior", "findings", "boxes"} <= capabilities(rex)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "radharmony", *args], capture_output=True,
                          text=True, timeout=120)


def test_radharmony_tasks_json_lists_what_the_text_shows():
    r = _cli("tasks", "--json")
    assert r.returncode == 0, r.stderr
    listing = json.loads(r.stdout)
    assert [t["name"] for t in listing] == TASK_NAMES
    assert all(set(t) == {"name", "family", "needs", "datasets", "description"}
               for t in listing)
    by = {t["name"]: t for t in listing}
    assert by["classify_findings"]["family"] == "labels" == TASKS["classify_findings"].family
    assert by["report_findings_with_prior"]["family"] == "temporal"
    assert by["vqa_mcq"]["description"] == TASKS["vqa_mcq"].description
    assert by["vqa_open"]["datasets"] == ["gemex_vqa", "medical_diff_vqa", "mimic_cxr_vqa",
                                          "mimic_ext_cxr_qba", "rexvqa_test", "rexvqa_train",
                                          "rexvqa_valid", "slake_chest", "vqa_rad_chest"]
    assert "chexpert" in by["classify_view"]["datasets"]
    assert "chexpert" not in by["report_findings"]["datasets"]
    text = _cli("tasks")
    assert text.returncode == 0
    assert re.search(r"\nclassify_findings +labels +images, labels", text.stdout)


def test_the_listing_imports_neither_torch_nor_pandas():
    code = ("import sys; from radharmony.cli.main import main; main(['tasks', '--json']); "
            "print('torch' in sys.modules, 'pandas' in sys.modules, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stderr.strip().splitlines()[-1] == "False False", r.stderr


def test_labels_text_never_states_an_unlabelled_finding():
    names = ["Edema", "Mass", "Nodule", "Fracture"]
    assert labels_text(np.array([np.nan, 1.0, np.nan, 0.0]), names) == \
        "Present: Mass\nAbsent: Fracture"
    assert labels_text(np.array([-1.0, np.nan, np.nan, np.nan]), names) == "Uncertain: Edema"


def test_findings_impression_targets_drop_an_absent_section():
    assert both_target("Clear lungs.", "Normal.") == "Findings: Clear lungs.\nImpression: Normal."
    assert both_target(None, "Normal.") == "Impression: Normal."
    assert "None" not in both_target("Clear.", None)


def test_negatives_come_from_another_patient_of_the_same_split():
    patients = np.array(["a", "a", "b", "c", "d"], dtype=object)
    allowed = np.array([True, True, True, False, True])
    groups = np.array([False, False, False, False, True])  # d alone in its split
    got = negatives(patients, allowed, groups, np.zeros(5, np.uint64))
    assert got.tolist() == [2, 2, 0, 0, -1]


def test_a_study_id_reused_by_another_patient_is_another_study():
    import pandas as pd

    from radharmony.mixture.context import SourceContext

    table = pd.DataFrame({"sample_id": ["x:1", "x:2", "x:3"], "patient_id": ["a", "b", "a"],
                          "study_id": ["s1", "s1", "s1"], "image_path": ["1.png", "2.png",
                                                                          "3.png"],
                          "view": ["PA", "AP", "LATERAL"], "view_position": None,
                          "report": ["FINDINGS:\nClear.", None, None]})
    ctx = SourceContext(name="x", key="rexgradient_train", spec=catalog.spec("rexgradient_train"),
                        table=table, kwargs={}, seed=0, valid_share=0.0,
                        held_patients=frozenset({"rexgradient:b"}))
    u = ctx.units("study")
    assert u.ids.tolist() == ["rexgradient:a/s1", "rexgradient:b/s1"]
    assert u.paths == [["1.png", "3.png"], ["2.png"]] and u.held.tolist() == [0, 1]
    assert [s["findings"] for s in u.sections] == ["Clear.", None]
