"""The canonical vocabulary: the table, every dataset's label_map, the derivation rules pinned
on hand-written rows (one per trap), and the counts the rules give on the real tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radharmony.registry import get_harmonizer_class, list_datasets
from radharmony.vocabulary import (FINDINGS, RELATIONS, VocabularyError, ancestors,
                                   check_label_map, derive_findings, derive_report, findings,
                                   mapping)
from radharmony.vocabulary.table import children

from benchmarks.vocab_counts import REAL_TABLES, counts, harmonize_real

NAN = np.nan


def spec_of(key):
    return get_harmonizer_class(key).spec


def rows(key, *cells, fill=np.nan):
    """A table with ``key``'s label columns: one row per dict of {label: value}, rest ``fill``."""
    spec = spec_of(key)
    df = pd.DataFrame(fill, index=range(len(cells)), columns=list(spec.label_cols), dtype=float)
    for i, c in enumerate(cells):
        for k, v in c.items():
            df.loc[i, k] = v
    return df


def derive(key, *cells, fill=np.nan, want, **kw):
    out = derive_findings(rows(key, *cells, fill=fill), spec_of(key), findings=want, **kw)
    return out.to_numpy().tolist()


def same(a, b):
    return np.array_equal(np.asarray(a, float), np.asarray(b, float), equal_nan=True)


# -- the table ----------------------------------------------------------------------------------
def test_findings_table_is_well_formed():
    f = findings()
    assert tuple(f["id"]) == FINDINGS and len(set(FINDINGS)) == len(FINDINGS)
    assert all(i.isidentifier() and i == i.lower() for i in FINDINGS)
    assert set(f["kind"]) == {"finding", "device", "normal"}
    for parents in f["parents"]:
        assert set(parents) <= set(FINDINGS)
    for fid in FINDINGS:
        assert fid not in ancestors(fid)  # acyclic
    assert f.loc[f.exhaustive, "id"].tolist() == ["nodule_or_mass"]
    assert set(children("nodule_or_mass")) == {"nodule", "mass"}
    assert ancestors("nodule") == ("nodule_or_mass", "lung_lesion")
    assert "lung_opacity" in ancestors("infiltration") and "consolidation" not in \
        ancestors("infiltration")
    assert set(ancestors("hydropneumothorax")) == {"pneumothorax", "pleural_effusion"}
    assert ancestors("rib_fracture") == ("fracture",)
    cui = f.set_index("id")["umls_cui"]
    assert cui["pleural_effusion"] == "C2073625" and cui["lung_opacity"] is None


# -- the contract over every registered dataset ---------------------------------------------------
@pytest.mark.parametrize("key", list_datasets())
def test_every_label_column_is_mapped_or_explicitly_unmapped(key):
    spec = spec_of(key)
    check_label_map(spec)
    assert set(spec.label_map) == set(spec.label_cols)
    for col, pairs in spec.label_map.items():
        assert pairs is None or all(f in FINDINGS and r in RELATIONS for f, r in pairs)


def test_mapping_frame_covers_every_dataset():
    m = mapping()
    assert list(m.columns[:4]) == ["dataset", "source_label", "finding", "relation"]
    for key in list_datasets():
        assert set(m.loc[m.dataset == key, "source_label"]) == set(spec_of(key).label_cols)
    assert set(m["relation"].dropna()) <= set(RELATIONS)
    assert set(m["finding"].dropna()) <= set(FINDINGS)


def test_bad_label_map_and_bad_findings_raise():
    from dataclasses import replace

    spec = spec_of("siim_acr_ptx")
    with pytest.raises(VocabularyError, match="unmapped columns \\['Pneumothorax'\\]"):
        check_label_map(replace(spec, label_map={}))
    with pytest.raises(VocabularyError, match="not a valid mapping"):
        check_label_map(replace(spec, label_map={"Pneumothorax": (("pneumothorax", "same"),)}))
    with pytest.raises(VocabularyError, match="'pneumothrax' -> 'pneumothorax'"):
        derive_findings(rows("siim_acr_ptx", {}), spec, findings=["pneumothrax"])
    with pytest.raises(VocabularyError, match="not 1 / 0 / -1"):
        derive_findings(rows("siim_acr_ptx", {"Pneumothorax": 2.0}), spec)
    with pytest.raises(VocabularyError, match="lacks label columns"):
        derive_findings(pd.DataFrame({"x": [1.0]}), spec)


