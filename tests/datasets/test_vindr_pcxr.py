"""VinDr-PCXR: CSV spellings, the rad_ID column, boxes of any class, the fake release."""

from __future__ import annotations

import io

import pandas as pd
import torch

from radharmony.datasets.vindr_pcxr import (LABEL_MAP, LABELS, TRAIN_SPEC, VinDrPCXRDataset,
                                            VinDrPCXRHarmonizer, VinDrPCXRTestDataset)
from radharmony.fake.vindr_pcxr import write_vindr_pcxr
from radharmony.table.schema import validate

HEADER = "image_id,rad_ID," + ",".join(LABELS)


def cells(*positives) -> str:
    return ",".join("1.0" if k in positives else "0.0" for k in LABELS)


LABELS_CSV = f"""{HEADER}
aaa,R1,{cells("No finding")}
bbb,R3,{cells("Brocho-pneumonia", "Diagphramatic hernia")}
"""
BOXES = """image_id,rad_ID,class_name,x_min,y_min,x_max,y_max
aaa,R1,No finding,,,,
bbb,R3,Bronchectasis,1.0,2.0,30.0,40.0
"""


def harmonize() -> pd.DataFrame:
    raw = {"labels": pd.read_csv(io.StringIO(LABELS_CSV), dtype=str),
           "boxes": pd.read_csv(io.StringIO(BOXES), dtype={"rad_ID": str})}
    return validate(VinDrPCXRHarmonizer.harmonize_raw(raw, source="rows"),
                    TRAIN_SPEC).set_index("study_id")


def test_csv_spellings_are_the_label_names():
    assert "Brocho-pneumonia" in LABELS and "Diagphramatic hernia" in LABELS
    assert LABELS[0] == "No finding" and len(LABELS) == 15
    df = harmonize()
    assert df.loc["bbb", "Brocho-pneumonia"] == 1 and df.loc["bbb", "Diagphramatic hernia"] == 1
    assert df.loc["bbb", "No finding"] == 0 and df.loc["bbb", "Pneumonia"] == 0
    assert df.loc["aaa", "No finding"] == 1
    assert df.loc["bbb", "image_path"] == "train/bbb.dicom"


def test_reader_from_rad_ID_and_boxes_of_any_class():
    df = harmonize()
    assert df.loc["bbb", "rad_ids"] == "R3"
    assert df.loc["bbb", "boxes"] == [{"label": "Bronchectasis", "annotator": "R3", "x_min": 1.0,
                                       "y_min": 2.0, "x_max": 30.0, "y_max": 40.0}]
    assert df.loc["aaa", "boxes"] == []


def test_label_map_complete():
    assert set(LABEL_MAP) == set(LABELS)
    assert LABEL_MAP["Brocho-pneumonia"] == (("pneumonia", "narrower"),)


def test_fake_release(tmp_path):
    root = write_vindr_pcxr(tmp_path, n_train=3, n_test=2)
    train = VinDrPCXRDataset(root, output_bbox=True, output_cls=True, cache_dir=None,
                             dtype=torch.float32)
    test = VinDrPCXRTestDataset(root, cache_dir=None)
    assert (len(train), len(test)) == (3, 2)
    s = train[1]
    assert s["cls"][LABELS.index("Brocho-pneumonia")] == 1 and s["bbox"].shape == (2, 4)
    assert train.harmonized_df["image_path"].str.startswith("train/").all()
    assert test.harmonized_df["image_path"].str.startswith("test/").all()
