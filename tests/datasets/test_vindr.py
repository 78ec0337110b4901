"""VinDr-CXR: label meanings on hand-written rows, the real table's counts, fake samples."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.vindr import SPEC, VinDrCXRDataset, VinDrCXRHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.vindr import write_vindr
from radharmony.table.schema import validate
from txv_data import txv_file

ROWS = """image_id,class_name,class_id,rad_id,x_min,y_min,x_max,y_max
aaa,No finding,14,R1,,,,
bbb,Cardiomegaly,3,R2,10.0,20.0,110.0,80.0
aaa,No finding,14,R2,,,,
bbb,No finding,14,R3,,,,
aaa,No finding,14,R3,,,,
bbb,Cardiomegaly,3,R4,12.0,22.0,108.0,82.0
bbb,Pleural effusion,10,R4,0.0,50.0,30.0,90.0
"""


def harmonize(text: str) -> pd.DataFrame:
    raw = pd.read_csv(io.StringIO(text), dtype={"image_id": str, "rad_id": str})
    return validate(VinDrCXRHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_labels_any_reader_and_no_finding_only_when_unanimous():
    df = harmonize(ROWS).set_index("study_id")
    assert df.loc["aaa", "No finding"] == 1 and df.loc["aaa", "Cardiomegaly"] == 0
    assert df.loc["bbb", "No finding"] == 0  # R3 saw nothing, R2 and R4 did
    assert df.loc["bbb", "Cardiomegaly"] == 1 and df.loc["bbb", "Pleural effusion"] == 1
    assert df.loc["bbb", "Pneumothorax"] == 0
    assert df.loc["bbb", "rad_ids"] == "R2,R3,R4"
    assert df.loc["aaa", "image_path"] == "aaa.dicom"


def test_boxes_keep_each_reader_in_source_pixels():
    df = harmonize(ROWS).set_index("study_id")
    boxes = df.loc["bbb", "boxes"]
    assert [(b["label"], b["annotator"]) for b in boxes] == [
        ("Cardiomegaly", "R2"), ("Cardiomegaly", "R4"), ("Pleural effusion", "R4")]
    assert boxes[0]["x_max"] == 110.0 and df.loc["aaa", "boxes"] == []
    assert SPEC.box_units == "pixel"


def test_unknown_finding_warns_and_stays_a_box():
    text = ROWS + "aaa,Rib fracture,,R1,1.0,2.0,3.0,4.0\n"
    with pytest.warns(UserWarning, match="Rib fracture"):
        df = harmonize(text).set_index("study_id")
    assert df.loc["aaa", "boxes"][0]["label"] == "Rib fracture"


def test_missing_column_is_a_clear_error():
    with pytest.raises(MetadataError, match="rad_id"):
        harmonize(ROWS.replace("rad_id", "reader"))


def test_real_table_counts():
    path = txv_file("vinbigdata-train.csv.gz")
    df = VinDrCXRHarmonizer(csv_path=path).harmonize()
    assert len(df) == SPEC.expected["images"] == 15_000
    assert df["image_path"].is_unique
    assert df["boxes"].map(len).sum() == SPEC.expected["boxes"] == 36_096
    readers = df["rad_ids"].str.split(",")
    assert (readers.map(len) == 3).all()
    assert len(set().union(*readers)) == SPEC.expected["radiologists"]
    annotators = {b["annotator"] for bs in df["boxes"] for b in bs}
    assert annotators <= set().union(*readers)
    assert df[list(SPEC.label_cols)].isin([0, 1]).all().all()
    assert int(df["No finding"].sum()) == 10_606
    assert int(df["Cardiomegaly"].sum()) == 2_300


def test_fake_dataset_boxes_follow_the_image(tmp_path):
    image_dir = write_vindr(tmp_path, n_images=4)
    ds = VinDrCXRDataset(image_dir, output_cls=True, output_bbox=True, cache_dir=None,
                         dtype=torch.float32)
    assert len(ds) == 4
    with_box = next(i for i in range(len(ds)) if ds.harmonized_df["boxes"].iloc[i])
    sample = ds[with_box]
    rec = ds.harmonized_df["boxes"].iloc[with_box][0]
    import pydicom
    dcm = pydicom.dcmread(ds.image_file(with_box), stop_before_pixels=True)
    scale = 224 / max(dcm.Rows, dcm.Columns)
    left = (224 - round(dcm.Columns * scale)) // 2
    assert sample["img"].shape == (1, 224, 224)
    assert sample["cls"].shape == (len(SPEC.label_cols),)
    assert sample["bbox"].shape[1] == 4 and sample["bbox_labels"][0] == rec["label"]
    new_w = round(dcm.Columns * scale)
    assert sample["bbox"][0, 0].item() == pytest.approx(rec["x_min"] * new_w / dcm.Columns
                                                         + left, abs=1e-3)
    assert sample["bbox_annotators"][0] == rec["annotator"]
    no_box = ds.harmonized_df["boxes"].map(len).to_numpy().argmin()
    assert ds[int(no_box)]["bbox"].shape == (0, 4)
    assert np.isfinite(sample["img"].numpy()).all()
