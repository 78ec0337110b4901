"""Temporal tasks: findings with the prior study (priors planted by date: another patient's
earlier study and a later study are never used), MS-CXR-T progression and Medical-Diff-VQA
difference questions carrying both studies, checked against the fakes' raw files."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import radharmony
from radharmony.fake import make_fake
from radharmony.mixture.builder import build
from radharmony.mixture.context import SourceContext
from radharmony.mixture.tasks import TASKS

#: study -> its date in the planted table (the MIMIC fake's patients and studies)
DATES = {"56369616": 21800506, "59685819": 21800507,    # patient 10085093: 1 day apart
         "59148930": 21800507, "55117141": 21800601,    # 11028329: 55117141 is the later
         "57830020": 21800401,                          # 13015635: earliest of all, alone
         "56399927": 21800506, "52402946": 21800506, "59766347": 21800506}
#: study -> (prior study, days) by hand; every other study has no prior: 59148930's only
#: other study is later (55117141, without findings, has no record), 57830020 is another
#: patient's
PRIORS = {"59685819": ("56369616", 1)}


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("temporal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {k: str(make_fake(k, base / k)["base_image_dir"])
                for k in ("mimic_cxr_jpg", "ms_cxr_t", "medical_diff_vqa")}


def _context(roots) -> SourceContext:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = radharmony.get_dataset_class("mimic_cxr_jpg")(base_image_dir=roots["mimic_cxr_jpg"],
                                                           cache_dir=None)
    t = ds.harmonized_df.copy()
    t["study_date"] = t["study_id"].astype(str).map(DATES)
    t["study_time"] = np.nan
    return SourceContext(name="mimic", key="mimic_cxr_jpg", spec=ds.spec, table=t, kwargs={},
                         seed=0, valid_share=0.0)


def test_the_prior_is_the_same_patients_strictly_earlier_study(roots):
    ctx = _context(roots)
    draft = TASKS["report_findings_with_prior"].build(ctx)
    out = draft.render(np.arange(len(draft)))
    u = ctx.units("study")
    got = {}
    for p, f in zip(draft.pos.tolist(), out.fields):
        f = json.loads(f)
        got[u.ids[p]] = (f["prior_study_id"], f.get("days"))
        if f["prior_study_id"] is not None:
            prior = f["prior_image_paths"][0]
            assert f"/s{f['prior_study_id']}/" in prior and f["prior_views"][0] in ("PA", "AP")
            assert len(f["prior_image_paths"]) == 1
    assert {"59685819", "59148930", "56369616", "56399927"} <= set(got)
    assert got == {s: PRIORS.get(s, (None, None)) for s in got}
    assert draft.counted == {"with_prior": 1, "without_prior": len(got) - 1}
    # the prior report is the prior's findings
    k = list(u.ids).index("56369616")
    assert out.fields[list(draft.pos).index(list(u.ids).index("59685819"))].count(
        json.dumps(u.sections[k]["findings"])[1:-1]) == 1


def test_findings_with_prior_through_the_build_counts_studies_without_one(tmp_path, roots):
    spec = {"name": "t", "valid": 0.0, "sources": [
        {"dataset": "mimic_cxr_jpg", "root": roots["mimic_cxr_jpg"], "split": "all",
         "tasks": {"report_findings_with_prior": "all"}}]}
    m = build(spec, tmp_path / "mix", progress=False)
    counted = {c["what"]: c["records"] for c in m["counted"]}
    n = sum(c["records"] for c in m["counts"])
    recs = pd.read_parquet(tmp_path / "mix" / "records.parquet")
    fields = [json.loads(f) for f in recs["fields"]]
    with_prior = [f for f in fields if f["prior_study_id"] is not None]
    assert counted == {"with_prior": len(with_prior), "without_prior": n - len(with_prior)}
    assert with_prior and all((Path(roots["mimic_cxr_jpg"]) / p).is_file()
                              for f in with_prior for p in f["prior_image_paths"])
    # only a study with a prior is asked to compare with it
    asks = ["prior" in p.lower() for p in recs["prompt"]]
    assert asks == [f["prior_study_id"] is not None for f in fields] and 0 < sum(asks) < n
    # the study's other sections ride along for the formats (indication, impression, ...)
    assert all({"indication", "impression", "technique", "comparison", "history"} <= set(f)
               and "findings" not in f and f["sections"] == ["findings"] for f in fields)


def test_without_prior_skip_leaves_out_studies_without_one_and_counts_them(tmp_path, roots):
    """``without_prior: skip``: only studies with a prior become records; the others are
    skipped and counted (the default build above makes them plain findings records)."""
    spec = {"name": "t", "valid": 0.0, "without_prior": "skip", "sources": [
        {"dataset": "mimic_cxr_jpg", "root": roots["mimic_cxr_jpg"], "split": "all",
         "tasks": {"report_findings_with_prior": "all"}}]}
    m = build(spec, tmp_path / "mix", progress=False)
    plain = build({**spec, "without_prior": "plain"}, tmp_path / "plain", progress=False)
    recs = pd.read_parquet(tmp_path / "mix" / "records.parquet")
    fields = [json.loads(f) for f in recs["fields"]]
    assert len(recs) > 0 and all(f["prior_study_id"] is not None for f in fields)
    assert all("prior" in p.lower() for p in recs["prompt"])
    n_plain = sum(c["records"] for c in plain["counts"])
    without = {c["what"]: c["records"] for c in plain["counted"]}["without_prior"]
    assert sum(c["records"] for c in m["counts"]) == n_plain - without
    skipped = {e["reason"]: e["records"] for e in m["excluded"]
               if e["task"] == "report_findings_with_prior"}
    assert skipped.get("without_prior") == without > 0, m["excluded"]
    assert m["spec"]["without_prior"] == "skip" and "without_prior" not in plain["spec"]


def test_without_prior_takes_plain_or_skip_only():
    from radharmony.mixture.spec import MixtureSpecError, load_spec

    with pytest.raises(MixtureSpecError, match="without_prior"):
        load_spec({"name": "t", "without_prior": "drop", "sources": [
            {"dataset": "mimic_cxr_jpg", "root": "/x", "tasks": {"report_findings": "all"}}]})


def _raw(root: str, name: str) -> list[dict]:
    path = next(Path(root).rglob(name))
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_progression_per_labelled_finding_with_the_prior_image(tmp_path, roots):
    spec = {"name": "t", "valid": 0.0, "sources": [
        {"dataset": "ms_cxr_t", "root": roots["ms_cxr_t"], "tasks": {"progression": "all"}}]}
    build(spec, tmp_path / "mix", progress=False)
    recs = pd.read_parquet(tmp_path / "mix" / "records.parquet")
    want = sorted((r["dicom_id"], r["previous_dicom_id"], c[:-len("_progression")],
                   v.strip().lower())
                  for r in _raw(roots["ms_cxr_t"], "MS_CXR_T_temporal_image_classification*")
                  for c, v in r.items() if c.endswith("_progression") and v.strip())
    got = []
    for _, r in recs.iterrows():
        f = json.loads(r["fields"])
        assert r["target"] == f["progression"] and f["finding"].replace("_", " ") in r["prompt"].lower()
        got.append((Path(r["image_paths"][0]).stem, Path(f["prior_image_paths"][0]).stem,
                    f["finding"], r["target"]))
    assert sorted(got) == want and len(want) > 3


def test_difference_questions_carry_both_studies(tmp_path, roots):
    spec = {"name": "t", "valid": 0.0, "sources": [
        {"dataset": "medical_diff_vqa", "root": roots["medical_diff_vqa"], "split": "all",
         "tasks": {"vqa_difference": "all"}}]}
    build(spec, tmp_path / "mix", progress=False)
    recs = pd.read_parquet(tmp_path / "mix" / "records.parquet")
    pairs = [r for r in _raw(roots["medical_diff_vqa"], "mimic_pair_questions.csv")
             if r["question_type"] == "difference"]
    image = {r["study_id"]: r["dicom_id"] for r in _raw(roots["medical_diff_vqa"],
                                                        "mimic_all.csv")}
    assert len(recs) == len(pairs) > 0
    want = sorted((image[p["study_id"]], image[p["ref_id"]], p["ref_id"], p["answer"])
                  for p in pairs)
    got = []
    for _, r in recs.iterrows():
        f = json.loads(r["fields"])
        got.append((Path(r["image_paths"][0]).stem, Path(f["prior_image_paths"][0]).stem,
                    f["prior_study_id"], r["target"]))
    assert sorted(got) == want


def test_temporal_tasks_list_their_feeders():
    from radharmony.cli.mix import tasks_listing

    listed = {t["name"]: set(t["datasets"]) for t in tasks_listing()}
    assert listed["progression"] == {"ms_cxr_t"}
    assert listed["vqa_difference"] == {"medical_diff_vqa"}
    assert {"mimic_cxr_jpg", "rexgradient_train", "padchest"} <= \
        listed["report_findings_with_prior"]
    assert "chexpert" not in listed["report_findings_with_prior"]  # no date, no prior