# -- the traps, on hand-written rows -------------------------------------------------------------
def test_exact_keeps_uncertain_and_unknown_and_combines_one_beats_u_beats_0():
    want = ["pneumothorax", "hydropneumothorax", "pleural_effusion"]
    got = derive("chexpert", {"Pneumothorax": 1}, {"Pneumothorax": -1}, {"Pneumothorax": 0},
                 {}, want=want)
    assert same(got, [[1, NAN, NAN], [-1, NAN, NAN], [0, 0, NAN], [NAN, NAN, NAN]])
    # OpenI: hydropneumothorax implies pneumothorax and pleural effusion, whatever their tags say
    got = derive("openi", {"Hydropneumothorax": 1}, {"Pneumothorax": 1}, fill=0.0, want=want)
    assert same(got, [[1, 1, 1], [1, 0, 0]])


def test_infiltration_is_a_lung_opacity_not_a_consolidation():
    want = ["infiltration", "lung_opacity", "consolidation"]
    got = derive("nih_cxr14", {"Infiltration": 1}, {}, fill=0.0, want=want)
    assert same(got, [[1, 1, 0], [0, NAN, 0]])  # NIH never says "no opacity"
    # CheXpert files infiltrates under Lung Opacity: an opacity says nothing of infiltration,
    # a negated one rules it out
    got = derive("chexpert", {"Lung Opacity": 1}, {"Lung Opacity": 0}, want=want)
    assert same(got, [[NAN, 1, NAN], [0, 0, 0]])


def test_nodule_mass_compound():
    want = ["nodule_or_mass", "nodule", "mass", "lung_lesion"]
    for key, col in (("vindr_cxr", "Nodule/Mass"), ("nih_cxr14_google", "Nodule or mass")):
        got = derive(key, {col: 1}, {col: 0}, fill=0.0, want=want)
        assert same(got[0], [1, NAN, NAN, 1]) and same(got[1][:3], [0, 0, 0]), key
    # NIH labels both children: both 0 make the compound 0, one 1 makes it 1
    got = derive("nih_cxr14", {"Nodule": 1}, {}, fill=0.0, want=want)
    assert same(got, [[1, 1, 0, 1], [0, 0, 0, NAN]])
    # CheXpert's Lung Lesion is broader still
    got = derive("chexpert", {"Lung Lesion": 1}, {"Lung Lesion": 0}, want=want)
    assert same(got, [[NAN, NAN, NAN, 1], [0, 0, 0, 0]])


def test_chexpert_pleural_other_is_not_fibrosis_nor_thickening():
    want = ["fibrosis", "pleural_thickening", "pleural_other"]
    got = derive("chexpert", {"Pleural Other": 1}, {"Pleural Other": 0}, {"Pleural Other": -1},
                 want=want)
    assert same(got, [[NAN, NAN, NAN], [0, 0, NAN], [NAN, NAN, NAN]])
    got = derive("chexpert", {"Pleural Other": 1}, want=want, approximate=True)
    assert same(got, [[NAN, NAN, 1]])
    # NIH pleural thickening implies a pleural abnormality
    got = derive("nih_cxr14", {"Pleural_Thickening": 1}, fill=0.0, want=want)
    assert same(got, [[0, 1, 1]])


def test_pericardial_effusion_is_not_a_pleural_effusion():
    got = derive("openi", {"Pericardial Effusion": 1}, want=["pleural_effusion"])
    assert same(got, [[NAN]])
    assert spec_of("openi").label_map["Pericardial Effusion"] is None


