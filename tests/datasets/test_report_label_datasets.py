"""labels="report": datasets with reports take CheXpert labels from them (spec, table, cache)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony import vocabulary
from radharmony.datasets import chexpert, report_labels
from radharmony.datasets.mimic import MIMICCXRJPGDataset, MIMICCXRJPGHarmonizer
from radharmony.datasets.openi import OpenIDataset, OpenIHarmonizer
from radharmony.datasets.rexgradient import (ReXGradientTestDataset, ReXGradientTrainDataset,
                                             ReXGradientTrainHarmonizer, ReXGradientValidDataset)
from radharmony.datasets.xraydar import XRaydarMultimodalHarmonizer
from radharmony.errors import RadHarmonyError
from radharmony.fake.mimic import write_mimic
from radharmony.fake.openi import write_openi
from radharmony.fake.rexgradient import write_rexgradient
from radharmony.fake.xraydar import write_xraydar
from radharmony.reports import label_reports, labeler_key


def expected(df: pd.DataFrame) -> np.ndarray:
    return label_reports(df["report"].reset_index(drop=True))[list(chexpert.LABELS)].to_numpy()


@pytest.fixture(scope="module")
def rex(tmp_path_factory):
    return write_rexgradient(tmp_path_factory.mktemp("rex"), images=True, image_size=(64, 48),
                             studies={"train": 6, "valid": 3, "test": 3})


@pytest.mark.parametrize("cls", [ReXGradientTrainDataset, ReXGradientValidDataset,
                                 ReXGradientTestDataset])
def test_rexgradient_output_cls_from_reports(rex, cls):
    ds = cls(rex, labels="report", output_cls=True, cache_dir=None, dtype=torch.float32)
    assert ds.spec.label_cols == chexpert.LABELS and "cls" in ds.outputs
    assert ds.spec.key == cls.spec.key and cls.spec.label_cols == ()  # instance-level spec
    vocabulary.check_label_map(ds.spec)
    assert ds.spec.label_map == chexpert.LABEL_MAP
    df = ds.harmonized_df
    np.testing.assert_array_equal(df[list(chexpert.LABELS)].to_numpy(), expected(df))
    sample = ds[0]
    assert sample["cls"].shape == (14,)
    np.testing.assert_array_equal(sample["cls"].numpy(), np.nan_to_num(expected(df)[0]))  # NaN: 0


def test_rexgradient_default_is_unchanged(rex):
    with pytest.warns(UserWarning, match="does not support output_cls"):
        ds = ReXGradientTrainDataset(rex, output_cls=True, cache_dir=None)
    assert ds.spec.label_cols == () and "cls" not in ds.outputs
    assert not set(chexpert.LABELS) & set(ds.harmonized_df.columns)
    assert "labels" not in ds.harmonizer.arguments()


def test_hand_written_report_row(tmp_path):
    root = write_rexgradient(tmp_path, images=False, studies={"train": 2})
    h = ReXGradientTrainHarmonizer(base_image_dir=root, labels="report")
    raw = {"p1_a1_s1": {"PatientID": "p1", "StudyInstanceUid": "s1", "AccessionNumber": "a1",
                        "ImagePath": ["../deid_png/x.png"], "ImageViewPosition": ["PA"],
                        "Indication": "Rule out pneumonia.", "Comparison": None,
                        "Findings": "No pneumothorax. Small left effusion.",
                        "Impression": "Cardiomegaly."}}
    df = type(h).harmonize_raw(raw)
    row = report_labels.report_label_columns(df["report"]).iloc[0]
    assert row["Pleural Effusion"] == 1 and row["Pneumothorax"] == 0
    assert row["Cardiomegaly"] == 1 and np.isnan(row["Pneumonia"])  # indication: no label


def test_openi_mimic_xraydar_replace_their_label_columns(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        openi = OpenIDataset(write_openi(tmp_path / "o", images=False), labels="report",
                             cache_dir=None).harmonized_df
        mimic = MIMICCXRJPGHarmonizer(base_image_dir=write_mimic(tmp_path / "m", images=False),
                                      labels="report").harmonize()
    xr = XRaydarMultimodalHarmonizer(base_image_dir=write_xraydar(tmp_path / "x", n=4,
                                                                  images=False),
                                     labels="report").harmonize()
    for df, own in ((openi, OpenIHarmonizer.spec), (mimic, MIMICCXRJPGHarmonizer.spec),
                    (xr, XRaydarMultimodalHarmonizer.spec)):
        start = list(df.columns).index("report") + 1  # label columns follow the required ones
        assert list(df.columns[start:start + 14]) == list(chexpert.LABELS)
        assert not set(own.label_cols) - set(chexpert.LABELS) & set(df.columns)
        np.testing.assert_array_equal(df[list(chexpert.LABELS)].to_numpy(), expected(df))
    assert mimic["report"].isna().any()  # a study without its report: all NaN
    assert mimic.loc[mimic["report"].isna(), list(chexpert.LABELS)].isna().all().all()


def test_labeler_key_in_arguments_and_rule_change_is_a_cache_miss(tmp_path):
    root = write_rexgradient(tmp_path / "r", images=False, studies={"train": 4})
    rules = tmp_path / "extra.tsv"
    rules.write_text("finding\tkind\tpattern\n")
    cache = tmp_path / "cache"

    def table():
        h = ReXGradientTrainHarmonizer(base_image_dir=root, labels="report", report_rules=rules)
        return h, h.harmonize(cache_dir=cache)

    h1, t1 = table()
    assert h1.arguments()["labeler"] == labeler_key([rules])
    assert h1.arguments()["labeler"].startswith("report-labels-")
    # a rule that makes "lungs" an edema mention: the cached table must not be reused
    rules.write_text("finding\tkind\tpattern\nedema\tmention\tlungs\n")
    h2, t2 = table()
    assert h2.arguments()["labeler"] != h1.arguments()["labeler"]
    lungs = t2["report"].str.contains("The lungs are clear", na=False, regex=False)
    assert lungs.any() and (t2.loc[lungs, "Edema"] == 1).all()
    assert t1.loc[lungs, "Edema"].isna().all()
    # unchanged rules: served from the cache (same table, no relabelling)
    h3, t3 = table()
    pd.testing.assert_frame_equal(t2, t3)


def test_saved_report_table_round_trips(tmp_path):
    from radharmony import load_harmonizer

    root = write_rexgradient(tmp_path / "r", images=False, studies={"train": 3})
    h = ReXGradientTrainHarmonizer(base_image_dir=root, labels="report")
    path = h.save(tmp_path / "t.parquet")
    back = load_harmonizer(path)
    assert back.spec.label_cols == chexpert.LABELS and back.labeler == h.labeler
    pd.testing.assert_frame_equal(back.harmonize(), h.harmonize())


def test_a_saved_harmonizer_brings_its_labels_and_image_root(rex, tmp_path):
    """``Dataset(harmonizer_path=)`` without ``base_image_dir`` or ``labels=``: the root and
    the report labels come from the save; ``labels="report"`` on an unlabelled save says so."""
    labelled = ReXGradientTrainHarmonizer(base_image_dir=rex, labels="report")
    path = labelled.save(tmp_path / "labelled.parquet")
    for kwargs in ({}, {"labels": "report"}):
        ds = ReXGradientTrainDataset(harmonizer_path=path, output_cls=True, cache_dir=None,
                                     **kwargs)
        assert ds.base_image_dir == rex and ds.spec.label_cols == chexpert.LABELS
        assert ds[0]["cls"].shape == (14,)
    plain = ReXGradientTrainHarmonizer(base_image_dir=rex).save(tmp_path / "plain.parquet")
    with pytest.raises(RadHarmonyError, match="made without labels='report'"):
        ReXGradientTrainDataset(harmonizer_path=plain, labels="report", cache_dir=None)


def test_bad_arguments():
    with pytest.raises(RadHarmonyError, match="labels must be one of"):
        ReXGradientTrainHarmonizer("x.json", labels="chexbert")
    with pytest.raises(RadHarmonyError, match="without labels='report'"):
        ReXGradientTrainHarmonizer("x.json", report_rules="r.tsv")
    h = ReXGradientTrainHarmonizer("x.json", labels="report", labeler="report-labels-0-old")
    with pytest.raises(RadHarmonyError, match="made with labeler"):
        h._harmonize_inputs(None)


def test_report_probable_positive(tmp_path):
    """report_probable="positive": probable hedges 1; its own cache entry; saved and loaded."""
    from radharmony import load_harmonizer
    from radharmony.reports import label_reports

    import json

    root = write_rexgradient(tmp_path / "r", images=False, studies={"train": 12})
    meta = root.parent / "download" / "metadata" / "train_metadata_view_position.json"
    studies = json.loads(meta.read_text())
    hedges = ["Probable small left effusion.", "Atelectasis versus scar.",
              "Borderline heart size.", "Possible small effusion."]
    for i, entry in enumerate(studies.values()):
        entry["Impression"] = hedges[i % len(hedges)]
    meta.write_text(json.dumps(studies))
    cache = tmp_path / "cache"
    plain = ReXGradientTrainHarmonizer(base_image_dir=root, labels="report")
    graded = ReXGradientTrainHarmonizer(base_image_dir=root, labels="report",
                                        report_probable="positive")
    assert "report_probable" not in plain.arguments()
    assert graded.arguments()["report_probable"] == "positive"
    t_plain, t_graded = plain.harmonize(cache_dir=cache), graded.harmonize(cache_dir=cache)
    want = label_reports(t_graded["report"].reset_index(drop=True), probable="positive")
    np.testing.assert_array_equal(t_graded[list(chexpert.LABELS)].to_numpy(),
                                  want[list(chexpert.LABELS)].to_numpy())
    a, b = t_plain[list(chexpert.LABELS)].to_numpy(), t_graded[list(chexpert.LABELS)].to_numpy()
    moved = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    assert moved.any()  # the probable hedges written above
    assert (a[moved] == -1).all() and (b[moved] == 1).all()
    back = load_harmonizer(graded.save(tmp_path / "g.parquet"))
    assert back.report_probable == "positive"
    ds = ReXGradientTrainDataset(root, labels="report", report_probable="positive",
                                 cache_dir=None)
    assert ds.harmonizer.report_probable == "positive"
    with pytest.raises(RadHarmonyError, match="report_probable"):
        ReXGradientTrainHarmonizer("x.json", labels="report", report_probable="maybe")
    with pytest.raises(RadHarmonyError, match="without labels='report'"):
        ReXGradientTrainHarmonizer("x.json", report_probable="positive")
    with pytest.raises(RadHarmonyError, match="without labels='report'"):
        ReXGradientTrainDataset(root, report_probable="positive", cache_dir=None)
