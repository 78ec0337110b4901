"""The label kinds beside ``cls``: ``reg`` (regression targets), ``grade`` (a finding's severity
0-4) and ``side`` (left / right / both), each with its mask, through the schema, samples,
collate, merge, the WebDataset export and the evaluators; hand rows, values written out."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import radharmony
from radharmony import merge
from radharmony.data.dataset import BaseRadiologicalDataset
from radharmony.errors import SchemaError, UnsupportedOutputWarning
from radharmony.evaluate import regression_scores, side_scores
from radharmony.registry import get_harmonizer_class
from radharmony.spec import DatasetSpec
from radharmony.table.schema import validate
from radharmony.vocabulary import VocabularyError, check_kinds

NAN = float("nan")

#: a dataset that grades two findings and gives the side of one
GRADED = DatasetSpec(key="graded", title="graded", label_cols=("Effusion",),
                     label_map={"Effusion": (("pleural_effusion", "exact"),)},
                     extra_cols=("pleural_effusion_grade", "cardiomegaly_grade",
                                 "pleural_effusion_side"),
                     grades=("pleural_effusion", "cardiomegaly"), sides=("pleural_effusion",),
                     outputs=frozenset({"cls", "grade", "side"}))
GRADED_ROWS = pd.DataFrame({
    "patient_id": ["p1", "p1", "p2"], "study_id": ["s1", "s2", "s3"],
    "image_path": ["a.png", "b.png", "c.png"], "view_position": None, "report": None,
    "Effusion": [1.0, 0.0, NAN],
    "pleural_effusion_grade": [3.0, 0.0, NAN], "cardiomegaly_grade": [NAN, 1.0, 4.0],
    "pleural_effusion_side": ["left", None, None]})
BONE_ROWS = pd.DataFrame({
    "patient_id": ["1", "2"], "study_id": ["1", "2"], "image_path": ["1.png", "2.png"],
    "view_position": None, "report": None, "bone_age_months": [180.0, NAN],
    "patient_sex": ["M", "F"], "split": ["train", "test"], "split_raw": ["train", "test"]})


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Small PNGs for both hand tables: ``<root>/graded/``, ``<root>/bones/``."""
    from radharmony.fake.images import synthetic_cxr, write_png

    out = tmp_path_factory.mktemp("kinds")
    rng = np.random.default_rng(0)
    for folder, rows in (("graded", GRADED_ROWS), ("bones", BONE_ROWS)):
        for name in rows["image_path"]:
            write_png(out / folder / name, synthetic_cxr(64, 64, rng=rng, bits=8))
    return out


def graded(root=None, **kw) -> BaseRadiologicalDataset:
    kw.setdefault("cache_dir", None)
    return BaseRadiologicalDataset(f"{root or '/data'}/graded", harmonized_df=GRADED_ROWS,
                                   spec=GRADED, **kw)


def bones(root=None, **kw) -> BaseRadiologicalDataset:
    kw.setdefault("cache_dir", None)
    return BaseRadiologicalDataset(f"{root or '/data'}/bones", harmonized_df=BONE_ROWS,
                                   spec=get_harmonizer_class("rsna_bone_age").spec, **kw)


# -- the table ------------------------------------------------------------------------------------
@pytest.mark.parametrize("column, value, match", [
    ("pleural_effusion_grade", 5.0, "grade 0-4"), ("pleural_effusion_grade", 2.5, "grade 0-4"),
    ("pleural_effusion_side", "L", "one of \\('left', 'right', 'both'\\)"),
])
def test_the_schema_refuses_values_out_of_their_kind(column, value, match):
    bad = GRADED_ROWS.copy()
    bad.loc[0, column] = value
    with pytest.raises(SchemaError, match=match):
        validate(bad, GRADED)


def test_the_schema_refuses_a_bone_age_that_is_not_a_number_and_undeclared_columns():
    bad = BONE_ROWS.copy()
    bad["bone_age_months"] = ["old", "1"]
    with pytest.raises(SchemaError, match="'bone_age_months'.*a number"):
        validate(bad, get_harmonizer_class("rsna_bone_age").spec)
    loose = DatasetSpec(key="x", title="x", grades=("cardiomegaly",))
    with pytest.raises(SchemaError, match="outside extra_cols.*cardiomegaly_grade"):
        validate(GRADED_ROWS, loose)


