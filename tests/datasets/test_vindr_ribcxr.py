"""VinDr-RibCXR: the pandas columns-oriented rib JSON, 20 rib channels and the numbered mask,
rib boxes as anatomical regions."""

from __future__ import annotations

import pytest
import torch

from radharmony.datasets.vindr_ribcxr import (RIB_NAMES, RIBS, SPEC, VinDrRibCXRDataset,
                                              VinDrRibCXRHarmonizer, numbered_mask, rib_masks,
                                              rib_polygons)
from radharmony.errors import MetadataError
from radharmony.fake.vindr_ribcxr import write_vindr_ribcxr
from radharmony.table.schema import validate

SQUARE = [{"x": 1.0, "y": 1.0}, {"x": 4.0, "y": 1.0}, {"x": 4.0, "y": 3.0}, {"x": 1.0, "y": 3.0}]
LOW = [{"x": 2.0, "y": 2.0}, {"x": 6.0, "y": 2.0}, {"x": 6.0, "y": 5.0}, {"x": 2.0, "y": 5.0}]


def table(split="train", **ribs):
    """A two-image table: image 0 has the given ribs, image 1 only R1; the rest "None"."""
    out = {"img": {"0": f"data/{split}/img/{split}_a.png", "1": f"data/{split}/img/{split}_b.png"}}
    for rib in RIBS:
        out[rib] = {"0": ribs.get(rib, "None"), "1": SQUARE if rib == "R1" else "None"}
    return out


def test_rows_ribs_and_boxes_by_hand():
    raw = {"train": table(R2=SQUARE, L10=LOW), "val": table("val"), "files": None}
    df = validate(VinDrRibCXRHarmonizer.harmonize_raw(raw, source="rows"), SPEC)
    assert df["study_id"].tolist() == ["train_a", "train_b", "val_a", "val_b"]
    assert df["patient_id"].tolist() == df["study_id"].tolist()  # each image its own patient
    first = df.iloc[0]
    assert first["image_path"] == "data/train/img/train_a.png" and first["split"] == "train"
    assert first["n_ribs"] == 2 and sorted(first["ribs"]) == ["L10", "R2"]
    assert first["ribs"]["R2"] == [[1, 1], [4, 1], [4, 3], [1, 3]]
    boxes = [(b["label"], b["x_min"], b["y_min"], b["x_max"], b["y_max"]) for b in first["boxes"]]
    assert boxes == [("right rib 2", 1, 1, 4, 3), ("left rib 10", 2, 2, 6, 5)]
    assert df["split"].tolist()[2:] == ["valid", "valid"]
    assert df["split_raw"].tolist()[2:] == ["val", "val"]
    assert RIB_NAMES["L3"] == "left rib 3" and len(RIBS) == 20


def test_channels_and_the_numbered_mask_keep_the_rib_order():
    masks = rib_masks({"R2": [[1, 1], [4, 1], [4, 3], [1, 3]],
                       "L10": [[2, 2], [6, 2], [6, 5], [2, 5]]}, (7, 8))
    assert masks.shape == (7, 8, 20)
    assert masks[..., RIBS.index("R2")][1, 1] == 1 and masks[..., RIBS.index("L10")][5, 6] == 1
    assert masks.sum(axis=(0, 1))[[i for i, r in enumerate(RIBS) if r not in ("R2", "L10")]] \
        .sum() == 0
    numbered = numbered_mask(masks)
    assert numbered[1, 1] == 2        # R2 alone
    assert numbered[3, 3] == 20       # R2 and L10 cross: L10 is drawn later
    assert numbered[5, 6] == 20 and numbered[0, 0] == 0


@pytest.mark.parametrize("bad, match", [
    ({"img": {"0": "a.png"}}, "not a VinDr-RibCXR mask table"),
    (table(R3=[{"x": 1, "y": 2}]), "rib R3 is not a polygon"),
    (table(R3=[{"u": 1}, {"u": 2}, {"u": 3}]), "rib R3 is not a polygon"),
])
def test_bad_tables_name_the_file_and_entry(bad, match):
    with pytest.raises(MetadataError, match=match) as err:
        rib_polygons(bad, where="rows, train_mask.json")
    assert "train_mask.json" in str(err.value)


def test_fake_reads_both_splits_with_twenty_rib_channels(tmp_path):
    root = write_vindr_ribcxr(tmp_path)
    ds = VinDrRibCXRDataset(root, output_bbox=True, output_mask=True, cache_dir=None,
                            dtype=torch.float32)
    df = ds.harmonized_df
    assert len(ds) == 6 and df["split"].value_counts().to_dict() == {"train": 4, "valid": 2}
    assert df["n_ribs"].tolist() == [20, 18, 20, 20, 20, 20]
    assert df["image_path"].iat[0] == "data/train/img/VinDr_RibCXR_train_000.png"
    s = ds[1]
    assert s["sample_id"] == "vindr_ribcxr:VinDr_RibCXR_train_001"
    assert s["masks"].shape == (20, 224, 224) and s["mask"].shape == (1, 224, 224)
    drawn = s["masks"].sum(dim=(1, 2))
    assert drawn[RIBS.index("R10")] == 0 and drawn[RIBS.index("L10")] == 0
    assert (drawn > 0).sum() == 18 and s["bbox"].shape == (18, 4)
    assert set(s["mask"].unique().tolist()) == {0} | {k + 1 for k in range(20)} - {10, 20}
    src = ds.source_masks(1)
    assert src.shape[:2] == ds.source_size(1) == (640, 512)
    assert (ds.source_mask(1) == numbered_mask(src)).all()


def test_the_ribs_feed_anatomical_grounding_and_not_finding_detection():
    from radharmony.cli.mix import tasks_listing

    listed = {t["name"]: set(t["datasets"]) for t in tasks_listing()}
    assert "vindr_ribcxr" in listed["anatomical_grounding"]
    assert "vindr_ribcxr" not in listed["detect_findings"]


def test_the_val_table_is_found_beside_the_train_folder(tmp_path):
    root = write_vindr_ribcxr(tmp_path, n_train=2, n_val=1, images=False)
    h = VinDrRibCXRHarmonizer(csv_path=root / "data" / "train" / "train_mask.json")
    df = h.harmonize(cache_dir=None)
    assert df["split"].tolist() == ["train", "train", "valid"]


def test_listed_images_are_found_by_name():
    raw = {"train": table(), "val": None, "files": {"train_a.png": "pngs/train_a.png"}}
    df = VinDrRibCXRHarmonizer.harmonize_raw(raw, source="rows")
    assert df["image_path"].tolist() == ["pngs/train_a.png", "data/train/img/train_b.png"]
