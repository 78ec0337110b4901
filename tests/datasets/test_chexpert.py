"""CheXpert: hand-written rows, the uncertain-label policy, the real train table, the fake."""

import numpy as np
import pandas as pd
import pytest

from radharmony.datasets.chexpert import LABELS, CheXpertDataset, CheXpertHarmonizer
from radharmony.errors import MetadataError, RadHarmonyError
from radharmony.fake.chexpert import chexpert_row, write_chexpert, write_table
from radharmony.table.schema import canonical_views

from txv_data import txv_file

P = "CheXpert-v1.0-small/train/patient00042/study3/"


def test_hand_written_rows_keep_one_zero_uncertain_missing_apart(tmp_path):
    rows = [chexpert_row(P + "view1_frontal.jpg", {"Edema": "1.0", "Pneumonia": "-1.0",
                                                   "Pneumothorax": "0.0"}, ap_pa="PA"),
            chexpert_row(P + "view2_lateral.jpg", {"Edema": "-1.0"}, frontal="Lateral",
                         ap_pa="", sex="Unknown"),
            chexpert_row("CheXpert-v1.0-small/valid/patient64541/study1/view1_frontal.jpg",
                         {"No Finding": "1.0"}, frontal="Frontal", ap_pa="LL", sex="Male")]
    h = CheXpertHarmonizer(csv_path=write_table(tmp_path / "train.csv", rows))
    df = h.harmonize()
    first = df.iloc[0]
    assert (first.Edema, first.Pneumonia, first.Pneumothorax) == (1, -1, 0)
    assert np.isnan(first.Atelectasis) and np.isnan(first["No Finding"])
    assert df.loc[1, "Edema"] == -1 and np.isnan(df.loc[1, "Pneumonia"])  # never borrowed
    assert (first.patient_id, first.study_id, first.image_path) == \
        ("patient00042", "patient00042/study3", "train/patient00042/study3/view1_frontal.jpg")
    assert df["view_position"].tolist() == ["PA", "Lateral", "LL"]  # LL on a "Frontal" row
    assert list(canonical_views(df["view_position"], h.spec.view_map)) == \
        ["PA", "LATERAL", "LATERAL"]
    assert df["patient_sex"].tolist() == ["F", None, "M"]
    assert df["split"].tolist() == ["train", "train", "valid"]
    assert df["split_raw"].tolist() == ["train", "train", "valid"]


@pytest.mark.parametrize("cell, row", [("2.0", chexpert_row(P + "view1_frontal.jpg",
                                                            {"Edema": "2.0"})),
                                       ("Path", chexpert_row("patient1/view1.jpg"))])
def test_bad_values_raise(tmp_path, cell, row):
    h = CheXpertHarmonizer(csv_path=write_table(tmp_path / "train.csv", [row]))
    with pytest.raises(MetadataError, match="Edema' has an unknown value" if cell == "2.0"
                       else "Path is not"):
        h.harmonize()


def test_uncertain_policy_for_cls(tmp_path):
    base = write_chexpert(tmp_path, n_patients=4)
    kept = CheXpertDataset(base, output_cls=True, cache_dir=None)
    table = kept.harmonized_df[list(LABELS)].to_numpy()
    i = int(np.flatnonzero((table == -1).any(axis=1) & np.isnan(table).any(axis=1))[0])
    unc, missing = table[i] == -1, np.isnan(table[i])
    # policy -> (cls value of an uncertain label, whether cls_mask counts it)
    expected = {"keep": (-1.0, 0.0), "ignore": (0.0, 0.0), "zeros": (0.0, 1.0),
                "ones": (1.0, 1.0)}
    for policy, (value, counted) in expected.items():
        ds = CheXpertDataset(base, output_cls=True, cache_dir=None, uncertain=policy,
                             harmonized_df=kept.harmonized_df.drop(columns="sample_id"))
        s = ds[i]
        cls, mask = s["cls"].float().numpy(), s["cls_mask"].numpy()
        assert s["cls_mask"].shape == s["cls"].shape
        assert (cls[unc] == value).all() and (cls[missing] == 0).all()
        assert (mask[unc] == counted).all() and (mask[missing] == 0).all()
        assert (mask[~unc & ~missing] == 1).all()
        assert (cls[~unc & ~missing] == table[i][~unc & ~missing]).all()
        assert (ds.harmonized_df[list(LABELS)].to_numpy() == -1).sum() == (table == -1).sum()
    with pytest.raises(RadHarmonyError, match="uncertain-label policy"):
        CheXpertDataset(base, uncertain="drop", cache_dir=None)


def test_real_train_table_counts():
    h = CheXpertHarmonizer(csv_path=txv_file("chexpert_train.csv.gz"))
    df = h.harmonize()
    assert len(df) == h.spec.expected["images"] == 223_414
    assert df["patient_id"].nunique() == h.spec.expected["patients"] == 64_540
    assert df["study_id"].nunique() == h.spec.expected["studies"] == 187_641
    ate = df["Atelectasis"]
    assert ((ate == 1).sum(), (ate == 0).sum(), (ate == -1).sum(), ate.isna().sum()) == \
        (33_376, 1_328, 33_739, 154_971)
    assert (df[list(LABELS)] == -1).sum().sum() == 139_958
    assert df["view_position"].value_counts().to_dict() == \
        {"AP": 161_590, "Lateral": 32_387, "PA": 29_420, "LL": 16, "RL": 1}
    views = pd.Series(canonical_views(df["view_position"], h.spec.view_map))
    assert views.value_counts().to_dict() == {"AP": 161_590, "LATERAL": 32_404, "PA": 29_420}
    assert set(df["split"]) == {"train"} and df["patient_sex"].isna().sum() == 1


def test_fake_replica_and_valid_table(tmp_path):
    base = write_chexpert(tmp_path, n_patients=3)
    with pytest.warns(UserWarning, match="does not support output_report"):
        ds = CheXpertDataset(base, output_cls=True, output_report=True, cache_dir=None)
    s = ds[len(ds) - 1]
    assert s["img"].shape == (1, 224, 224) and s["cls"].shape == (len(LABELS),)
    assert "report" not in s and (base / ds.harmonized_df["image_path"][0]).is_file()
    valid = CheXpertHarmonizer(csv_path=base / "valid.csv").harmonize()
    assert set(valid["split"]) == {"valid"} and len(valid) > 0