def test_rsna_target_is_an_opacity_and_pneumonia_only_approximately():
    want = ["lung_opacity", "pneumonia", "consolidation"]
    got = derive("rsna_pneumonia", {"Pneumonia": 1}, {"Pneumonia": 0}, want=want)
    # Target 0 includes "No Lung Opacity / Not Normal": opacities not read as pneumonia
    assert same(got, [[1, NAN, NAN], [NAN, NAN, NAN]])
    got = derive("rsna_pneumonia", {"Pneumonia": 1}, {"Pneumonia": 0}, want=want,
                 approximate=True)
    assert same(got, [[1, 1, NAN], [NAN, 0, NAN]])


def test_no_finding_is_dataset_relative():
    want = ["no_finding", "cardiomegaly", "lung_opacity", "nodule", "emphysema",
            "support_devices"]
    # CheXpert: No Finding makes its own findings 0, never devices, never emphysema (not its
    # label); a positive finding makes No Finding 0; a device does not
    got = derive("chexpert", {"No Finding": 1, "Support Devices": 1}, {"Cardiomegaly": 1},
                 {"Support Devices": 1}, want=want)
    assert same(got, [[1, 0, 0, 0, NAN, 1], [0, 1, NAN, NAN, NAN, NAN],
                      [NAN, NAN, NAN, NAN, NAN, 1]])
    # VinDr: "No finding" rules out a lung opacity (its residual Lung Opacity alone never does)
    got = derive("vindr_cxr", {"No finding": 1}, {"No finding": 0}, fill=0.0, want=want)
    assert same(got, [[1, 0, 0, 0, NAN, NAN], [0, 0, NAN, 0, NAN, NAN]])
    # NIH has no No Finding column: nothing is inferred from all-zero rows beyond its labels
    got = derive("nih_cxr14", {}, fill=0.0, want=want)
    assert same(got, [[NAN, 0, NAN, 0, 0, NAN]])


def test_narrower_children_enumerated_only_for_exhaustive_parents():
    # X-Raydar labels rib and clavicle fractures, not every fracture: fracture stays unknown
    got = derive("xraydar_multimodal", {"rib_fracture": 1}, {}, fill=0.0,
                 want=["rib_fracture", "fracture"])
    assert same(got, [[1, 1], [0, NAN]])


def test_report_counts_every_known_value_once():
    df = rows("chexpert", {"Pleural Other": 1, "No Finding": 1}, {"Pleural Other": 0},
              {"Lung Opacity": -1})
    rep = derive_report(df, spec_of("chexpert")).set_index("source_label")
    assert (rep["mapped"] + rep["one_way"] + rep["unknown"] == rep["values"]).all()
    assert rep.loc["Pleural Other", ["values", "mapped", "one_way", "unknown"]].tolist() == \
        [2, 0, 1, 1]
    assert rep.loc["Lung Opacity", "mapped"] == 1
    rep = derive_report(df, spec_of("chexpert"), approximate=True).set_index("source_label")
    assert rep.loc["Pleural Other", "mapped"] == 2


# -- the real tables -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real():
    from benchmarks.vocab_counts import txv_data_dir

    data_dir = txv_data_dir()
    if data_dir is None or not all((data_dir / n).is_file() for _, n in REAL_TABLES.values()):
        pytest.skip("torchxrayvision's real tables are not installed (pip install --no-deps "
                    "torchxrayvision==1.5.7)")
    return {k: harmonize_real(k, data_dir) for k in REAL_TABLES}


@pytest.mark.parametrize("key", list(REAL_TABLES))
def test_real_counts(real, key):
    derived = derive_findings(real[key], spec_of(key))
    assert counts(derived) == REAL_COUNTS[key]
    assert derived.index.equals(real[key].index)  # nothing dropped


def test_real_tables_derive_in_well_under_a_second_each(real):
    import time

    t = time.perf_counter()
    for key, df in real.items():
        derive_findings(df, spec_of(key))
    assert time.perf_counter() - t < 10.0


