"""CheXlocalize: gold labels, COCO-RLE segmentations, ids and cache shared with chexpert_valid."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.annotations.coco import coco_rle_encode
from radharmony.datasets.chexlocalize import (TASKS, TEST_SPEC, VAL_SPEC, CheXlocalizeTestDataset,
                                              CheXlocalizeTestHarmonizer, CheXlocalizeValDataset,
                                              CheXlocalizeValHarmonizer, cxr_id)
from radharmony.datasets.chexpert import LABELS, CheXpertValidDataset
from radharmony.errors import MetadataError, RadHarmonyError
from radharmony.fake.chexlocalize import write_chexlocalize, write_split
from radharmony.fake.chexpert import write_chexpert
from radharmony.table.schema import validate


def labels_row(path, **cells):
    return {"Path": path, **{c: cells.get(c, "0") for c in LABELS}}


def test_test_table_without_view_columns_and_the_json_keys():
    m = np.zeros((4, 6), np.uint8)
    m[1:3, 2:5] = 1
    seg = {"patient64741_study1_view1_frontal": {
        t: coco_rle_encode(m if t == "Airspace Opacity" else np.zeros((4, 6), np.uint8))
        for t in TASKS}}
    table = pd.DataFrame([labels_row("test/patient64741/study1/view1_frontal.jpg",
                                     **{"Lung Opacity": "1"}),
                          labels_row("CheXpert-v1.0/test/patient64742/study1/view2_lateral.jpg",
                                     **{"No Finding": "1", "Edema": None})])  # empty cell: NaN as read
    df = validate(CheXlocalizeTestHarmonizer.harmonize_raw(
        {"table": table, "segmentations": seg}, source="rows"), TEST_SPEC)
    assert df["image_path"].tolist() == ["test/patient64741/study1/view1_frontal.jpg",
                                         "test/patient64742/study1/view2_lateral.jpg"]
    assert df["study_id"].tolist() == ["patient64741/study1", "patient64742/study1"]
    assert df["view_position"].tolist() == ["frontal", "lateral"]  # as the file name spells it
    assert df["frontal_lateral"].tolist() == ["Frontal", "Lateral"]
    assert df["Lung Opacity"].tolist() == [1, 0] and np.isnan(df["Edema"].iloc[1])
    assert df["mask_height"].tolist()[0] == 4 and pd.isna(df["mask_height"].iloc[1])
    assert set(df["segmentations"].iloc[0]) == set(TASKS) and df["segmentations"].iloc[1] == {}
    assert df["split"].unique().tolist() == ["test"]
    assert cxr_id("valid/patient64622/study1/view1_frontal.jpg") == \
        "patient64622_study1_view1_frontal"


def test_valid_paths_keep_chexpert_form_unless_only_val_exists():
    table = pd.DataFrame([{**labels_row("CheXpert-v1.0/valid/patient64541/study1/"
                                        "view1_frontal.jpg"), "Sex": "Male", "Age": "73",
                           "Frontal/Lateral": "Frontal", "AP/PA": "AP"}])
    df = CheXlocalizeValHarmonizer.harmonize_raw({"table": table, "segmentations": None})
    assert df["image_path"].iloc[0] == "valid/patient64541/study1/view1_frontal.jpg"
    assert df["view_position"].iloc[0] == "AP" and df["patient_sex"].iloc[0] == "M"
    df = CheXlocalizeValHarmonizer.harmonize_raw({"table": table, "segmentations": None,
                                                  "val_folder": True})
    assert df["image_path"].iloc[0] == "val/patient64541/study1/view1_frontal.jpg"


def test_bad_rle_and_bad_path_name_the_entry():
    table = pd.DataFrame([labels_row("test/patient1/study1/view1_frontal.jpg")])
    with pytest.raises(MetadataError, match="patient1_study1_view1_frontal, Edema"):
        CheXlocalizeTestHarmonizer.harmonize_raw({"table": table, "segmentations": {
            "patient1_study1_view1_frontal": {"Edema": {"size": [2, 2], "counts": 7}}}})
    with pytest.raises(MetadataError, match="Path is not"):
        CheXlocalizeTestHarmonizer.harmonize_raw(
            {"table": pd.DataFrame([labels_row("test/patient1/view1_frontal.jpg")]),
             "segmentations": None})


def test_fake_masks_decode_at_full_resolution_and_follow_the_image(tmp_path):
    base = write_chexlocalize(tmp_path)
    ds = CheXlocalizeValDataset(base, output_mask=True, cache_dir=None, dtype=torch.float32)
    df = ds.harmonized_df
    assert df["image_path"].str.startswith("val/").all()  # CheXlocalize's own folder
    src = ds.source_masks(0)
    import cv2
    h, w = cv2.imread(str(base / df["image_path"].iloc[0]), cv2.IMREAD_GRAYSCALE).shape
    assert src.shape == (2 * h, 2 * w, 10)  # full resolution, twice the JPEG here
    assert src[..., 0].any() and not src[..., 1:].any()  # row 0: Enlarged Cardiomediastinum
    n, _ = cv2.connectedComponents(src[..., 0])
    assert n - 1 == 2  # two contours
    s = ds[0]
    assert s["masks"].shape == (10, 224, 224) and s["masks"].dtype == torch.uint8
    assert torch.equal(s["mask"][0], s["masks"].amax(0))
    lateral = df.index[df["image_path"].str.endswith("lateral.jpg")][0]
    assert ds[int(lateral)]["masks"].sum() == 0  # no entry: all-zero masks
    one = CheXlocalizeValDataset(base, output_mask=True, cache_dir=None,
                                 mask_task="Enlarged Cardiomediastinum")
    assert torch.equal(one[0]["mask"][0], s["masks"][0])
    with pytest.raises(RadHarmonyError, match="mask_task"):
        CheXlocalizeValDataset(base, mask_task="Lung Opacity")
    # a positive mask task <-> its label is 1 (Airspace Opacity is Lung Opacity)
    for i in range(len(ds)):
        on = ds.source_masks(i).reshape(-1, 10).any(0)
        labels = df.iloc[i]
        assert [bool(v) for v in on] == [labels["Lung Opacity" if t == "Airspace Opacity" else t]
                                         == 1 for t in TASKS]
    test = CheXlocalizeTestDataset(base, cache_dir=None)
    assert test.harmonized_df["image_path"].str.startswith("test/").all()


def test_shares_ids_and_cache_with_chexpert_valid(tmp_path):
    release = write_chexpert(tmp_path / "cx", n_patients=4)
    base = CheXpertValidDataset(release, cache_dir=tmp_path / "cache", dtype=torch.float32)
    import cv2
    images = [(p, cv2.imread(str(release / p), cv2.IMREAD_GRAYSCALE).shape, {"Edema"})
              for p in base.harmonized_df["image_path"]]
    write_split(release / "val_labels.csv", tmp_path / "CheXlocalize" /
                "gt_segmentations_val.json", None, "val", images, rng=np.random.default_rng(0))
    loc = CheXlocalizeValDataset(release, output_mask=True, cache_dir=tmp_path / "cache",
                                 dtype=torch.float32)
    cols = ["patient_id", "study_id", "image_path"]
    pd.testing.assert_frame_equal(loc.harmonized_df[cols], base.harmonized_df[cols])
    assert [s.split(":", 1)[1] for s in loc.harmonized_df["sample_id"]] == \
        [s.split(":", 1)[1] for s in base.harmonized_df["sample_id"]]
    base.pre_cache(progress=False)
    assert loc.cache_keys() == base.cache_keys()
    assert torch.equal(loc[0]["img"], base[0]["img"])
    assert loc[0]["masks"][TASKS.index("Edema")].any()
    assert json.loads((tmp_path / "CheXlocalize" / "gt_segmentations_val.json").read_text())
