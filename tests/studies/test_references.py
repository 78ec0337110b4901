"""ReXrank references per study and per-study report metrics with the scorer's CSVs."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from radharmony.datasets.rexgradient import ReXGradientTestDataset
from radharmony.errors import RadHarmonyError, StudyWarning
from radharmony.evaluate import report_metrics
from radharmony.studies import rexrank_references, rexrank_report

from study_fixtures import rex_real  # noqa: F401 (fixture)


def _datasets(rex_real):
    path, images, entries = rex_real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        study = ReXGradientTestDataset(images, path, level="study", max_images=2,
                                       cache_dir=None)
    return study, ReXGradientTestDataset(images, path, cache_dir=None), entries


def test_references_as_rexrank_writes_them(rex_real):
    study, image_level, entries = _datasets(rex_real)
    fi = rexrank_references(study, track="findings_impression")
    assert len(fi) == 100 and fi["eval_id"].tolist() == list(range(100))
    by_uid = {e["StudyInstanceUid"]: e for e in entries.values()}
    for sid, report in zip(fi["study_id"], fi["report"]):
        e = by_uid[sid]
        assert report == f"Findings: {e['Findings'].strip()} Impression: {e['Impression'].strip()}"
    # an image-level dataset gives the same one row per study (never one per image)
    assert len(image_level) == 162
    pd.testing.assert_frame_equal(rexrank_references(image_level), fi)
    assert rexrank_report("A.", None) == "Findings: A. Impression: None"


def test_findings_track_leaves_out_studies_without_findings(rex_real):
    study, _, _ = _datasets(rex_real)
    no_findings = study.filter(study.studies["study_id"].isin(study.study_ids[:3]).to_numpy())
    df = no_findings.studies
    assert df["findings"].notna().all()
    one = no_findings.studies.copy()
    with pytest.warns(StudyWarning, match=r"1 of 3 studies have no findings"):
        refs = rexrank_references(_Stub(one.assign(findings=[None, *one["findings"][1:]])),
                                  track="findings")
    assert refs["study_id"].tolist() == one["study_id"].tolist()[1:]
    assert refs["eval_id"].tolist() == [0, 1]


class _Stub:
    def __init__(self, studies):
        self.studies = studies


def test_per_study_metrics_write_the_scorer_csvs(rex_real, tmp_path):
    study, _, _ = _datasets(rex_real)
    refs = rexrank_references(study, track="findings")
    preds = dict(zip(refs["study_id"], refs["report"]))
    scores = report_metrics(preds, refs, clinical=False, csv_dir=tmp_path)
    assert scores["bleu4"] == pytest.approx(1.0) and len(scores.per_report) == len(refs)
    gt = pd.read_csv(tmp_path / "gt_reports.csv")
    assert list(gt.columns) == ["study_id", "report"] and gt["study_id"].dtype.kind == "i"
    assert gt["report"].tolist() == refs["report"].tolist()
    assert gt["study_id"].tolist() == refs["eval_id"].tolist()
    pred = pd.read_csv(tmp_path / "pred_reports.csv")
    assert list(pred.columns) == ["study_id", "report"]
    assert pred["study_id"].tolist() == gt["study_id"].tolist()
    assert pred["report"].tolist() == [preds[s] for s in refs["study_id"]]
    ids = pd.read_csv(tmp_path / "eval_ids.csv", dtype={"study_id": str})
    assert ids["study_id"].tolist() == refs["study_id"].tolist()
    # per image predictions (a study twice) and missing studies are refused
    twice = pd.DataFrame({"study_id": [refs["study_id"][0]] * 2, "report": ["a", "b"]})
    with pytest.raises(RadHarmonyError, match="more than one prediction"):
        report_metrics(twice, refs, clinical=False)
    with pytest.raises(RadHarmonyError, match="do not cover the same studies"):
        report_metrics({refs["study_id"][0]: "x"}, refs, clinical=False)


def test_clinical_f1_uses_radharmonys_labeler(rex_real):
    study, _, _ = _datasets(rex_real)
    refs = rexrank_references(study).head(20)
    preds = {s: "Large right pleural effusion." for s in refs["study_id"]}
    scores = report_metrics(preds, refs)
    assert "clinical_f1_micro" in scores.to_dict()
    assert (scores.per_report["hyp_positive"] == "Pleural Effusion").all()
