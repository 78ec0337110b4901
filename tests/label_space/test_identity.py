"""Identity families: replicas of two family members over one set of patients, hand tables of
every family, and a property test that every merge's splits and folds are patient-disjoint
across families (the true patient computed here, independently of the merge)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radharmony import merge
from radharmony.data.dataset import BaseRadiologicalDataset
from radharmony.fake.chexpert import write_chexpert
from radharmony.fake.chexpert_plus import write_chexpert_plus
from radharmony.fake.mimic import write_mimic
from radharmony.fake.ms_cxr import write_ms_cxr
from radharmony.identity import IdentityError, check_identity, family_patients
from radharmony.registry import get_dataset_class, get_harmonizer_class, list_datasets
from radharmony.spec import Identity

from test_merge import dataset  # noqa: E402 (tests/label_space is on sys.path)

warnings.filterwarnings("ignore", message=".*(NIH original|no master_table|output).*")


def _disjoint(m, n_splits=3, seed=0, truth=None):
    """Every split and fold of ``m`` keeps each patient (``truth``: sample_id -> true patient,
    default the merged patient_id) on one side."""
    truth = truth or dict(zip(m.harmonized_df["sample_id"], m.harmonized_df["patient_id"]))
    pairs = list(m.get_folds(n_splits, seed=seed)) + [m.get_datasets(n_splits, seed=seed + 1)]
    for train, val in pairs:
        a = {truth[s] for s in train.sample_ids}
        b = {truth[s] for s in val.sample_ids}
        assert not a & b, f"patients on both sides: {sorted(a & b)[:5]}"
        assert len(train) + len(val) == len(m)


# -- replicas of two family members built from one set of patients ------------------------------
def test_chexpert_and_chexpert_plus_replicas_share_patients(tmp_path):
    shared = list(range(1, 9))
    base = write_chexpert(tmp_path / "chx", patients=shared)
    chx = get_dataset_class("chexpert")(base, cache_dir=None)  # patients 1-6
    valid = get_dataset_class("chexpert_valid")(base, cache_dir=None)  # 7-8
    plus = get_dataset_class("chexpert_plus")(
        write_chexpert_plus(tmp_path / "plus", patients=shared, images=False), cache_dir=None)
    native = set(chx.harmonized_df["patient_id"]) | set(valid.harmonized_df["patient_id"])
    assert native == set(plus.harmonized_df["patient_id"]) == {f"patient{p:05d}" for p in shared}
    m = merge([chx, valid, plus])
    joins = m.family_joins.set_index("family").loc["chexpert"]
    assert joins["datasets"] == "chexpert, chexpert_valid, chexpert_plus"
    assert (joins["shared_patients"], joins["patients"], joins["rows_unlinked"]) == (8, 8, 0)
    assert joins["rows_linked"] == len(m)
    assert m.harmonized_df["patient_id"].nunique() == 8  # not 16 (8 under two ids each)
    assert m.merge_report.set_index("dataset")["patients_joined"].to_dict() == \
        {"chexpert": len(chx), "chexpert_valid": len(valid), "chexpert_plus": len(plus)}
    _disjoint(m, 4)
    # each alone keeps its own namespace and no join is reported
    alone = merge([plus])
    assert alone.harmonized_df["patient_id"].str.startswith("chexpert_plus:").all()
    assert alone.family_joins.empty


def test_mimic_and_ms_cxr_replicas_share_subjects(tmp_path):
    subjects = ["10000032", "11000011", "12000048", "13000077"]
    mimic = get_dataset_class("mimic_cxr_jpg")(write_mimic(tmp_path / "m", subjects=subjects,
                                                           images=False), cache_dir=None)
    ms = get_dataset_class("ms_cxr")(write_ms_cxr(tmp_path / "ms", subjects=subjects[:3],
                                                  images=False), cache_dir=None)
    m = merge([mimic, ms])
    joins = m.family_joins.set_index("family").loc["mimic_cxr_jpg"]
    assert joins["shared_patients"] == 3 and joins["patients"] == 4
    assert set(m.harmonized_df["patient_id"]) == {f"mimic_cxr_jpg:{s}" for s in subjects}
    _disjoint(m, 2)


# -- hand rows pinning each link kind ------------------------------------------------------------
def test_every_declared_family_member_links_by_its_rule():
    expected = {"mimic_cxr_jpg": {"mimic_cxr_jpg", "mimic_cxr_jpg_test", "ms_cxr", "ms_cxr_t",
                                  "chest_imagenome", "chest_imagenome_gold", "chexmask_mimic",
                                  "mimic_cxr_vqa", "medical_diff_vqa", "gemex_vqa",
                                  "mimic_ext_cxr_qba", "mimic_cxr", "cxr_lt", "cxr_lt_2023"},
                "chexpert": {"chexpert", "chexpert_valid", "chexlocalize_val",
                             "chexlocalize_test", "chexpert_plus", "chexmask_chexpert"},
                "padchest": {"padchest", "padchest_gr", "chexmask_padchest"},
                "vindr_cxr": {"vindr_cxr", "vindr_cxr_physionet", "vindr_cxr_test",
                              "chexmask_vindr", "vindr_ribcxr"},
                "nih_cxr14": {"nih_cxr14", "nih_cxr14_google", "chexmask_nih", "rsna_pneumonia",
                              "siim_acr_ptx", "chestx_det"},
                "openi": {"openi", "openi_dicom"}, "brax": {"brax", "brax_dicom"},
                "rexgradient": {"rexgradient_train", "rexgradient_valid", "rexgradient_test",
                                "rexvqa_train", "rexvqa_valid", "rexvqa_test"},
                "taix_ray": {"taix_ray", "taix_ray_original"},  # 512 px and original: one release
                # TCIA's subject ids, for collections re-annotating its scans (LUNA16, SEG/SR)
                "lidc_idri": {"lidc_idri"}}
    got: dict[str, set] = {}
    for key in list_datasets():
        ident = get_harmonizer_class(key).spec.identity
        if ident is not None:
            got.setdefault(ident.family, set()).add(key)
    assert got == expected
    assert get_harmonizer_class("siim_acr_ptx").spec.identity.link == "none"


def test_link_kinds_read_the_family_patient():
    t = pd.DataFrame({"patient_id": ["a", "b", "c"],
                      "image_path": ["x/00000013_005.png", "y/00000014_000.dcm", "z.png"],
                      "nih_image": ["00000013_005", None, ""]})
    assert family_patients(t, Identity("f")).tolist() == ["a", "b", "c"]
    assert family_patients(t, Identity("f", link="column", column="nih_image",
                                       pattern=r"^(\d{8})_")).tolist() == ["00000013", None, None]
    assert family_patients(t, Identity("f", link="path", pattern=r"^(\d+)_")).tolist() == \
        ["00000013", "00000014", None]
    assert family_patients(t, Identity("f", link="none")).tolist() == [None] * 3
    for bad, match in ((Identity("f", link="guess"), "unknown identity.link"),
                       (Identity("f", link="column"), "names no column"),
                       (Identity("f", pattern=r"\d+"), "regex with a group")):
        with pytest.raises(IdentityError, match=match):
            check_identity(bad, where="x")


def test_siim_warns_naming_the_datasets_and_what_would_link_them():
    nih = dataset("nih_cxr14", [{"patient_id": "00000013", "image_path": "00000013_005.png"}])
    siim = dataset("siim_acr_ptx", [{"patient_id": "1.2.3", "study_id": "1.2.3",
                                     "image_path": "x.dcm", "Pneumothorax": 1.0, "rle": []}])
    with pytest.warns(UserWarning, match=r"siim_acr_ptx.*nih_cxr14.*cannot be joined.*"
                                         r"NIH original.*would link"):
        m = merge([nih, siim])
    j = m.family_joins.set_index("family").loc["nih_cxr14"]
    assert (j["rows_linked"], j["rows_unlinked"]) == (1, 1)


def test_custom_config_declares_a_family(tmp_path):
    from radharmony.custom import load_config

    (tmp_path / "t.csv").write_text("File,Pid\nnih/00000013_005.png,H1\nnih/00000099_000.png,H2\n")
    cfg = {"key": "hospital_nih_copy", "title": "NIH copies",
           "table": {"path": "t.csv"}, "ids": {"patient": "Pid"}, "image": {"path": "File"},
           "family": {"name": "nih_cxr14", "link": "path", "pattern": r"^(\d{8})_"}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    _, cls = load_config(path)
    assert cls.spec.identity == Identity("nih_cxr14", link="path", pattern=r"^(\d{8})_")
    mine = cls(tmp_path, cache_dir=None)
    nih = dataset("nih_cxr14", [{"patient_id": "00000013", "image_path": "00000013_000.png"}])
    m = merge([nih, mine])
    assert set(m.harmonized_df["patient_id"]) == {"nih_cxr14:00000013", "nih_cxr14:00000099"}
    cfg["family"] = {"name": "nih_cxr14", "link": "column", "column": "nope"}
    path.write_text(json.dumps(cfg))
    from radharmony.custom import ConfigError
    with pytest.raises(ConfigError, match="family.column"):
        load_config(path)


# -- property: random family combinations -------------------------------------------------------
#: per family, members and how a row of each names patient ``p`` (the true patient)
MEMBERS = {
    "nih_cxr14": lambda p, i: {"patient_id": f"{p:08d}", "image_path": f"{p:08d}_{i:03d}.png"},
    "nih_cxr14_google": lambda p, i: {"patient_id": f"{p:08d}",
                                      "image_path": f"{p:08d}_{i:03d}.png"},
    "rsna_pneumonia": lambda p, i: {"patient_id": f"{p:08d}", "image_path": f"r{p}-{i}.dcm",
                                    "nih_image": f"{p:08d}_{i:03d}"},
    "chexpert": lambda p, i: {"patient_id": f"patient{p:05d}",
                              "image_path": f"train/patient{p:05d}/study{i}/view1_frontal.jpg"},
    "chexpert_plus": lambda p, i: {"patient_id": f"patient{p:05d}",
                                   "image_path": f"train/patient{p:05d}/study{i}/v.png"},
    "chexlocalize_val": lambda p, i: {"patient_id": f"patient{p:05d}",
                                      "image_path": f"val/patient{p:05d}/study{i}/v.jpg"},
    "mimic_cxr_jpg": lambda p, i: {"patient_id": str(10_000_000 + p), "dicom_id": f"m{p}-{i}",
                                   "image_path": f"files/m{p}-{i}.jpg"},
    "ms_cxr": lambda p, i: {"patient_id": str(10_000_000 + p), "dicom_id": f"s{p}-{i}",
                            "image_path": f"files/s{p}-{i}.jpg"},
    "padchest": lambda p, i: {"patient_id": str(7_000 + p), "image_path": f"0/{p}_{i}.png"},
    "padchest_gr": lambda p, i: {"patient_id": str(7_000 + p), "image_path": f"G/{p}_{i}.png"},
    "vindr_cxr": lambda p, i: {"patient_id": f"v{p}", "image_path": f"v{p}.dicom"},
    "vindr_cxr_physionet": lambda p, i: {"patient_id": f"v{p}", "study_id": f"v{p}",
                                         "image_path": f"train/v{p}.dicom"},
    "openi": lambda p, i: {"patient_id": f"{p:08d}", "image_path": f"o{p}-{i}.png"},  # no family
}


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(chosen=st.lists(st.sampled_from(sorted(MEMBERS)), min_size=1, max_size=5, unique=True),
       data=st.data(), n_splits=st.integers(2, 4), seed=st.integers(0, 50))
def test_every_merge_is_patient_disjoint_across_families(chosen, data, n_splits, seed):
    datasets, truth = [], {}
    for key in chosen:
        pats = data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=8, unique=True),
                         label=key)
        rows = [MEMBERS[key](p, i) for p in pats for i in range(1 + p % 2)]
        if key == "vindr_cxr" or key == "vindr_cxr_physionet":  # one image per "patient"
            rows = [MEMBERS[key](p, 0) for p in pats]
        ds = dataset(key, rows)
        ident = ds.spec.identity
        family = ident.family if ident is not None else key
        for sid, p in zip(ds.sample_ids, [r["image_path"] for r in rows]):
            num = next(q for q in pats if any(MEMBERS[key](q, i)["image_path"] == p
                                              for i in range(2)))
            truth[sid] = (family, num)
        datasets.append(ds)
    m = merge(datasets)
    if len({truth[s] for s in m.sample_ids}) >= n_splits:
        _disjoint(m, n_splits, seed, truth)
    assert m.harmonized_df["patient_id"].nunique() == len(set(truth.values()))
