"""CheXpert-Plus: CheXbert label meanings, the join with CheXpert, the PNG release."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from radharmony.datasets.chexpert import CheXpertDataset
from radharmony.datasets.chexpert_plus import (COLUMNS, LABEL_MAP, SPEC, CheXpertPlusDataset,
                                               CheXpertPlusHarmonizer, label_matrix)
from radharmony.errors import MetadataError
from radharmony.fake.chexpert import write_chexpert
from radharmony.fake.chexpert_plus import plus_rows, write_chexpert_plus, write_plus_tables
from radharmony.table.schema import validate

P1 = "train/patient00007/study2/view1_frontal.jpg"
P2 = "valid/patient00009/study1/view2_lateral.jpg"


def harmonize(labels, paths=(P1, P2), **change) -> pd.DataFrame:
    rows, _ = plus_rows(list(paths))
    table = pd.DataFrame(rows, columns=list(COLUMNS)).replace("", None)
    for k, v in change.items():
        table[k] = v
    raw = {"table": table, "labels": labels, "image_ext": ".jpg"}
    return validate(CheXpertPlusHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_chexbert_values_and_absent_keys():
    df = harmonize([{"path_to_image": P1, "Edema": 1, "Pneumonia": -1, "Fracture": 0},
                    {"path_to_image": "train/other/unlisted.jpg", "Edema": 1}])
    r = df.iloc[0]
    assert (r["Edema"], r["Pneumonia"], r["Fracture"]) == (1.0, -1.0, 0.0)
    assert pd.isna(r["Cardiomegaly"])  # absent key: not mentioned
    assert df.iloc[1][list(SPEC.label_cols)].isna().all()  # no label line for P2


def test_ids_join_chexpert_conventions():
    df = harmonize(None)
    assert df.loc[0, ["patient_id", "study_id", "image_path"]].tolist() == [
        "patient00007", "patient00007/study2", P1]
    assert df.loc[1, "view_position"] == "Lateral" and df.loc[0, "view_position"] in ("AP", "PA")
    assert df.loc[1, "split"] == "valid"
    assert df.loc[0, "report"].startswith("NARRATIVE:\n") and "\nFINDINGS:\n" in df.loc[0, "report"]


def test_demographics_decoded():
    df = harmonize(None, age=["62.0", None], sex=["Female", "Unknown"])
    assert df["patient_age"].tolist()[0] == 62 and pd.isna(df["patient_age"].iloc[1])
    assert df["patient_sex"].tolist() == ["F", None]


def test_bad_label_value_and_bad_path():
    with pytest.raises(MetadataError, match="unknown value"):
        label_matrix([{"path_to_image": P1, "Edema": 2}], pd.Series([P1]), source="x")
    with pytest.raises(MetadataError, match="path_to_image"):
        harmonize(None, paths=(P1, "CheXpert-v1.0/train/patient1/study1/view1.jpg"))


def test_label_map_is_complete():
    assert set(LABEL_MAP) == set(SPEC.label_cols)
    from radharmony.vocabulary import mapping  # the hierarchy bounds Lung Lesion's children
    m = mapping()
    rows = m[(m["dataset"] == "chexpert_plus") & (m["source_label"] == "Lung Lesion")]
    assert ("nodule", "broader") in set(zip(rows["finding"], rows["relation"]))


def test_png_release_reads_png_files(tmp_path):
    ds = CheXpertPlusDataset(write_chexpert_plus(tmp_path), output_cls=True, output_report=True,
                             cache_dir=None, dtype=torch.float32)
    assert ds.harmonized_df["image_path"].str.endswith(".png").all()
    s = ds[0]
    assert s["img"].shape == (1, 224, 224) and "\n\nFINDINGS:\n" in s["report"]
    assert s["cls"].shape == (14,)


def test_overlay_on_chexpert_shares_images_ids_and_cache(tmp_path):
    release = write_chexpert(tmp_path / "cx", n_patients=4)
    base = CheXpertDataset(release, cache_dir=tmp_path / "cache", dtype=torch.float32)
    paths = base.harmonized_df["image_path"].tolist()
    write_plus_tables(release, paths)
    plus = CheXpertPlusDataset(release, cache_dir=tmp_path / "cache", dtype=torch.float32)
    cols = ["patient_id", "study_id", "image_path"]
    pd.testing.assert_frame_equal(plus.harmonized_df[cols], base.harmonized_df[cols])
    native = lambda d: d.harmonized_df["sample_id"].str.split(":", n=1).str[1].tolist()
    assert native(plus) == native(base)
    base.pre_cache(progress=False)
    assert plus.cache_keys() == base.cache_keys()