#: dataset -> finding -> (positives, negatives, uncertain), as benchmarks/vocab_counts.py prints
REAL_COUNTS = {
    "nih_cxr14": {
        "atelectasis": (11559, 100561, 0), "cardiomegaly": (2776, 109344, 0),
        "enlarged_cardiomediastinum": (2776, 0, 0), "lung_opacity": (32325, 0, 0),
        "consolidation": (4667, 107453, 0), "infiltration": (19894, 92226, 0),
        "pneumonia": (1431, 110689, 0), "edema": (2303, 109817, 0),
        "pleural_effusion": (13317, 98803, 0), "pleural_thickening": (3385, 108735, 0),
        "pleural_other": (3385, 0, 0), "pneumothorax": (5302, 106818, 0),
        "hydropneumothorax": (0, 111124, 0), "nodule": (6331, 105789, 0),
        "mass": (5782, 106338, 0), "nodule_or_mass": (11207, 100913, 0),
        "lung_lesion": (11207, 0, 0), "emphysema": (2516, 109604, 0),
        "fibrosis": (1686, 110434, 0),
        "suspicious_nodule": (0, 105789, 0),  # no nodule: none suspicious (LIDC-IDRI's finding)
    },
    "nih_cxr14_google": {
        "lung_opacity": (2166, 0, 0), "consolidation": (0, 2210, 0),
        "pneumothorax": (238, 4138, 0), "hydropneumothorax": (0, 4138, 0), "nodule": (0, 3771, 0),
        "mass": (0, 3771, 0), "nodule_or_mass": (605, 3771, 0), "lung_lesion": (605, 0, 0),
        "fracture": (186, 4190, 0), "rib_fracture": (0, 4190, 0),
        "clavicle_fracture": (0, 4190, 0),
        "suspicious_nodule": (0, 3771, 0),
    },
    "chexpert": {
        "no_finding": (22381, 182847, 0), "atelectasis": (33376, 26900, 33739),
        "cardiomegaly": (27000, 42171, 8087), "enlarged_cardiomediastinum": (35897, 35453, 12092),
        "lung_opacity": (151515, 25637, 3483), "consolidation": (14783, 45381, 27742),
        "infiltration": (0, 26559, 0), "pneumonia": (6039, 27957, 18770),
        "edema": (52246, 40961, 12984), "pleural_effusion": (86187, 46327, 11628),
        "pleural_thickening": (0, 316, 0), "pneumothorax": (19448, 65311, 3145),
        "hydropneumothorax": (0, 78177, 0), "nodule": (0, 23274, 0), "mass": (0, 23274, 0),
        "nodule_or_mass": (0, 23274, 0), "lung_lesion": (9186, 23274, 1488),
        "fibrosis": (0, 316, 0), "interstitial_lung_disease": (0, 26559, 0),
        "fracture": (9040, 23802, 642), "rib_fracture": (0, 23802, 0),
        "clavicle_fracture": (0, 23802, 0), "aortic_enlargement": (0, 35625, 0),
        "support_devices": (116001, 6137, 1079),
        "suspicious_nodule": (0, 23274, 0),
    },
    "padchest": {
        "no_finding": (50616, 110142, 0), "atelectasis": (8961, 151797, 0),
        "cardiomegaly": (15022, 145736, 0), "enlarged_cardiomediastinum": (15022, 0, 0),
        "lung_opacity": (22625, 0, 0), "consolidation": (2497, 158261, 0),
        "infiltration": (7089, 153669, 0), "pneumonia": (8174, 152584, 0),
        "edema": (1456, 159302, 0), "pleural_effusion": (9986, 150772, 0),
        "pleural_thickening": (5156, 155602, 0), "pleural_other": (5156, 0, 0),
        "pneumothorax": (573, 160185, 0), "hydropneumothorax": (0, 160692, 0),
        "nodule": (4072, 156686, 0), "mass": (1083, 159675, 0),
        "nodule_or_mass": (5015, 155743, 0), "lung_lesion": (5015, 0, 0),
        "emphysema": (1538, 159220, 0), "fibrosis": (1228, 159530, 0),
        "hiatal_hernia": (2363, 158395, 0), "fracture": (4631, 156127, 0),
        "rib_fracture": (0, 156142, 0), "clavicle_fracture": (0, 156142, 0),
        # 27 more negatives than nodule: rows labelled both Nodule and No Finding
        "suspicious_nodule": (0, 156713, 0),
    },
    "vindr_cxr": {
        "no_finding": (10606, 4394, 0), "atelectasis": (186, 14814, 0),
        "cardiomegaly": (2300, 12700, 0), "enlarged_cardiomediastinum": (3394, 0, 0),
        "lung_opacity": (1817, 10606, 0), "consolidation": (353, 14647, 0),
        "infiltration": (613, 14387, 0), "pleural_effusion": (1032, 13968, 0),
        "pleural_thickening": (1981, 13019, 0), "pleural_other": (1981, 0, 0),
        "pneumothorax": (96, 14904, 0), "hydropneumothorax": (0, 14940, 0),
        "nodule": (0, 14174, 0), "mass": (0, 14174, 0), "nodule_or_mass": (826, 14174, 0),
        "lung_lesion": (826, 0, 0), "fibrosis": (1617, 13383, 0),
        "interstitial_lung_disease": (386, 14614, 0), "aortic_enlargement": (3067, 11933, 0),
        "calcification": (452, 14548, 0), "aortic_calcification": (0, 14548, 0),
        # no calcification: no arterial (CT-RATE's finding) nor coronary calcification either
        "arterial_wall_calcification": (0, 14548, 0),
        "coronary_artery_calcification": (0, 14548, 0),
        "suspicious_nodule": (0, 14174, 0),
    },
    "rsna_pneumonia": {  # torchxrayvision's copy has no detailed class file: no Normal class
        "lung_opacity": (6012, 0, 0), "no_finding": (0, 6012, 0),
    },
    "siim_acr_ptx": {
        "pneumothorax": (2669, 9378, 0), "hydropneumothorax": (0, 9378, 0),
    },
    "openi": {
        "no_finding": (2696, 4602, 0), "atelectasis": (616, 6682, 0),
        "cardiomegaly": (655, 6643, 0), "enlarged_cardiomediastinum": (655, 0, 0),
        "lung_opacity": (953, 2696, 0), "consolidation": (53, 7245, 0),
        "infiltration": (116, 7182, 0), "pneumonia": (77, 7221, 0), "edema": (87, 7211, 0),
        "pleural_effusion": (290, 7008, 0), "pneumothorax": (54, 7244, 0),
        "hydropneumothorax": (10, 7288, 0), "nodule": (211, 7087, 0), "mass": (32, 7266, 0),
        "nodule_or_mass": (239, 7059, 0), "lung_lesion": (239, 0, 0), "emphysema": (190, 7108, 0),
        "fibrosis": (34, 7264, 0), "interstitial_lung_disease": (26, 7272, 0),
        "hiatal_hernia": (86, 7212, 0), "fracture": (165, 7133, 0), "rib_fracture": (0, 7133, 0),
        "clavicle_fracture": (0, 7133, 0), "calcification": (973, 6325, 0),
        "aortic_calcification": (0, 6740, 0), "subcutaneous_emphysema": (6, 7292, 0),
        "arterial_wall_calcification": (0, 6740, 0),
        "coronary_artery_calcification": (0, 6740, 0),
        "support_devices": (427, 0, 0), "tuberculosis": (4, 7294, 0), "granuloma": (610, 6688, 0),
        "scoliosis": (177, 7121, 0), "copd": (93, 7205, 0), "bronchiectasis": (9, 7289, 0),
        "suspicious_nodule": (0, 7087, 0),
    },
}
