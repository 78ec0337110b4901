"""Object-CXR: the shape grammar, boxes of every shape type, masks at the image's size."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.object_cxr import (LABEL_MAP, SPEC, ObjectCXRDataset, ObjectCXRDevDataset,
                                            ObjectCXRHarmonizer, parse_annotation, shapes_mask)
from radharmony.errors import MetadataError
from radharmony.fake.object_cxr import write_object_cxr
from radharmony.table.schema import validate

ROWS = """image_name,annotation
/path/00001.jpg,0 10 20 30 40;1 50 50 70 60;2 5 5 15 5 10 12
00002.jpg,
"""


def harmonize(text=ROWS):
    raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    return validate(ObjectCXRHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_shapes_boxes_and_label():
    df = harmonize().set_index("study_id")
    assert df.loc["00001", "image_path"] == "train/00001.jpg"
    assert df["Foreign object"].tolist() == [1, 0] and df.loc["00002", "boxes"] == []
    kinds = [s["type"] for s in df.loc["00001", "shapes"]]
    assert kinds == ["rectangle", "ellipse", "polygon"]
    boxes = [(b["x_min"], b["y_min"], b["x_max"], b["y_max"]) for b in df.loc["00001", "boxes"]]
    assert boxes == [(10, 20, 30, 40), (50, 50, 70, 60), (5, 5, 15, 12)]  # polygon: its bbox
    assert LABEL_MAP == {"Foreign object": (("foreign_object", "exact"),)}


@pytest.mark.parametrize("cell", ["3 1 2 3 4", "0 1 2 3", "2 1 2 3 4", "0 a b c d"])
def test_bad_shapes_are_refused(cell):
    with pytest.raises(MetadataError, match="cannot be read"):
        parse_annotation(cell, where="train.csv, row 0")


def test_mask_rasterizes_each_type():
    shapes = parse_annotation("0 0 0 4 2;1 10 10 20 16;2 30 0 39 0 39 9", where="x")
    m = shapes_mask(shapes, (20, 40))
    assert m[:2, :4].all() and m[2, 0] == 0            # rectangle rows 0-1, cols 0-3
    assert m[13, 15] == 1 and m[10, 10] == 0            # ellipse: centre in, corner out
    assert m[1, 38] == 1 and m[8, 31] == 0              # polygon triangle above its diagonal


def test_fake_mask_and_boxes_follow_the_image(tmp_path):
    root = write_object_cxr(tmp_path)
    ds = ObjectCXRDataset(root, output_mask=True, output_bbox=True, cache_dir=None,
                          dtype=torch.float32)
    assert len(ds) == 6 and len(ObjectCXRDevDataset(root, cache_dir=None)) == 2
    s = ds[1]
    assert s["bbox"].shape == (3, 4) and s["mask"].shape == (1, 224, 224)
    assert s["mask"].sum() > 0 and ds[0]["mask"].sum() == 0
    src = ds.source_mask(1)
    import cv2
    h, w = cv2.imread(str(ds.image_file(1))).shape[:2]
    assert src.shape == (h, w)