def test_kinds_must_be_canonical():
    check_kinds(GRADED)
    for spec in (DatasetSpec(key="x", title="x", reg_cols=("age_in_months",)),
                 DatasetSpec(key="x", title="x", sides=("effusion",))):
        with pytest.raises(VocabularyError, match="canonical names"):
            check_kinds(spec)
    for key in radharmony.list_datasets():  # every built-in dataset's kinds are canonical
        check_kinds(get_harmonizer_class(key).spec)


# -- samples and collate --------------------------------------------------------------------------
def test_grade_and_side_with_their_masks():
    ds = graded(output_grade=True, output_side=True, output_cls=True)
    from radharmony.data.sampling import batch_outputs, reg_targets, side_targets

    g, gm = reg_targets(ds.rows.grades)
    assert g.tolist() == [[3.0, 0.0], [0.0, 1.0], [0.0, 4.0]]
    assert gm.tolist() == [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
    s, sm = side_targets(ds.rows.sides)
    assert s.tolist() == [[[1.0, 0.0]], [[0.0, 0.0]], [[0.0, 0.0]]]
    assert sm.tolist() == [[1.0], [0.0], [0.0]]  # a side not said is masked, never "none"
    out = batch_outputs(ds, np.array([2, 0]))
    assert out["grade"].tolist() == [[0.0, 4.0], [3.0, 0.0]]
    assert out["side"].shape == (2, 1, 2) and out["side_mask"].tolist() == [[0.0], [1.0]]
    assert set(out) == {"cls", "cls_mask", "grade", "grade_mask", "side", "side_mask"}


def test_flags_a_dataset_lacks_warn_and_add_nothing():
    with pytest.warns(UnsupportedOutputWarning, match="output_reg"):
        ds = graded(output_reg=True)
    assert "reg" not in ds.outputs


# -- merge ----------------------------------------------------------------------------------------
def test_a_merge_masks_what_a_source_lacks_and_never_invents_a_side(root):
    flags = dict(output_cls=True, output_grade=True, output_side=True, output_reg=True,
                 dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedOutputWarning)
        g, b = graded(root, **flags), bones(root, **flags)
    m = merge([g, b], findings=["pleural_effusion", "hydropneumothorax", "cardiomegaly"])
    df = m.harmonized_df
    assert m.spec.reg_cols == ("bone_age_months",)
    assert m.spec.grades == ("pleural_effusion", "cardiomegaly")
    assert m.spec.sides == ("pleural_effusion",)  # none for hydropneumothorax: nobody said
    assert df["bone_age_months"].isna().tolist() == [True, True, True, False, True]
    assert df["bone_age_months"].tolist()[3] == 180.0
    assert df["pleural_effusion_side"].tolist() == ["left", None, None, None, None]
    assert df["cardiomegaly_grade"].isna().tolist() == [True, False, False, True, True]
    assert {"cls", "reg", "grade", "side"} <= m.outputs
    bone = m[3]
    assert bone["reg"].tolist() == [180.0] and bone["reg_mask"].tolist() == [1.0]
    assert bone["grade_mask"].tolist() == [0.0, 0.0] and bone["side_mask"].tolist() == [0.0]
    first = m[0]
    assert first["reg_mask"].tolist() == [0.0] and first["side"].tolist() == [[1.0, 0.0]]
    assert first["grade"].tolist() == [3.0, 0.0] and first["grade_mask"].tolist() == [1.0, 0.0]
    batch = radharmony.collate(m.__getitems__([0, 3]))
    assert batch["reg"].shape == (2, 1) and batch["side"].shape == (2, 1, 2)
    with pytest.warns(UnsupportedOutputWarning, match="\\['side'\\]"):
        only = merge([g], findings=["cardiomegaly"])  # grades of findings not kept: dropped
    assert only.spec.grades == ("cardiomegaly",) and only.spec.sides == ()


def test_sources_may_differ_in_the_new_flags_but_not_in_the_others():
    g = graded(output_cls=True, output_grade=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedOutputWarning)
        b = bones(output_cls=True, output_reg=True)
    m = merge([g, b], findings=["pleural_effusion"])
    assert "side" not in m.outputs and {"reg", "grade"} <= m.outputs
    other = BaseRadiologicalDataset("/data/other", harmonized_df=GRADED_ROWS, cache_dir=None,
                                    spec=dataclasses.replace(GRADED, key="other"))
    with pytest.raises(radharmony.RadHarmonyError, match="output flags"):
        merge([graded(output_cls=True), other])  # both have labels: cls must agree


# -- the evaluators -------------------------------------------------------------------------------
def test_mae_by_hand_and_the_patient_bootstrap():
    pred = [[130.0], [100.0], [52.0], [60.0]]
    target = [[120.0], [100.0], [50.0], [NAN]]
    t = regression_scores(pred, target, groups=["a", "a", "b", "c"], names=["bone_age_months"],
                          n_bootstrap=200, seed=1)
    row = t.set_index("metric").loc["mae"]
    assert row["value"] == pytest.approx(4.0)  # (10 + 0 + 2) / 3; the NaN target is unknown
    assert row["n"] == 3 and row["n_patients"] == 2
    assert 0.0 <= row["ci_low"] <= row["value"] <= row["ci_high"] <= 5.0
    # a patient's images move together: the resamples' MAE is 5 (patient a), 2 (b), or mixes
    # of the two weighted by image counts -- never 10 (one of a's images alone)
    assert t.set_index("metric").loc["bias", "value"] == pytest.approx(4.0)
    masked = regression_scores(pred, [[120.0], [100.0], [50.0], [70.0]], groups=list("aabc"),
                               mask=[[1], [1], [1], [0]], n_bootstrap=0)
    assert masked.set_index("metric").loc["mae", "value"] == pytest.approx(4.0)


def test_grades_score_exact_and_within_one_and_sides_their_accuracy():
    t = regression_scores([0.2, 2.6, 1.4, 4.0], [0, 2, 3, NAN], groups=list("abcd"),
                          ordinal=True, n_bootstrap=0)
    v = t.set_index("metric")["value"]
    assert v["exact"] == pytest.approx(1 / 3) and v["within_one"] == pytest.approx(2 / 3)
    pred = np.array([[[0.9, 0.1]], [[0.8, 0.7]], [[0.2, 0.9]]])
    target = np.array([[[1, 0]], [[1, 0]], [[0, 0]]], np.float32)
    s = side_scores(pred, target, mask=[[1], [1], [0]], groups=list("abc"),
                    names=["pleural_effusion"], n_bootstrap=0).set_index("metric")["value"]
    assert s["accuracy"] == 0.5 and s["left"] == 1.0 and s["right"] == 0.5
    empty = regression_scores([1.0], [NAN], groups=["a"], n_bootstrap=0)
    assert (empty["reason"] == "no known target").all()


# -- the export -----------------------------------------------------------------------------------
def test_the_webdataset_export_keeps_every_kind(root, tmp_path):
    import tarfile

    from radharmony.export import decode_sample, to_webdataset

    ds = graded(root, output_grade=True, output_side=True, dtype=torch.float32)
    to_webdataset(ds, tmp_path / "out", shard_size=10, progress=False)
    shard = next((tmp_path / "out").glob("*.tar"))
    with tarfile.open(shard) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    raw = {"__key__": "000000000"}
    raw.update({n.split(".", 1)[1]: b for n, b in members.items() if n.startswith("000000000")})
    got = decode_sample(raw)
    want = ds[0]
    for k in ("grade", "grade_mask", "side", "side_mask"):
        assert torch.equal(got[k], want[k]), k


# -- radharmony info ------------------------------------------------------------------------------
def test_info_counts_targets_grades_and_sides():
    from radharmony.cli.commands import _info_text, table_info

    info = table_info(validate(GRADED_ROWS, GRADED), spec=GRADED)
    assert info["grades"]["pleural_effusion"] == {"0": 1, "1": 0, "2": 0, "3": 1, "4": 0,
                                                  "missing": 1}
    assert info["sides"] == {"pleural_effusion": {"left": 1}}
    spec = get_harmonizer_class("rsna_bone_age").spec
    bone = table_info(validate(BONE_ROWS, spec), spec=spec)
    assert bone["targets"] == {"bone_age_months": {"known": 1, "mean": 180.0, "min": 180.0,
                                                   "max": 180.0}}
    text = _info_text([{**info, "key": "graded", "metadata": "x.csv"},
                       {**bone, "key": "rsna_bone_age", "metadata": "y.csv"}])
    assert "bone_age_months: 1 known, mean 180, 180 to 180" in text
    assert "left 1" in text
