"""The trainer formats over a mixture *built* from fakes (MIMIC-CXR-JPG and ReXGradient report
tasks, with and without the prior study): each input a format carries is filled from what the
build wrote -- the report's indication and impression, the prior study's image, report and
interval -- and a record a trainer cannot take is skipped and counted."""

from __future__ import annotations

import json
import os
import warnings

import pandas as pd
import pytest

from radharmony.fake import make_fake
from radharmony.mixture.builder import build
from radharmony.mixture.formats import export_mixture
from trainer_readers import (read_hf_chat, read_llava, read_llava_rad, read_maira2,
                             read_onevision)

TASKS = {"mimic_cxr_jpg": {"report_findings_with_prior": "all", "report_findings": "all",
                           "report_impression": "all"},
         "rexgradient_train": {"report_findings_indication": "all",
                               "report_findings_with_prior": "all"}}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("built")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        roots = {k: str(make_fake(k, base / k)["base_image_dir"]) for k in TASKS}
    spec = {"name": "f", "seed": 2, "valid": 0.3, "sources": [
        {"dataset": k, "root": roots[k], "split": "all", "tasks": t} for k, t in TASKS.items()]}
    build(spec, base / "mix", progress=False)
    recs = pd.read_parquet(base / "mix" / "records.parquet")
    recs["f"] = [json.loads(f) for f in recs["fields"]]
    return base / "mix", recs, roots


def _export(mix, fmt, dest, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ReXGradient's 16-bit PNGs
        return export_mixture(mix, fmt, dest, progress=False, **kw)


def _with_prior(recs):
    return recs[[bool(f.get("prior_image_paths")) for f in recs["f"]]]


def test_indication_and_impression_reach_llava_rad_and_maira2(built, tmp_path):
    mix, recs, _ = built
    by_id = recs.set_index("record_id")
    _export(mix, "llava-rad", tmp_path / "rad.json")
    rad = {e["id"]: e for e, _ in read_llava_rad(tmp_path / "rad.json", "/")}
    shown = [i for i in rad if by_id.loc[i, "task"] == "report_findings_indication"]
    assert shown and all(rad[i]["reason"] == rad[i]["indication"] ==
                         by_id.loc[i, "prompt"].split("\n")[0][len("Indication: "):]
                         for i in shown)
    # MIMIC's fake: every study's indication "___F with cough", impression in the report
    mimic = [i for i in rad if by_id.loc[i, "source"] == "mimic_cxr_jpg"]
    assert mimic and all(rad[i]["indication"] == "___F with cough" for i in mimic)
    assert all(rad[i]["impression"] == "No acute cardiopulmonary process." for i in mimic)
    _export(mix, "maira2", tmp_path / "m.jsonl")
    maira = read_maira2(tmp_path / "m.jsonl")
    assert all(m["indication"] == by_id.loc[m["id"], "f"]["indication"] for m in maira)
    assert sum(m["indication"] is not None for m in maira) > 10


def test_the_prior_is_an_image_for_multi_image_trainers(built, tmp_path):
    mix, recs, roots = built
    prior = _with_prior(recs)
    assert len(prior) == 4  # 2 MIMIC, 2 ReXGradient studies have a prior
    _export(mix, "hf-chat", tmp_path / "c.jsonl")
    chat = {r["id"]: r for r in read_hf_chat(tmp_path / "c.jsonl")}
    _export(mix, "llava-onevision", tmp_path / "ov.json")
    ov = {e["id"]: (e, files) for e, files in read_onevision(tmp_path / "ov.json", "/")}
    for _, r in prior.iterrows():
        f, root = r["f"], roots[r["source"]]
        want = [os.path.join(root, p) for p in list(r["image_paths"]) + f["prior_image_paths"]]
        assert chat[r["record_id"]]["images"] == want and ov[r["record_id"]][1] == want
        days = f"{f['days']} day" + ("" if f["days"] == 1 else "s")
        words = f"The last image is the prior study's, {days} earlier.\n" + (
            f"Prior findings: {f['prior_report']}\n" if f["prior_report"] else "")
        text = chat[r["record_id"]]["messages"][0]["content"][-1]["text"]
        assert text == words + r["prompt"] and "prior" in r["prompt"]
        human = ov[r["record_id"]][0]["conversations"][0]["value"]
        assert human == "<image>\n" * len(want) + words + r["prompt"]
    # a record without a prior neither gets one nor is told of one
    alone = recs[(recs["task"] == "report_findings_with_prior")
                 & ~recs["record_id"].isin(prior["record_id"])]
    assert len(alone) == 15 and not any("prior" in p.lower() for p in alone["prompt"])
    assert all(len(chat[i]["images"]) == len(recs.set_index("record_id").loc[i, "image_paths"])
               for i in alone["record_id"])


def test_one_image_trainers_skip_and_count_records_with_a_prior(built, tmp_path):
    mix, recs, _ = built
    prior = set(_with_prior(recs)["record_id"])
    s = _export(mix, "llava", tmp_path / "l.json")
    assert s["skipped"]["needs the prior image (one-image trainer)"] == len(prior)
    assert not prior & {e["id"] for e, _ in read_llava(tmp_path / "l.json", "/")}
    s = _export(mix, "llava-rad", tmp_path / "r.json")
    assert s["skipped"]["needs the prior image (one-image trainer)"] == len(prior)


def test_maira2_fills_the_prior_frontal_and_report(built, tmp_path):
    mix, recs, roots = built
    _export(mix, "maira2", tmp_path / "m.jsonl")
    maira = {m["id"]: m for m in read_maira2(tmp_path / "m.jsonl")}
    with_prior = _with_prior(recs)
    assert set(with_prior["record_id"]) <= set(maira)
    for _, r in with_prior.iterrows():
        m, f = maira[r["record_id"]], r["f"]
        assert m["prior_frontal"] == os.path.join(roots[r["source"]], f["prior_image_paths"][0])
        assert m["prior_report"] == f["prior_report"] and "prior_frontal" not in m["absent"]
    # every findings-with-prior record with a frontal image is report generation for MAIRA-2
    from radharmony.mixture.images import key_frontal

    temporal = recs[recs["task"] == "report_findings_with_prior"]
    frontal = [key_frontal(list(v)) is not None for v in temporal["views"]]
    assert set(temporal.loc[frontal, "record_id"]) <= set(maira) and sum(frontal) > 10
