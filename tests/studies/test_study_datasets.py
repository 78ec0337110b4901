"""level="study" on every dataset the issue names, each on its replica in the real format."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
import torch

import radharmony
from radharmony.data.studies import PRIOR_KEYS, SAMPLE_KEYS, StudyDataset
from radharmony.errors import RadHarmonyError, StudyWarning
from radharmony.fake import make_fake
from radharmony.reports.format import section_text
from radharmony.studies import SECTION_KEYS
from radharmony.studies.priors import date_column, parse_date

KEYS = ("rexgradient_test", "mimic_cxr_jpg", "chexpert_plus", "openi", "padchest",
        "xraydar_multimodal", "brax", "vindr_pcxr")
FRONTAL_FIRST = ("PA", "AP", "LATERAL", "LL")


@pytest.fixture(scope="module", params=KEYS)
def case(request, tmp_path_factory):
    key = request.param
    kwargs = make_fake(key, tmp_path_factory.mktemp(key))
    return key, radharmony.get_dataset_class(key), kwargs


def _studies(cls, kwargs, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)  # counted in their own tests
        return cls(**kwargs, level="study", cache_dir=None, dtype=torch.float32, **kw)


def test_every_image_in_one_study_sections_never_none_text(case):
    key, cls, kwargs = case
    ds = _studies(cls, kwargs)
    assert isinstance(ds, StudyDataset) and 1 < len(ds) <= len(ds.images)
    ids = [sid for r in ds.index.rows for sid in ds.images.rows.ids[r]]
    assert len(ids) == len(set(ids)) == len(ds.images)  # every image in exactly one study
    st = ds.studies
    for k in SECTION_KEYS:
        for v in st[k]:
            assert v is None or (isinstance(v, str) and section_text(v) is not None), (key, k, v)
    df = ds.images.harmonized_df
    for i in (0, len(ds) - 1):
        s = ds[i]
        assert list(s) == list(SAMPLE_KEYS)
        n = int(s["img_mask"].sum())
        assert s["img"].shape == (ds.max_images, 1, 224, 224)
        assert n == len(s["views"]) == len(s["sample_ids"]) == st["n_images"][i]
        assert set(df.loc[df["sample_id"].isin(s["sample_ids"]), "study_id"]) == {s["study_id"]}
        rank = [FRONTAL_FIRST.index(v) if v in FRONTAL_FIRST else 4 for v in s["views"]]
        assert rank == sorted(rank)


def test_priors_are_earlier_studies_of_the_patient_or_a_clear_error(case):
    key, cls, kwargs = case
    image_level = cls(**kwargs, cache_dir=None)
    col = date_column(image_level.harmonized_df, cls.spec)
    if col is None:  # OpenI, X-Raydar, VinDr-PCXR ship no study date
        with pytest.raises(RadHarmonyError, match="prior=True needs a study date"):
            _studies(cls, kwargs, prior=True)
        return
    ds = _studies(cls, kwargs, prior=True)
    assert list(ds[0]) == [*SAMPLE_KEYS, *PRIOR_KEYS]
    df = ds.images.harmonized_df
    when = df.groupby("study_id")[col].first()
    read = (lambda v: float(v)) if col == "patient_report_date_order" else parse_date
    st = ds.studies
    pairs = st[st["prior_study_id"].notna()]
    for sid, prior, patient in zip(pairs["study_id"], pairs["prior_study_id"],
                                   pairs["patient_id"]):
        assert st.loc[st["study_id"] == prior, "patient_id"].item() == patient
        assert read(when[prior]) < read(when[sid]), (key, sid, prior)
    if col == "patient_report_date_order":  # an order, not a date
        assert pairs["prior_days"].isna().all()
    else:
        assert (pairs["prior_days"] > 0).all()
    if key in ("rexgradient_test", "mimic_cxr_jpg", "chexpert_plus", "padchest"):
        assert len(pairs), key  # their replicas hold patients with several studies


def test_chexpert_plus_sections_are_its_own_columns(tmp_path):
    from radharmony.datasets.chexpert_plus import CheXpertPlusDataset
    from radharmony.fake.chexpert_plus import write_chexpert_plus

    root = write_chexpert_plus(tmp_path, n_patients=6)
    ds = _studies(CheXpertPlusDataset, {"base_image_dir": root})
    raw = pd.read_csv(tmp_path / "df_chexpert_plus_240401.csv", dtype=str,
                      keep_default_na=False)
    raw["study_id"] = raw["path_to_image"].str.replace(r"^[^/]+/|/[^/]+$", "", regex=True)
    raw = raw.groupby("study_id").first()
    st = ds.studies.set_index("study_id")
    assert (st["section_source"] == "source").all()
    for sid, s in st.iterrows():
        r = raw.loc[sid]
        for key, col in (("findings", "section_findings"), ("impression", "section_impression"),
                         ("comparison", "section_comparison"),
                         ("technique", "section_technique")):
            assert s[key] == section_text(r[col]), (sid, key)
        # the history under either of its two headers
        assert s["history"] == (section_text(r["section_history"])
                                or section_text(r["section_clinical_history"])), sid
    # the replica's "COMPARISON: None." is no comparison, and its history is there
    assert st["comparison"].isna().sum() >= 2 and st["comparison"].notna().any()
    assert st["history"].notna().all()
    assert not st["comparison"].dropna().str.contains("PROCEDURE").any()
