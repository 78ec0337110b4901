"""radharmony.merge: hand rows pinning the label traps through a merge, patients namespaced and
joined through NIH ids, splits, shared caches, batched reads and the errors."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import radharmony
from radharmony import CachedLoader, merge
from radharmony.combine import MergeError, MergedDataset
from radharmony.data.dataset import BaseRadiologicalDataset
from radharmony.errors import RadHarmonyError
from radharmony.imaging.pipeline import DefaultTransform
from radharmony.registry import get_harmonizer_class
from radharmony.vocabulary import FINDINGS, VocabularyError

NAN = float("nan")


def spec(key):
    return get_harmonizer_class(key).spec


def table(key, rows: list[dict], fill: float = 0.0) -> pd.DataFrame:
    """A harmonized table of ``key`` from hand rows: ids given, other labels ``fill``."""
    s = spec(key)
    out = pd.DataFrame(rows)
    if "study_id" not in out:  # NIH's study is the image (its id_col); others: patient/path
        out["study_id"] = out["image_path"].str.replace(r"\.\w+$", "", regex=True) \
            if key.startswith("nih") else out["patient_id"] + "/" + out["image_path"]
    for c in ("view_position", "report"):
        if c not in out:
            out[c] = None
    for c in s.label_cols:
        if c not in out:
            out[c] = fill
    for c in s.extra_cols:
        if c not in out:
            out[c] = None
    return out


def dataset(key, rows, root="/data", fill=0.0, **kw) -> BaseRadiologicalDataset:
    kw.setdefault("cache_dir", None)
    return BaseRadiologicalDataset(f"{root}/{key}", harmonized_df=table(key, rows, fill),
                                   spec=spec(key), **kw)


def row(merged, sample_id) -> pd.Series:
    df = merged.harmonized_df
    return df.loc[df["sample_id"] == sample_id].iloc[0]


# -- the label traps, through merge ---------------------------------------------------------------
def test_nih_normal_row_makes_no_negatives_for_chexpert_only_findings():
    nih = dataset("nih_cxr14", [{"patient_id": "00000001", "image_path": "00000001_000.png"}])
    chx = dataset("chexpert", [{"patient_id": "patient1", "image_path": "train/p1/s1/v.jpg",
                                "No Finding": NAN, "Fracture": 1.0, "Support Devices": NAN,
                                "Atelectasis": -1.0, "Cardiomegaly": NAN, "Edema": NAN,
                                "Enlarged Cardiomediastinum": NAN, "Lung Lesion": NAN}])
    m = merge([nih, chx])
    n = row(m, "nih_cxr14:00000001_000")
    assert n["atelectasis"] == 0.0 and n["nodule"] == 0.0 and n["nodule_or_mass"] == 0.0
    for f in ("fracture", "support_devices", "no_finding", "enlarged_cardiomediastinum"):
        assert np.isnan(n[f]), f  # NIH never labels these: unknown, not negative
    c = row(m, "chexpert:train/p1/s1/v")
    assert c["fracture"] == 1.0 and c["atelectasis"] == -1.0 and np.isnan(c["cardiomegaly"])
    assert c["no_finding"] == 0.0  # a positive own finding makes the unknown No Finding 0
    assert np.isnan(c["nodule"])  # CheXpert has no nodule label


def test_nodule_mass_stays_compound():
    vindr = dataset("vindr_cxr", [{"patient_id": "a", "image_path": "a.dicom",
                                   "Nodule/Mass": 1.0, "No finding": 0.0},
                                  {"patient_id": "b", "image_path": "b.dicom",
                                   "No finding": 1.0}])
    nih = dataset("nih_cxr14", [{"patient_id": "00000002", "image_path": "00000002_000.png",
                                 "Nodule": 1.0}])
    m = merge([vindr, nih], findings=["nodule_or_mass", "nodule", "mass", "lung_lesion"])
    a, b = row(m, "vindr_cxr:a"), row(m, "vindr_cxr:b")
    assert a["nodule_or_mass"] == 1.0 and np.isnan(a["nodule"]) and np.isnan(a["mass"])
    assert a["lung_lesion"] == 1.0
    assert b["nodule_or_mass"] == 0.0 and b["nodule"] == 0.0 and b["mass"] == 0.0
    n = row(m, "nih_cxr14:00000002_000")
    assert (n["nodule"], n["mass"], n["nodule_or_mass"]) == (1.0, 0.0, 1.0)
    assert list(m.findings) == ["nodule_or_mass", "nodule", "mass", "lung_lesion"]
    assert list(m.spec.label_cols) == list(m.findings)


def test_unmappable_rows_are_kept_with_nan_and_reported():
    rsna = dataset("rsna_pneumonia", [{"patient_id": "r1", "image_path": "r1.dcm",
                                       "Pneumonia": 0.0, "Lung Opacity": NAN,
                                       "No Finding": NAN},  # no detailed class
                                      {"patient_id": "r2", "image_path": "r2.dcm",
                                       "Pneumonia": 1.0, "Lung Opacity": NAN,
                                       "No Finding": NAN}])
    m = merge([rsna], findings=["lung_opacity", "pneumonia"])
    assert len(m) == 2
    assert np.isnan(row(m, "rsna_pneumonia:r1")[["lung_opacity", "pneumonia"]].astype(float)).all()
    assert row(m, "rsna_pneumonia:r2")["lung_opacity"] == 1.0
    assert np.isnan(row(m, "rsna_pneumonia:r2")["pneumonia"])  # approximate: off by default
    rep = m.merge_report.set_index("dataset").loc["rsna_pneumonia"]
    assert (rep["rows"], rep["values"], rep["mapped"], rep["one_way"], rep["unknown"],
            rep["rows_without_findings"]) == (2, 2, 0, 1, 1, 1)
    approx = merge([rsna], findings=["pneumonia"], approximate=True)
    assert approx.harmonized_df["pneumonia"].tolist() == [0.0, 1.0]


# -- patients -------------------------------------------------------------------------------------
NIH_ROWS = [{"patient_id": "00000013", "image_path": "00000013_005.png"},
            {"patient_id": "00000013", "image_path": "00000013_006.png"},
            {"patient_id": "00000014", "image_path": "00000014_000.png"}]
RSNA_ROWS = [{"patient_id": "00000013", "image_path": "abc.dcm", "nih_image": "00000013_005"},
             {"patient_id": "xyz", "image_path": "xyz.dcm", "nih_image": None}]


def test_rsna_patients_join_nih_patients():
    m = merge([dataset("nih_cxr14", NIH_ROWS), dataset("rsna_pneumonia", RSNA_ROWS)])
    df = m.harmonized_df
    assert row(m, "rsna_pneumonia:abc")["patient_id"] == "nih_cxr14:00000013"
    assert row(m, "rsna_pneumonia:xyz")["patient_id"] == "rsna_pneumonia:xyz"
    assert row(m, "nih_cxr14:00000014_000")["patient_id"] == "nih_cxr14:00000014"
    assert df["study_id"].str.startswith(tuple(f"{k}:" for k in ("nih_cxr14", "rsna_pneumonia"))
                                         ).all()
    assert m.merge_report.set_index("dataset")["patients_joined"].to_dict() == \
        {"nih_cxr14": 3, "rsna_pneumonia": 1}
    for train, val in m.get_folds(2):
        assert not set(train.harmonized_df["patient_id"]) & set(val.harmonized_df["patient_id"])
        groups = {p: set(g) for p, g in m.harmonized_df.groupby("patient_id")["sample_id"]}
        assert groups["nih_cxr14:00000013"] <= set(train.sample_ids) or \
            groups["nih_cxr14:00000013"] <= set(val.sample_ids)
    alone = merge([dataset("rsna_pneumonia", RSNA_ROWS)])
    assert row(alone, "rsna_pneumonia:abc")["patient_id"] == "rsna_pneumonia:00000013"


def test_siim_with_nih_warns_that_its_patients_cannot_be_joined():
    siim = dataset("siim_acr_ptx", [{"patient_id": "1.2.3", "study_id": "1.2.3",
                                     "image_path": "x.dcm",
                                     "Pneumothorax": 1.0, "rle": []}])
    with pytest.warns(UserWarning, match="siim_acr_ptx.*cannot be joined"):
        m = merge([dataset("nih_cxr14", NIH_ROWS), siim])
    assert row(m, "siim_acr_ptx:1.2.3")["patient_id"] == "siim_acr_ptx:1.2.3"


def test_splits_are_disjoint_by_namespaced_patient_and_deterministic():
    # the same native patient id in two datasets is two patients
    nih = dataset("nih_cxr14", [{"patient_id": f"{p:08d}", "image_path": f"{p:08d}_{i:03d}.png"}
                                for p in range(1, 21) for i in range(2)])
    chx = dataset("chexpert", [{"patient_id": f"{p:08d}", "image_path": f"train/{p}/s/{i}.jpg"}
                               for p in range(1, 21) for i in range(3)])
    m = merge([nih, chx])
    folds = m.get_folds(4, seed=3)
    val_ids = np.concatenate([v.sample_ids for _, v in folds])
    assert sorted(val_ids) == sorted(m.sample_ids)
    for train, val in folds:
        assert not set(train.harmonized_df["patient_id"]) & set(val.harmonized_df["patient_id"])
        assert isinstance(val, MergedDataset) and val.findings == m.findings
    again = merge([nih, chx]).get_folds(4, seed=3)
    assert [list(v.sample_ids) for _, v in again] == [list(v.sample_ids) for _, v in folds]
    train, val = m.get_datasets(4, seed=3)
    assert list(val.sample_ids) == list(folds[0][1].sample_ids)
    assert m.harmonized_df["patient_id"].nunique() == 40


# -- samples, targets, demographics ---------------------------------------------------------------
def test_table_columns_and_demographics():
    nih = dataset("nih_cxr14", [{"patient_id": "00000001", "image_path": "00000001_000.png",
                                 "patient_age": 58, "patient_sex": "F", "view_position": "PA"}])
    pad = dataset("padchest", [{"patient_id": "p", "image_path": "0/x.png",
                                "patient_birth_year": 1940, "study_date": 20140118,
                                "patient_sex": "M", "view_position": "AP_horizontal"}])
    m = merge([nih, pad])
    df = m.harmonized_df
    assert list(df.columns[:9]) == ["sample_id", "patient_id", "study_id", "image_path",
                                    "view_position", "report", *FINDINGS[:3]]
    assert list(df.columns[-3:]) == ["view", "age_years", "sex"]
    assert {"source", "sample_id"} <= set(df.columns)
    assert df["source"].tolist() == ["nih_cxr14", "padchest"]
    assert df["age_years"].tolist() == [58.0, 74.0] and df["sex"].tolist() == ["F", "M"]
    assert df["view"].tolist() == [nih.harmonized_df["view"][0], pad.harmonized_df["view"][0]]


def test_sample_cls_mask_and_uncertain_policy():
    chx = dataset("chexpert", [{"patient_id": "p", "image_path": "a.jpg", "Atelectasis": -1.0,
                                "Edema": 1.0}], fill=NAN)
    f = ["atelectasis", "edema", "cardiomegaly", "nodule"]
    keep = merge([chx], findings=f)
    got = {}
    for policy in ("keep", "ignore", "zeros", "ones"):
        m = merge([chx], findings=f, uncertain=policy)
        sample = {}
        m.add_outputs(0, sample, None)
        got[policy] = (sample["cls"].tolist(), sample["cls_mask"].tolist())
        assert sample["source"] == "chexpert"
    assert got["keep"] == ([-1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0])
    assert got["ignore"] == ([0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0])
    assert got["zeros"] == ([0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0])
    assert got["ones"] == ([1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0])
    assert keep.harmonized_df["atelectasis"].tolist() == [-1.0]  # the table keeps -1
    labels, mask, names = keep.targets()
    assert names == f and mask.tolist() == [[False, True, False, False]]
    from radharmony.evaluate.probes import targets

    assert targets(keep)[1].tolist() == mask.tolist()
    with pytest.raises(RadHarmonyError, match="uncertain"):
        merge([chx], uncertain="maybe")


# -- images: caches, loader, viewer ---------------------------------------------------------------
@pytest.fixture(scope="module")
def nih_root(tmp_path_factory):
    from radharmony.fake.nih import write_nih

    root = tmp_path_factory.mktemp("nih")
    return write_nih(root, n_patients=4, size=64)


def _sources(nih_root, cache):
    from radharmony.datasets.nih import NIHChestXray14Dataset, NIHGoogleDataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nih = NIHChestXray14Dataset(nih_root, cache_dir=cache, dtype=torch.float32,
                                    output_cls=True)
        google = NIHGoogleDataset(nih_root, cache_dir=cache, dtype=torch.float32,
                                  output_cls=True)
    return nih, google


def test_caches_shared_with_the_sources_and_loader_batches_equal_samples(nih_root, tmp_path):
    nih, google = _sources(nih_root, tmp_path / "cache")
    m = merge([nih, google])
    assert m.cache_keys() == nih.cache_keys() + google.cache_keys()  # same files, same keys
    nih.pre_cache(progress=False)  # the source fills the cache ...
    stored = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    loader = CachedLoader(m, batch_size=3, progress=False)  # ... the merge only adds Google's
    # Google's images are NIH's files: nothing new to decode
    assert len(set(m.cache_keys())) == len(nih)
    batches = list(loader)
    assert sum(len(b["sample_id"]) for b in batches) == len(m)
    i = 0
    for b in batches:
        for j, sid in enumerate(b["sample_id"]):
            s = m[i]
            assert sid == s["sample_id"] and b["source"][j] == s["source"]
            assert torch.equal(b["img"][j], s["img"])
            assert torch.equal(b["cls"][j], s["cls"]) and torch.equal(b["cls_mask"][j],
                                                                      s["cls_mask"])
            i += 1
    assert stored  # the source's entries were there before the merged loader ran
    assert m[0]["img"].shape == (1, 224, 224) and m[0]["img"].dtype == torch.float32
    # NIH and its Google subset are one patient namespace
    assert set(m.harmonized_df["patient_id"].str.split(":").str[0]) == {"nih_cxr14"}


def test_viewer_lists_each_source(nih_root):
    from radharmony.viewer.app import ViewerApp

    nih, google = _sources(nih_root, None)
    m = merge([nih, google])
    app = ViewerApp(list(m.by_source().values()))
    meta = app.meta()
    assert [s["key"] for s in meta["splits"]] == ["merged/nih_cxr14", "merged/nih_cxr14_google"]
    assert [s["images"] for s in meta["splits"]] == [len(nih), len(google)]
    page = app.samples(split="merged/nih_cxr14_google", label="pneumothorax")
    expected = int((google.harmonized_df["Pneumothorax"] == 1).sum())
    assert page["total"] == expected
    one = app.sample(split="merged/nih_cxr14", index=0)
    assert one["sample_id"] == nih.sample_ids[0] and one["image_error"] is None


def test_cli_merge_and_vocab(nih_root, tmp_path, capsys):
    import json

    from radharmony.cli.main import main

    out = tmp_path / "merged.parquet"
    code = main(["merge", "nih_cxr14", "nih_cxr14_google", "--root", f"nih_cxr14={nih_root}",
                 "--root", f"nih_cxr14_google={nih_root}", "-o", str(out),
                 "--findings", "pneumothorax,nodule", "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    df = pd.read_parquet(out)
    assert len(df) == res["rows"] and res["findings"] == ["pneumothorax", "nodule"]
    assert {"sample_id", "source", "patient_id", "pneumothorax", "nodule", "age_years"} <= \
        set(df.columns)
    assert [r["dataset"] for r in res["report"]] == ["nih_cxr14", "nih_cxr14_google"]
    assert main(["merge", "nih_cxr14", "--root", f"nih_cxr14={nih_root}", "-o", str(out),
                 "--findings", "nodule_mass"]) == 1
    assert "nodule_or_mass" in capsys.readouterr().err
    assert main(["merge", "nih_cxr14", "--root", f"padchest={nih_root}", "-o", str(out)]) == 2
    assert main(["vocab", "--json", "--dataset", "vindr_cxr", "--declared"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert [f["id"] for f in v["findings"]] == list(FINDINGS)
    nm = [r for r in v["mapping"] if r["source_label"] == "Nodule/Mass"]
    assert [(r["finding"], r["relation"]) for r in nm] == [("nodule_or_mass", "exact")]


# -- errors ---------------------------------------------------------------------------------------
def test_errors_name_the_dataset_and_the_fix():
    nih = dataset("nih_cxr14", NIH_ROWS)
    with pytest.raises(VocabularyError, match="merge\\(findings=\\).*'nodule_mass'.*"
                                              "nodule_or_mass"):
        merge([nih], findings=["nodule_mass"])
    with pytest.raises(MergeError, match="sample_ids repeat.*nih_cxr14.*pass each dataset once"):
        merge([nih, nih])
    bad_spec = dataclasses.replace(nih.spec, label_map={k: v for k, v in nih.spec.label_map.items()
                                                        if k != "Hernia"})
    bad = BaseRadiologicalDataset("/data/nih", harmonized_df=table("nih_cxr14", NIH_ROWS),
                                  spec=bad_spec, cache_dir=None)
    with pytest.raises(VocabularyError, match="'nih_cxr14'.*\\['Hernia'\\].*LABEL_MAP"):
        merge([bad])
    rsna = dataset("rsna_pneumonia", RSNA_ROWS, dtype=torch.float32)
    with pytest.raises(MergeError, match="nih_cxr14.*rsna_pneumonia.*dtypes.*same dtype"):
        merge([nih, rsna])
    rsna = dataset("rsna_pneumonia", RSNA_ROWS, output_cls=True)
    with pytest.raises(MergeError, match="output flags.*same output_"):
        merge([nih, rsna])
    rsna = dataset("rsna_pneumonia", RSNA_ROWS, transform=DefaultTransform(size=128))
    with pytest.raises(MergeError, match="image pipelines"):
        merge([nih, rsna])
    rsna = dataset("rsna_pneumonia", RSNA_ROWS, cache_dir="/tmp/elsewhere")
    with pytest.raises(MergeError, match="cache folders"):
        merge([nih, rsna])
    with pytest.raises(MergeError, match="no dataset"):
        merge([])
    with pytest.raises(MergeError, match="merged dataset"):
        merge([merge([nih])])
    train, val = nih.get_datasets(2)
    assert len(merge([train, val])) == len(nih)  # disjoint splits of one dataset merge


def test_exported_from_the_package():
    assert radharmony.merge is merge and radharmony.MergedDataset is MergedDataset


def test_docs_train_a_linear_head_on_a_merged_replica(nih_root, tmp_path, monkeypatch):
    import re
    from pathlib import Path

    from radharmony.fake.chexpert import write_chexpert

    text = (Path(__file__).resolve().parents[2] / "docs" / "merge.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    chexpert = write_chexpert(tmp_path / "chexpert", n_patients=4)
    code = code.replace("/data/NIH/images", str(nih_root)).replace(
        "/data/CheXpert-v1.0-small", str(chexpert))
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "docs/merge.md", "exec"), ns)
    assert torch.isfinite(ns["loss"]) and ns["loss"].item() > 0
    assert set(ns["merged"].harmonized_df["source"]) == {"nih_cxr14", "chexpert"}
    assert ns["head"].weight.grad is not None
