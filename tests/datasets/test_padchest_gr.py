"""PadChest-GR: grounded sentences, two readers' normalised boxes, the PadChest join."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from radharmony.datasets.padchest import PadChestDataset
from radharmony.datasets.padchest_gr import SPEC, PadChestGRDataset, PadChestGRHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.padchest import write_padchest
from radharmony.fake.padchest_gr import write_padchest_gr
from radharmony.table.schema import validate

STUDY = {"StudyID": "s1", "ImageID": "s1_abc.png", "findings": [
    {"sentence_en": "Left pleural effusion.", "sentence_es": "Derrame pleural izquierdo.",
     "abnormal": True, "labels": ["pleural effusion"], "locations": ["left"],
     "progression": None, "boxes": [[0.5, 0.5, 0.9, 0.9], [0.6, 0.4, 0.8, 0.7]],
     "extra_boxes": [0.55, 0.5, 0.9, 0.95]},
    {"sentence_en": "No pneumothorax.", "sentence_es": "Sin neumotórax.", "abnormal": False,
     "labels": ["pneumothorax"], "boxes": [], "extra_boxes": []}]}
NORMAL = {"StudyID": "s2", "ImageID": "s2_x.png", "findings": [
    {"sentence_en": "Normal.", "sentence": "Normal.", "abnormal": False, "labels": []}]}
MASTER = pd.DataFrame({"StudyID": ["s1", "s2"], "ImageID": ["s1_abc.png", "s2_x.png"],
                       "PatientID": ["p1", "p2"], "PatientAge": ["63", "41"],
                       "split": ["train", "validation"]})


def harmonize(studies, master=MASTER, padchest=None):
    return validate(PadChestGRHarmonizer.harmonize_raw(
        {"studies": studies, "master": master, "padchest": padchest}, source="rows"), SPEC)


def test_sentences_readers_and_labels():
    df = harmonize([STUDY, NORMAL]).set_index("study_id")
    s1 = df.loc["s1"]
    assert s1["patient_id"] == "p1" and s1["image_path"] == "Padchest_GR_files/s1_abc.png"
    assert s1["report"] == "Left pleural effusion. No pneumothorax."
    assert s1["report_es"] == "Derrame pleural izquierdo. Sin neumotórax."
    assert [b["annotator"] for b in s1["boxes"]] == ["1", "1", "2"]  # extra_boxes: reader 2
    assert s1["boxes"][2]["x_max"] == 0.9 and s1["boxes"][0]["label"] == "pleural effusion"
    assert s1["boxes"][0]["sentence_en"] == "Left pleural effusion."
    assert (s1["Effusion"], s1["Pneumothorax"], s1["No Finding"]) == (1, 0, 0)  # negated: 0
    assert df.loc["s2", "No Finding"] == 1 and df.loc["s2", "report_es"] == "Normal."
    assert df["split"].tolist() == ["train", "valid"]
    assert df.loc["s1", "patient_age"] == 63


def test_padchest_table_places_images_in_its_tree():
    pc = pd.DataFrame({"ImageID": ["s1_abc.png"], "ImageDir": ["7"]})
    with pytest.warns(UserWarning, match="1 of 2 images are not in the PadChest table"):
        df = harmonize([STUDY, NORMAL], padchest=pc)
    assert df["image_path"].tolist() == ["7/s1_abc.png", "Padchest_GR_files/s2_x.png"]


def test_bad_box_and_bad_study_name_the_entry():
    bad = {**STUDY, "findings": [{**STUDY["findings"][0], "boxes": [[0.1, 0.2]]}]}
    with pytest.raises(MetadataError, match=r"study 0, findings\[0\].boxes"):
        harmonize([bad])
    with pytest.raises(MetadataError, match="not a PadChest-GR study"):
        harmonize([{"findings": []}])


def test_fake_reader_selection(tmp_path):
    ds = PadChestGRDataset(write_padchest_gr(tmp_path), output_bbox=True, cache_dir=None,
                           bbox_annotator="2")
    s = ds[0]
    assert set(s["bbox_annotators"]) == {"2"} and len(s["bbox_sentences"]) == len(s["bbox"])
    both = PadChestGRDataset(write_padchest_gr(tmp_path), output_bbox=True, cache_dir=None)
    assert set(both[0]["bbox_annotators"]) == {"1", "2"}


def test_joins_padchest_ids_paths_and_cache(tmp_path):
    root = write_padchest(tmp_path / "pc", n_patients=3)
    base = PadChestDataset(root, cache_dir=tmp_path / "cache", dtype=torch.float32)
    df = base.harmonized_df
    studies = [{"StudyID": s, "ImageID": i.split("/", 1)[1], "findings": [
        {**STUDY["findings"][0]}]} for s, i in zip(df["study_id"], df["image_path"])]
    (root / "grounded_reports_20240819.json").write_text(json.dumps(studies))
    pd.DataFrame({"StudyID": df["study_id"], "ImageID": df["image_path"].str.split("/").str[1],
                  "PatientID": df["patient_id"]}).to_csv(root / "master_table.csv", index=False)
    gr = PadChestGRDataset(root, cache_dir=tmp_path / "cache", dtype=torch.float32)
    cols = ["patient_id", "study_id", "image_path"]
    pd.testing.assert_frame_equal(gr.harmonized_df[cols], df[cols])
    base.pre_cache(progress=False)
    assert gr.cache_keys() == base.cache_keys()
    assert torch.equal(gr[0]["img"], base[0]["img"])
