"""TBX11K: COCO boxes -> labels, the supercategory, normalized boxes, fake samples."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from radharmony.datasets.tbx11k import (LABEL_MAP, LABELS, SPEC, TBX11KDataset, TBX11KHarmonizer,
                                        TBX11KValDataset)
from radharmony.errors import MetadataError
from radharmony.fake.tbx11k import write_tbx11k
from radharmony.table.schema import validate

# the real fixture's form: ids 1, 2, 601; two category-2 boxes on image 2
COCO = {
    "categories": [{"id": 1, "name": "ActiveTuberculosis", "supercategory": "Tuberculosis"},
                   {"id": 2, "name": "ObsoletePulmonaryTuberculosis",
                    "supercategory": "Tuberculosis"},
                   {"id": 3, "name": "PulmonaryTuberculosis", "supercategory": "Tuberculosis"}],
    "images": [{"id": 1, "file_name": "tb/tb0005.png", "width": 512, "height": 512,
                "date_captured": "2020-06-24 12:42:41.793194", "license": 1, "coco_url": "",
                "flickr_url": ""},
               {"id": 2, "file_name": "tb/tb0007.png", "width": 512, "height": 512,
                "date_captured": "2020-06-24 12:42:41.793194", "license": 1, "coco_url": "",
                "flickr_url": ""},
               {"id": 601, "file_name": "health/h0001.png", "width": 512, "height": 512,
                "date_captured": "2020-06-24 12:42:41.793194", "license": 1, "coco_url": "",
                "flickr_url": ""}],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "iscrowd": 0, "area": 1793,
         "bbox": [381.5, 126.0, 40.5, 44.0], "width": 512, "height": 512},
        {"id": 2, "image_id": 2, "category_id": 2, "iscrowd": 0, "area": 19866,
         "bbox": [307.0, 62.0, 135.5, 146.5], "width": 512, "height": 512},
        {"id": 3, "image_id": 2, "category_id": 2, "iscrowd": 0, "area": 14665,
         "bbox": [144.0, 52.0, 128.0, 116.0], "width": 512, "height": 512}]}


def harmonize(coco: dict):
    return validate(TBX11KHarmonizer.harmonize_raw(coco, source="rows"), SPEC)


def test_labels_from_boxes_and_the_supercategory():
    df = harmonize(COCO).set_index("study_id")
    assert list(df.index) == ["tb/tb0005", "tb/tb0007", "health/h0001"]
    assert df.loc["tb/tb0005", ["ActiveTuberculosis", "ObsoletePulmonaryTuberculosis",
                                "Tuberculosis"]].tolist() == [1, 0, 1]
    assert df.loc["tb/tb0007", ["ActiveTuberculosis", "ObsoletePulmonaryTuberculosis",
                                "Tuberculosis"]].tolist() == [0, 1, 1]
    assert df.loc["health/h0001", list(LABELS)].tolist() == [0, 0, 0, 0]
    assert (df["PulmonaryTuberculosis"] == 0).all()
    assert df.loc["health/h0001", "image_path"] == "imgs/health/h0001.png"
    assert df.loc["tb/tb0007", "image_category"] == "tb"


def test_boxes_xywh_to_normalized_xyxy():
    df = harmonize(COCO).set_index("study_id")
    (b,) = df.loc["tb/tb0005", "boxes"]
    assert b["label"] == "ActiveTuberculosis"
    assert b["x_min"] == pytest.approx(381.5 / 512) and b["x_max"] == pytest.approx(422 / 512)
    assert b["y_max"] == pytest.approx(170 / 512)
    assert len(df.loc["tb/tb0007", "boxes"]) == 2 and df.loc["health/h0001", "boxes"] == []


def test_label_map_covers_every_label():
    assert set(LABEL_MAP) == set(LABELS)
    assert LABEL_MAP["Tuberculosis"] == (("tuberculosis", "exact"),)


@pytest.mark.parametrize("bad, match", [
    ({"annotations": [{"id": 9, "image_id": 77, "category_id": 1, "bbox": [1, 2, 3, 4]}]},
     "unknown image"),
    ({"annotations": [{"id": 9, "image_id": 1, "category_id": 1, "bbox": "x"}]},
     "numeric bbox"),
    ({"images": [{"id": 1, "file_name": "a.png"}]}, "width or height")])
def test_malformed_coco_names_the_entry(bad, match):
    with pytest.raises(MetadataError, match=match):
        harmonize({**COCO, **bad})


def test_not_coco_is_refused(tmp_path):
    p = tmp_path / "TBX11K_train.json"
    p.write_text(json.dumps({"images": []}))
    with pytest.raises(MetadataError, match="not a COCO detection file"):
        TBX11KHarmonizer(csv_path=p).harmonize()


def test_fake_dataset_finds_json_under_annotations(tmp_path):
    root = write_tbx11k(tmp_path)
    ds = TBX11KDataset(root, output_cls=True, output_bbox=True, cache_dir=None,
                       dtype=torch.float32)
    assert len(ds) == 6 and len(TBX11KValDataset(root, cache_dir=None)) == 2
    i = int(np.flatnonzero(ds.harmonized_df["study_id"] == "tb/tb0007")[0])
    s = ds[i]
    assert s["bbox"].shape == (2, 4) and s["bbox_labels"] == ["ObsoletePulmonaryTuberculosis"] * 2
    rec = ds.harmonized_df["boxes"].iloc[i][0]
    assert s["bbox"][0, 0].item() == pytest.approx(rec["x_min"] * 224, abs=1e-3)  # square image
    assert s["cls"].tolist() == [0, 1, 0, 1]
