"""ChestX-Det: the JSON arrays, boxes and polygons per instance, the NIH link where a name is
NIH's, masks at the image's size."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from radharmony.datasets.chestx_det import (LABEL_MAP, LABELS, SPEC, ChestXDetDataset,
                                            ChestXDetHarmonizer)
from radharmony.errors import MetadataError
from radharmony.fake.chestx_det import write_chestx_det
from radharmony.identity import family_patients
from radharmony.table.schema import validate

TRAIN = [
    {"file_name": "36199.png", "syms": ["Effusion", "Nodule"],
     "boxes": [[10, 20, 110, 220], [300, 310, 340, 350]],
     "polygons": [[[10, 20], [110, 20], [110, 220]], [[300, 310], [340, 310], [340, 350],
                                                      [300, 350]]]},
    {"file_name": "36200.png", "syms": [], "boxes": [], "polygons": []},
]
TEST = [{"file_name": "00000042_006.png", "syms": ["Fibrosis"], "boxes": [[632, 721, 909, 969]],
         "polygons": [[[632, 721], [909, 721], [909, 969]]]}]


def harmonize(train=TRAIN, test=TEST, files=None):
    with pytest.warns(UserWarning, match="not NIH Image Index names"):
        df = ChestXDetHarmonizer.harmonize_raw({"train": train, "test": test, "files": files},
                                               source="rows")
    return validate(df, SPEC)


def test_rows_labels_boxes_and_shapes_by_hand():
    df = harmonize().set_index("study_id")
    assert list(df.index) == ["36199", "36200", "00000042_006"]
    assert df["split"].tolist() == ["train", "train", "test"]
    assert df["image_path"].tolist() == ["train_data/36199.png", "train_data/36200.png",
                                         "test_data/00000042_006.png"]
    assert df.loc["36199", "Effusion"] == 1 and df.loc["36199", "Nodule"] == 1
    assert df.loc["36199", list(LABELS)].sum() == 2
    assert df.loc["36200", list(LABELS)].sum() == 0  # read, none of the 13: all 0, not NaN
    boxes = [(b["label"], b["x_min"], b["y_min"], b["x_max"], b["y_max"])
             for b in df.loc["36199", "boxes"]]
    assert boxes == [("Effusion", 10, 20, 110, 220), ("Nodule", 300, 310, 340, 350)]
    shapes = df.loc["36199", "shapes"]
    assert [s["label"] for s in shapes] == ["Effusion", "Nodule"]
    assert shapes[1]["points"] == [[300, 310], [340, 310], [340, 350], [300, 350]]
    assert LABEL_MAP["Nodule"] == (("nodule", "narrower"),)


def test_nih_names_link_to_the_nih_patient_and_the_rest_stay_their_own():
    df = harmonize()
    assert df["patient_id"].tolist() == ["36199.png", "36200.png", "00000042"]
    assert df["nih_image_index"].tolist() == [None, None, "00000042_006.png"]
    assert family_patients(df, SPEC.identity).tolist() == [None, None, "00000042"]


def test_listed_images_are_found_in_any_nesting():
    files = {"36199.png": "images/a/36199.png"}
    df = harmonize(files=files)
    assert df["image_path"].tolist()[:2] == ["images/a/36199.png", "train_data/36200.png"]


@pytest.mark.parametrize("entry, match", [
    ({"file_name": "1.png", "syms": ["Effusion"], "boxes": [], "polygons": []}, "differ"),
    ({"file_name": "1.png", "syms": ["Infiltrate"], "boxes": [[1, 2, 3, 4]]}, "unknown finding"),
    ({"file_name": "1.png", "syms": ["Mass"], "boxes": [[1, 2, 3]]}, r"not \[x1, y1, x2, y2\]"),
    ({"syms": []}, "not an image object"),
])
def test_bad_entries_name_the_file_and_entry(entry, match):
    with pytest.raises(MetadataError, match=match) as err:
        ChestXDetHarmonizer.harmonize_raw({"train": [entry], "test": None}, source="rows")
    assert "ChestX_Det_train.json entry 0" in str(err.value)


def test_fake_reads_both_splits_with_boxes_and_polygon_masks(tmp_path):
    root = write_chestx_det(tmp_path)
    with pytest.warns(UserWarning, match="6 of 7"):
        ds = ChestXDetDataset(root, output_cls=True, output_bbox=True, output_mask=True,
                              cache_dir=None, dtype=torch.float32)
    df = ds.harmonized_df
    assert len(ds) == 7 and df["split"].value_counts().to_dict() == {"train": 5, "test": 2}
    assert ds[1]["sample_id"] == "chestx_det:36200"
    two = ds[1]
    assert two["bbox"].shape == (2, 4) and two["cls"].sum() == 2
    assert two["mask"].shape == (1, 224, 224) and two["mask"].sum() > 0
    assert ds[0]["mask"].sum() == 0 and ds[0]["bbox"].shape == (0, 4)
    src = ds.source_mask(1)
    assert src.shape == cv2.imread(str(ds.image_file(1)), cv2.IMREAD_UNCHANGED).shape
    boxed = np.zeros_like(src)
    for b in df["boxes"].iat[1]:  # each polygon lies inside its box
        boxed[int(b["y_min"]):int(b["y_max"]) + 1, int(b["x_min"]):int(b["x_max"]) + 1] = 1
    assert src.sum() > 0 and not (src & (1 - boxed)).any()
    per = ds.source_masks(1)  # one channel per finding, their union the mask
    assert per.shape == (*src.shape, 13) and (per.max(axis=2) == src).all()
    drawn = {LABELS[k] for k in np.flatnonzero(per.sum(axis=(0, 1)))}
    assert drawn == {b["label"] for b in df["boxes"].iat[1]}
    assert two["masks"].shape == (13, 224, 224)


def test_without_the_test_file_only_train_is_read(tmp_path):
    root = write_chestx_det(tmp_path, n_train=3, n_test=1)
    (root / "ChestX_Det_test.json").unlink()
    with pytest.warns(UserWarning, match="only the train split"):
        df = ChestXDetHarmonizer(base_image_dir=root).harmonize(cache_dir=None)
    assert df["split"].unique().tolist() == ["train"] and len(df) == 3
