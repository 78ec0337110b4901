"""Study-level samples on the real ReXGradient test excerpt and on replicas."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import radharmony
from radharmony.datasets.rexgradient import ReXGradientTestDataset, ReXGradientTrainDataset
from radharmony.errors import RadHarmonyError, StudyWarning
from radharmony.data.studies import PRIOR_KEYS, SAMPLE_KEYS, StudyDataset
from radharmony.studies import SECTION_KEYS
from radharmony.studies.index import build_index
from radharmony.studies.priors import find_priors

from study_fixtures import rex_fake, rex_real  # noqa: F401 (fixtures)

FIELDS = {"indication": "Indication", "comparison": "Comparison", "findings": "Findings",
          "impression": "Impression"}


def _expected(text):
    """The JSON field as a study section: None for null, NaN and "None"/"None."."""
    if text is None or isinstance(text, float):
        return None
    t = text.strip()
    bare = t.split(":", 1)[1].strip() if t.lower().startswith("comparison:") else t
    return None if bare.rstrip(".").strip().lower() in ("", "none") else t


def _real(rex_real, tmp_path, **kw):
    path, images, _ = rex_real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        return ReXGradientTestDataset(images, path, level="study", cache_dir=tmp_path,
                                      dtype=torch.float32, **kw)


def test_real_excerpt_sections_equal_the_json(rex_real, tmp_path):
    path, _, entries = rex_real
    ds = _real(rex_real, tmp_path, max_images=8, prior=True)
    assert isinstance(ds, StudyDataset) and len(ds) == 100
    assert sum(len(e["ImagePath"]) for e in entries.values()) == 162
    by_uid = {e["StudyInstanceUid"]: e for e in entries.values()}
    nones = 0
    for i in range(len(ds)):
        s = ds[i]
        assert list(s) == [*SAMPLE_KEYS, *PRIOR_KEYS]
        e = by_uid[s["study_id"]]
        for key, field in FIELDS.items():
            assert s[key] == _expected(e[field]), (s["study_id"], key)
            assert s[key] not in ("None", "None.")
        nones += s["comparison"] is None
        assert s["history"] is None and s["technique"] is None
        assert int(s["img_mask"].sum()) == len(e["ImagePath"]) == len(s["sample_ids"])
    assert nones > 10  # the excerpt's "None" / "None." comparisons really occur
    # every image in exactly one study
    ids = [sid for i in range(len(ds)) for sid in ds[i]["sample_ids"]]
    assert len(ids) == len(set(ids)) == 162 == len(ds.images)
    assert set(ids) == set(ds.images.sample_ids)
    assert (ds.studies["section_source"] == "source").all()


def test_real_excerpt_priors_stay_within_patient_and_past(rex_real, tmp_path):
    _, _, entries = rex_real
    ds = _real(rex_real, tmp_path, max_images=4, prior=True)
    by_uid = {e["StudyInstanceUid"]: e for e in entries.values()}
    st = ds.studies
    for sid, prior, days in zip(st["study_id"], st["prior_study_id"], st["prior_days"]):
        if prior is None:
            continue
        cur, pri = by_uid[sid], by_uid[prior]
        assert cur["PatientID"] == pri["PatientID"] and pri["StudyDate"] < cur["StudyDate"]
        assert days > 0
    # two patients have two studies each: GRDNEL87JLZSD8T7's on two days (one prior),
    # GRDNTJJKS40PWJ3G's on one day (neither is the other's prior)
    patients = pd.Series([e["PatientID"] for e in entries.values()])
    assert len(patients) - patients.nunique() == 2
    has = st[st["prior_study_id"].notna()]
    assert has["patient_id"].tolist() == ["GRDNEL87JLZSD8T7"] and has["prior_days"].tolist() == [163]
    # the sample carries that prior study's views, sections and images; others carry none
    i = int(has.index[0])
    s, p = ds[i], ds[int(np.flatnonzero(ds.study_ids == has["prior_study_id"].item())[0])]
    assert (s["prior_study_id"], s["prior_days"]) == (p["study_id"], 163)
    assert (s["prior_views"], s["prior_findings"], s["prior_impression"]) == \
        (p["views"], p["findings"], p["impression"])
    assert torch.equal(s["prior_img"], p["img"]) and torch.equal(s["prior_img_mask"],
                                                                 p["img_mask"])
    none = ds[(i + 1) % len(ds)]
    assert (none["prior_study_id"], none["prior_views"], none["prior_findings"],
            none["prior_impression"], none["prior_days"]) == (None, [], None, None, None)
    assert not none["prior_img_mask"].any() and (none["prior_img"] == -1).all()


def test_batch_equals_samples_and_collate(rex_fake, tmp_path):
    images = rex_fake / "deid_png"
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(images, meta, level="study", max_images=2, prior=True,
                                     cache_dir=tmp_path, dtype=torch.float32)
    one = [ds[i] for i in range(6)]
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=6,
                                                  collate_fn=radharmony.collate)))
    assert batch["img"].shape == (6, 2, 1, 224, 224) and batch["img_mask"].dtype == torch.bool
    for j, s in enumerate(one):
        assert torch.equal(batch["img"][j], s["img"])
        assert torch.equal(batch["prior_img"][j], s["prior_img"])
        assert batch["findings"][j] == s["findings"] and batch["views"][j] == s["views"]
    # padding is -1 and masked; the key image is a frontal when the study has one
    for s in one:
        n = int(s["img_mask"].sum())
        assert (s["img"][n:] == -1).all()
        if {"PA", "AP"} & set(s["views"]):
            assert s["views"][s["key_image"]] == ("PA" if "PA" in s["views"] else "AP")
        assert s["views"] == sorted(s["views"], key=lambda v: ("PA", "AP", "LATERAL",
                                                               "LL").index(v)
                                    if v in ("PA", "AP", "LATERAL", "LL") else 4)
    # the image-level dataset's cache is the one used: one entry per image, which a separately
    # built image-level dataset finds (and no other entry)
    img_level = ds.images
    assert img_level.image_cache is not None and len(img_level.cache_keys()) == len(img_level)
    for _ in torch.utils.data.DataLoader(ds, batch_size=8, collate_fn=radharmony.collate):
        pass
    kept = np.concatenate(ds.index.rows)  # the first K=2 images of each study
    entries = list(img_level.image_cache.images.glob("*/*.rhc"))
    assert len(entries) == len(kept) < len(img_level)
    plain = ReXGradientTrainDataset(images, meta, cache_dir=tmp_path, dtype=torch.float32)
    keys = plain.cache_keys()
    assert {plain.image_cache.entry_file(keys[i]) for i in kept} == set(entries)
    # samples of different K pad to the largest
    small = dict(one[0], img=one[0]["img"][:1], img_mask=one[0]["img_mask"][:1])
    mixed = radharmony.collate([small, one[1]])
    assert mixed["img"].shape == (2, 2, 1, 224, 224) and not mixed["img_mask"][0, 1]


def test_more_than_k_images_warns_once(rex_fake, tmp_path):
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    with pytest.warns(StudyWarning, match=r"studies have more than max_images=1") as rec:
        ds = ReXGradientTrainDataset(rex_fake / "deid_png", meta, level="study",
                                     max_images=1, cache_dir=None)
    assert len([w for w in rec if "max_images" in str(w.message)]) == 1
    assert ds[0]["img"].shape[0] == 1
    with pytest.raises(RadHarmonyError, match="max_images must be a positive integer"):
        ReXGradientTrainDataset(rex_fake / "deid_png", meta, level="study", max_images=0)
    with pytest.raises(RadHarmonyError, match="study-level options"):
        ReXGradientTrainDataset(rex_fake / "deid_png", meta, prior=True)


def test_splits_group_by_patient_and_keep_priors_inside(rex_fake, tmp_path):
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(rex_fake / "deid_png", meta, level="study",
                                     max_images=3, prior=True, cache_dir=None)
    folds = ds.get_folds(3)
    seen = []
    for train, val in folds:
        assert not set(train.studies["patient_id"]) & set(val.studies["patient_id"])
        for side in (train, val):
            ids = set(side.study_ids)
            assert set(side.studies["prior_study_id"].dropna()) <= ids
        seen += list(val.study_ids)
    assert sorted(seen) == sorted(ds.study_ids)
    # the same patients as image-level folds
    img_val = ds.images.get_folds(3)[0][1]
    assert set(folds[0][1].studies["patient_id"]) == set(img_val.harmonized_df["patient_id"])
    # get_datasets(n) is fold 0; train_transform runs on the train side's study samples only
    flip = lambda s: dict(s, img=s["img"].flip(-1))  # noqa: E731
    train, val = ds.get_datasets(3, train_transform=flip)
    assert list(train.study_ids) == list(folds[0][0].study_ids)
    assert list(val.study_ids) == list(folds[0][1].study_ids)
    assert torch.equal(train[0]["img"], folds[0][0][0]["img"].flip(-1))
    assert torch.equal(val[0]["img"], folds[0][1][0]["img"])
    whole = ds.get_datasets(train_transform=flip)
    assert len(whole) == len(ds) and torch.equal(whole[1]["img"], ds[1]["img"].flip(-1))


def _table(**cols):
    n = len(cols["study_id"])
    base = {"patient_id": ["p1"] * n, "view": ["PA"] * n, "report": ["FINDINGS: x"] * n}
    return pd.DataFrame({**base, **cols})


def test_bad_input_errors_and_counted_warnings():
    with pytest.raises(RadHarmonyError, match=r"1 studies have images of more than one "
                                              r"patient.*s1 \(patients \['p1', 'p2'\]\)"):
        build_index(_table(study_id=["s1", "s1", "s2"], patient_id=["p1", "p2", "p2"]),
                    max_images=2)
    with pytest.warns(StudyWarning, match=r"1 of 2 studies have a report without section "
                                          r"headers.*\['s2'\]"):
        ix = build_index(_table(study_id=["s1", "s2"], report=["FINDINGS: x", "Clear."]),
                         max_images=2)
    assert ix.sections[1] == dict.fromkeys(SECTION_KEYS) and ix.reports[1] == "Clear."
    # s1's two reports differ (counted); s2's frontal has none: its lateral's is the study's
    with pytest.warns(StudyWarning, match=r"1 of 2 studies have images with different "
                                          r"reports.*first image in view order.*\['s1'\]"), \
            pytest.warns(StudyWarning, match="2 of 2 studies have more than max_images=1"):
        ix = build_index(_table(study_id=["s1", "s1", "s2", "s2"], view=["LATERAL", "PA"] * 2,
                                report=["FINDINGS: b", "FINDINGS: a", "FINDINGS: c", None]),
                         max_images=1)
    assert ix.reports.tolist() == ["FINDINGS: a", "FINDINGS: c"]
    assert [s["findings"] for s in ix.sections] == ["a", "c"]
    df = _table(study_id=["a", "b", "c", "d"], patient_id=["p", "p", "p", "q"],
                study_date=[20200101, "2020-13-45", 20200301, 20200101])
    with pytest.warns(StudyWarning, match=r"1 studies have a study_date that cannot be read.*"
                                          r"b \('2020-13-45'\)"):
        prior, days = find_priors(np.arange(4), df["patient_id"].to_numpy(object),
                                  df["study_id"].to_numpy(object), df, None)
    assert prior.tolist() == [-1, -1, 0, -1] and days[2] == 60  # b is skipped, not guessed
    df = df.assign(study_date=[20200101, None, 20200301, "x"])
    with pytest.warns(StudyWarning, match=r"1 studies have a study_date that cannot be read as "
                                          r"a date and 1 have none.*first: \[\"d \('x'\)\", "
                                          r"'b \(no study_date\)'\]"):
        find_priors(np.arange(4), df["patient_id"].to_numpy(object),
                    df["study_id"].to_numpy(object), df, None)


def test_priors_never_future_never_same_day_never_other_patient():
    df = _table(study_id=list("abcde"), patient_id=["p", "p", "p", "p", "q"],
                study_date=[20200105, 20200101, 20200105, 20200110, 20200101])
    prior, days = find_priors(np.arange(5), df["patient_id"].to_numpy(object),
                              df["study_id"].to_numpy(object), df, None)
    # a and c share a day: both take b; d takes the later of the same-day pair (c, by id)
    assert prior.tolist() == [1, -1, 1, 2, -1]
    assert days[[0, 2, 3]].tolist() == [4, 4, 5]
    # MIMIC's study_time orders one day's studies: a (14:00) follows c (08:00), 0 days apart;
    # b and d share day and time: neither is the other's prior
    df = _table(study_id=list("abcd"), patient_id=["p"] * 4,
                study_date=[20200105, 20200106, 20200105, 20200106],
                study_time=[140000.0, 90000.0, 80000.0, 90000.0])
    prior, days = find_priors(np.arange(4), df["patient_id"].to_numpy(object),
                              df["study_id"].to_numpy(object), df, None)
    assert prior.tolist() == [2, 0, -1, 0] and days[[0, 1, 3]].tolist() == [0, 1, 1]
    # c's time unknown: its day is not ordered (c might be after a), the next day's b takes
    # the later of the tied pair (by id)
    df.loc[2, "study_time"] = np.nan
    prior, _ = find_priors(np.arange(4), df["patient_id"].to_numpy(object),
                           df["study_id"].to_numpy(object), df, None)
    assert prior.tolist() == [-1, 2, -1, 2]


def test_workers_give_the_same_batches(rex_fake, tmp_path):
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(rex_fake / "deid_png", meta, level="study", max_images=2,
                                     prior=True, cache_dir=tmp_path, dtype=torch.float32)
    kw = {"batch_size": 5, "collate_fn": radharmony.collate}
    ref = list(torch.utils.data.DataLoader(ds, **kw))
    got = list(torch.utils.data.DataLoader(ds, num_workers=2, **kw))
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert torch.equal(a["img"], b["img"]) and torch.equal(a["prior_img"], b["prior_img"])
        assert a["study_id"] == b["study_id"] and torch.equal(a["img_mask"], b["img_mask"])


def test_view_order_sorts_then_table_order_and_key_image_is_the_pa():
    df = _table(study_id=["s"] * 4, view=["AP", "LATERAL", "PA", "LL"])
    with pytest.warns(StudyWarning, match=r"1 of 1 studies have more than max_images=3 images; "
                                          r"each keeps its first 3 in view order "
                                          r"\('LATERAL', 'PA'\) \(1 images left out\)"):
        ix = build_index(df, max_images=3, view_order=("LATERAL", "PA"))
    assert ix.rows[0].tolist() == [1, 2, 0] and ix.key_image.tolist() == [1]
    assert ix.n_images.tolist() == [4]
    ix = build_index(df, max_images=None)  # the default order, K = the largest study
    assert ix.rows[0].tolist() == [2, 0, 1, 3] and ix.key_image.tolist() == [0]
    ix = build_index(df.assign(view=["AP", "LATERAL", None, "AP"]), max_images=4)
    assert ix.rows[0].tolist() == [0, 3, 1, 2] and ix.key_image.tolist() == [0]  # first AP
    from radharmony.studies.index import check_view_order
    with pytest.raises(RadHarmonyError, match="view_order must be a sequence of view names"):
        check_view_order("PA")
