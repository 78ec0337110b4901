"""VinDr-CXR PhysioNet release: 28 labels, reader aggregation, the consensus test set, boxes."""

from __future__ import annotations

import io

import pandas as pd
import pytest
import torch

from radharmony.datasets.vindr_physionet import (LABEL_MAP, LABELS, TEST_SPEC, TRAIN_SPEC,
                                                 VinDrPhysioNetDataset, VinDrPhysioNetHarmonizer,
                                                 VinDrTestDataset, VinDrTestHarmonizer)
from radharmony.errors import MetadataError
from radharmony.fake.vindr_physionet import write_vindr_physionet
from radharmony.table.schema import validate


def _labels(header: list[str], rows: list[list]) -> str:
    return "\n".join(",".join(map(str, r)) for r in [header, *rows]) + "\n"


def row(image_id, rad, positives=()):
    cells = [int(k in positives) for k in LABELS]
    return [image_id, rad, *cells] if rad else [image_id, *cells]


TRAIN = _labels(["image_id", "rad_id", *LABELS], [
    row("aaa", "R1", ["No finding"]), row("aaa", "R2", ["No finding"]),
    row("aaa", "R3", ["No finding"]),
    row("bbb", "R9", ["Rib fracture", "COPD"]), row("bbb", "R10", ["No finding"]),
    row("bbb", "R2", ["Lung cyst"])])
BOXES = """image_id,class_name,rad_id,x_min,y_min,x_max,y_max
bbb,Rib fracture,R9,10.0,20.0,110.0,80.0
aaa,No finding,R1,,,,
bbb,Lung cyst,R2,5,6,50,60
"""


def harmonize(cls, labels: str, boxes: str | None) -> pd.DataFrame:
    raw = {"labels": pd.read_csv(io.StringIO(labels), dtype=str),
           "boxes": None if boxes is None else pd.read_csv(io.StringIO(boxes),
                                                           dtype={"rad_id": str})}
    return validate(cls.harmonize_raw(raw, source="rows"), cls.spec).set_index("study_id")


def test_any_reader_marks_a_label_no_finding_needs_all():
    df = harmonize(VinDrPhysioNetHarmonizer, TRAIN, BOXES)
    assert df.loc["aaa", "No finding"] == 1 and df.loc["aaa", "Rib fracture"] == 0
    assert df.loc["bbb", "No finding"] == 0  # R10 saw nothing, R9 and R2 did
    assert df.loc["bbb", "Rib fracture"] == 1 and df.loc["bbb", "COPD"] == 1
    assert df.loc["bbb", "Lung cyst"] == 1 and df.loc["bbb", "Pneumothorax"] == 0
    assert df.loc["bbb", "rad_ids"] == "R2,R9,R10"
    assert df.loc["aaa", "image_path"] == "train/aaa.dicom"
    assert (df["split"] == "train").all()


def test_boxes_keep_reader_and_local_labels_beyond_kaggle():
    df = harmonize(VinDrPhysioNetHarmonizer, TRAIN, BOXES)
    assert [(b["label"], b["annotator"], b["x_max"]) for b in df.loc["bbb", "boxes"]] == [
        ("Rib fracture", "R9", 110.0), ("Lung cyst", "R2", 50.0)]
    assert df.loc["aaa", "boxes"] == []


def test_test_set_singular_spelling_and_no_reader():
    header = ["image_id", *[("Other disease" if k == "Other diseases" else k) for k in LABELS]]
    labels = _labels(header, [row("ccc", None, ["Other diseases", "Tuberculosis"]),
                              row("ddd", None, ["No finding"])])
    boxes = "image_id,class_name,x_min,y_min,x_max,y_max\nccc,Other disease,1,2,3,4\n"
    with pytest.warns(UserWarning, match="Other diseases"):  # a global label drawn as a box
        df = harmonize(VinDrTestHarmonizer, labels, boxes)
    assert df.loc["ccc", "Other diseases"] == 1 and df.loc["ccc", "Tuberculosis"] == 1
    assert df.loc["ddd", "No finding"] == 1 and df.loc["ddd", "Other diseases"] == 0
    assert df.loc["ccc", "image_path"] == "test/ccc.dicom"
    assert df.loc["ccc", "rad_ids"] is None
    assert df.loc["ccc", "boxes"][0]["annotator"] is None


def test_bad_cell_and_missing_label_column_are_clear_errors():
    with pytest.raises(MetadataError, match="unknown value"):
        harmonize(VinDrPhysioNetHarmonizer, TRAIN.replace("R1,0", "R1,2", 1), None)
    with pytest.raises(MetadataError, match="COPD"):
        harmonize(VinDrPhysioNetHarmonizer, TRAIN.replace("COPD", "C0PD"), None)


def test_label_map_covers_every_label_with_known_relations():
    assert set(LABEL_MAP) == set(LABELS)
    rel = {r for v in LABEL_MAP.values() if v for _, r in v}
    assert rel <= {"exact", "narrower", "broader", "approximate"}
    assert ("fibrosis", "exact") in LABEL_MAP["Pulmonary fibrosis"]
    assert ("nodule", "broader") in LABEL_MAP["Nodule/Mass"]


def test_fake_release_both_keys_share_one_root(tmp_path):
    root = write_vindr_physionet(tmp_path, n_train=4, n_test=3)
    train = VinDrPhysioNetDataset(root, output_cls=True, output_bbox=True, cache_dir=None,
                                  dtype=torch.float32)
    test = VinDrTestDataset(root, output_cls=True, cache_dir=None, dtype=torch.float32)
    assert (len(train), len(test)) == (4, 3)
    assert train.harmonized_df["sample_id"].iloc[0] == \
        f"vindr_cxr_physionet:{train.harmonized_df['study_id'].iloc[0]}"
    assert train.harmonized_df["rad_ids"].str.count(",").eq(2).all()
    rib = train.harmonized_df.set_index("study_id")["Rib fracture"]
    assert rib.iloc[1] == 1
    assert test.harmonized_df.set_index("study_id")["Other diseases"].iloc[1] == 1
    s = train[1]
    assert s["cls"].shape == (28,) and s["img"].shape == (1, 224, 224)
    assert "Rib fracture" in s["bbox_labels"]
    assert TRAIN_SPEC.expected["images"] + TEST_SPEC.expected["images"] == 18_000
