"""Chest ImaGenome: scene graphs -> region boxes with attributes, gold set, MIMIC-CXR-JPG join."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from radharmony.datasets.chest_imagenome import (GOLD_SPEC, SPEC, ChestImaGenomeDataset,
                                                 ChestImaGenomeGoldHarmonizer,
                                                 ChestImaGenomeHarmonizer, region_findings)
from radharmony.datasets.mimic import MIMICCXRJPGDataset
from radharmony.errors import MetadataError
from radharmony.fake.chest_imagenome import write_chest_imagenome
from radharmony.fake.mimic import write_mimic
from radharmony.table.schema import validate

GRAPH = {"image_id": "abc-def", "patient_id": 10000980, "study_id": 50985099,
         "viewpoint": "AP",
         "objects": [{"bbox_name": "right lung", "original_x1": 10, "original_y1": 20,
                      "original_x2": 110, "original_y2": 220},
                     {"bbox_name": "left lung", "original_x1": -5, "original_y1": 20,
                      "original_x2": 90, "original_y2": 220},
                     {"bbox_name": "trachea", "original_x1": 50, "original_y1": 20,
                      "original_x2": 50, "original_y2": 60},
                     {"bbox_name": "svc"}],
         "attributes": [{"bbox_name": "right lung", "phrases": ["Right basilar atelectasis."],
                         "attributes": [["anatomicalfinding|yes|atelectasis",
                                         "anatomicalfinding|no|pneumothorax"]]},
                        {"bbox_name": "left chest wall", "phrases": ["Left rib fracture."],
                         "attributes": [["anatomicalfinding|yes|rib fracture"]]}]}


def harmonize(graphs, tables=None):
    raw = {"graphs": [(f"scene_graph/{g['image_id']}_SceneGraph.json", g) for g in graphs],
           "tables": tables or {}}
    return validate(ChestImaGenomeHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_scene_graph_row_boxes_attributes_and_unboxed_regions():
    df = harmonize([GRAPH], {"split_test": pd.DataFrame({"dicom_id": ["abc-def"]}),
                             "avoid": pd.DataFrame({"dicom_id": ["abc-def"]})})
    row = df.iloc[0]
    assert row["image_path"] == "files/p10/p10000980/s50985099/abc-def.jpg"
    assert (row["patient_id"], row["study_id"], row["dicom_id"]) == \
        ("10000980", "50985099", "abc-def")
    assert row["view_position"] == "AP" and row["split"] == "test" and bool(row["avoid"])
    boxes = {b["label"]: b for b in row["boxes"]}
    assert set(boxes) == {"right lung", "left lung"}  # trachea: zero area; svc: no coordinates
    assert row["dropped_boxes"] == 1
    assert boxes["left lung"]["x_min"] == 0.0  # clipped at the edge
    assert boxes["right lung"]["attributes"] == ["anatomicalfinding|yes|atelectasis",
                                                 "anatomicalfinding|no|pneumothorax"]
    assert boxes["right lung"]["phrases"] == ["Right basilar atelectasis."]
    assert row["unboxed_regions"] == [{"region": "left chest wall", "phrases":
                                       ["Left rib fracture."], "attributes":
                                       ["anatomicalfinding|yes|rib fracture"]}]
    long = region_findings(df)
    assert long[["region", "boxed", "relation", "name"]].values.tolist() == [
        ["right lung", True, "yes", "atelectasis"], ["right lung", True, "no", "pneumothorax"],
        ["left chest wall", False, "yes", "rib fracture"]]


def test_split_file_with_image_id_column_and_bad_graph():
    df = harmonize([GRAPH], {"split_valid": pd.DataFrame({"image_id": ["abc-def.dcm"]})})
    assert df["split"].tolist() == ["valid"] and not df["avoid"].any()
    with pytest.raises(MetadataError, match="non-numeric"):
        harmonize([{**GRAPH, "objects": [{**GRAPH["objects"][0], "original_x1": "x"}]}])


def test_gold_ids_from_the_attribute_file_or_mimic_metadata():
    boxes = pd.DataFrame({"image_id": ["g1.dcm", "g1.dcm", "g2.dcm"],
                          "bbox_name": ["right lung", "Left Lung", "trachea"],
                          "original_x1": ["1", "2", "3"], "original_y1": ["1", "2", "3"],
                          "original_x2": ["9", "8", "7"], "original_y2": ["9", "8", "7"]})
    attrs = pd.DataFrame({"image_id": ["g1.dcm"], "patient_id": ["10000001"],
                          "study_id": ["50000001"], "bbox": ["left lung"],
                          "categoryID": ["anatomicalfinding"], "label_name": ["lung opacity"],
                          "context": ["yes"]})
    mimic = pd.DataFrame({"dicom_id": ["g2"], "subject_id": ["10000002"],
                          "study_id": ["50000002"], "ViewPosition": ["PA"]})
    df = validate(ChestImaGenomeGoldHarmonizer.harmonize_raw(
        {"boxes": boxes, "attributes": attrs, "mimic": mimic}, source="rows"), GOLD_SPEC)
    assert df["image_path"].tolist() == ["files/p10/p10000001/s50000001/g1.jpg",
                                         "files/p10/p10000002/s50000002/g2.jpg"]
    assert df["view_position"].tolist() == [None, "PA"]
    left = [b for b in df["boxes"].iloc[0] if b["label"] == "left lung"][0]
    assert left["attributes"] == ["anatomicalfinding|yes|lung opacity"]
    with pytest.warns(UserWarning, match="1 images without a subject"):
        df = ChestImaGenomeGoldHarmonizer.harmonize_raw({"boxes": boxes, "attributes": attrs,
                                                         "mimic": None})
    assert df["dicom_id"].tolist() == ["g1"]


def test_joins_mimic_ids_paths_and_cache(tmp_path):
    root = write_mimic(tmp_path / "mimic", n_subjects=2)
    base = MIMICCXRJPGDataset(root, cache_dir=tmp_path / "cache", dtype=torch.float32)
    write_chest_imagenome(tmp_path / "other", images=False)  # annotations from another tree
    import shutil
    import zipfile
    import json
    release = tmp_path / "other" / "chest-imagenome"
    with zipfile.ZipFile(release / "silver_dataset" / "scene_graph.zip", "w") as zf:
        for d, s, t in base.harmonized_df[["dicom_id", "patient_id", "study_id"]].values:
            zf.writestr(f"scene_graph/{d}_SceneGraph.json", json.dumps(
                {**GRAPH, "image_id": d, "patient_id": int(s), "study_id": int(t)}))
    shutil.move(str(release), root / "chest-imagenome")
    ds = ChestImaGenomeDataset(root, output_bbox=True, cache_dir=tmp_path / "cache",
                               dtype=torch.float32)
    cols = ["patient_id", "study_id", "image_path", "dicom_id"]
    mine = ds.harmonized_df[cols].sort_values("dicom_id").reset_index(drop=True)
    theirs = base.harmonized_df[cols].sort_values("dicom_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, theirs)
    base.pre_cache(progress=False)
    assert sorted(ds.cache_keys()) == sorted(base.cache_keys())
    assert ds[0]["bbox"].shape == (2, 4) and ds[0]["bbox_labels"] == ["right lung", "left lung"]


def test_fake_end_to_end(tmp_path):
    ds = ChestImaGenomeDataset(write_chest_imagenome(tmp_path), output_bbox=True, cache_dir=None)
    df = ds.harmonized_df
    assert len(df) == 5 and (df["dropped_boxes"] == 1).all()  # nested folder read too
    assert df["avoid"].sum() == 2 and set(df["split"]) == {"train", "valid", "test"}
