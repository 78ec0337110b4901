"""MS-CXR phrase grounding and MS-CXR-T pairs: hand rows, MIMIC join, prior images."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.ms_cxr import (LABEL_MAP, PAIR_SPEC, SPEC, MSCXRDataset, MSCXRHarmonizer,
                                        MSCXRTDataset, MSCXRTHarmonizer, mimic_path)
from radharmony.errors import MetadataError
from radharmony.fake.ms_cxr import write_ms_cxr
from radharmony.table.schema import validate

P = "files/p10/p10233088/s54276838/abc-1.jpg"
GROUNDING = f"""dicom_id,category_name,label_text,path,x,y,w,h,image_width,image_height,split
abc-1,Pneumonia,left basal consolidation,{P},100,200,50,100,1000,2000,train
abc-1,Pleural Effusion,small right effusion,{P},0,0,500,1000,1000,2000,train
"""
PAIRS = """subject_id,study_id,dicom_id,previous_study_id,previous_dicom_id,\
consolidation_progression,edema_progression,pleural_effusion_progression,\
pneumonia_progression,pneumothorax_progression
10000032,50414267,cur-1,53189527,pri-1,Worsening,,stable,,improving
"""


def test_phrases_and_boxes_normalized_by_the_row_size():
    raw = pd.read_csv(io.StringIO(GROUNDING), dtype=str)
    df = validate(MSCXRHarmonizer.harmonize_raw(raw, source="rows"), SPEC)
    assert len(df) == 1
    r = df.iloc[0]
    assert (r["patient_id"], r["study_id"], r["image_path"]) == ("10233088", "54276838", P)
    b = r["boxes"][0]
    assert (b["label"], b["phrase"]) == ("Pneumonia", "left basal consolidation")
    assert (b["x_min"], b["y_min"], b["x_max"], b["y_max"]) == (0.1, 0.1, 0.15, 0.15)
    assert r["Pneumonia"] == 1 and r["Pleural Effusion"] == 1 and np.isnan(r["Edema"])
    assert r["phrases"] == ["left basal consolidation", "small right effusion"]


def test_bad_path_is_clear():
    raw = pd.read_csv(io.StringIO(GROUNDING.replace("p10233088/s54276838", "x/y")), dtype=str)
    with pytest.raises(MetadataError, match="p<subject>/s<study>"):
        MSCXRHarmonizer.harmonize_raw(raw, source="rows")


def test_progression_one_hot_and_paths_match_mimic():
    raw = pd.read_csv(io.StringIO(PAIRS), dtype=str)
    r = validate(MSCXRTHarmonizer.harmonize_raw(raw, source="rows"), PAIR_SPEC).iloc[0]
    assert r["image_path"] == "files/p10/p10000032/s50414267/cur-1.jpg"
    assert r["prior_image_path"] == "files/p10/p10000032/s53189527/pri-1.jpg"
    assert (r["consolidation_worsening"], r["consolidation_stable"]) == (1, 0)
    assert r["pleural_effusion_stable"] == 1 and r["pneumothorax_improving"] == 1
    assert np.isnan(r["edema_stable"]) and np.isnan(r["pneumonia_worsening"])


def test_dicom_id_given_as_a_path_is_read_too():
    raw = pd.read_csv(io.StringIO(PAIRS.replace(",cur-1,", ",p10/p10000032/s50414267/cur-1,")
                                  .replace(",pri-1,", ",p10/p10000032/s53189527/pri-1,")),
                      dtype=str)
    r = MSCXRTHarmonizer.harmonize_raw(raw, source="rows").iloc[0]
    assert r["image_path"] == mimic_path("10000032", "50414267", "cur-1")
    assert r["prior_dicom_id"] == "pri-1"


def test_unknown_progression_value_is_an_error():
    raw = pd.read_csv(io.StringIO(PAIRS.replace("Worsening", "worse")), dtype=str)
    with pytest.raises(MetadataError, match="progression"):
        MSCXRTHarmonizer.harmonize_raw(raw, source="rows")


def test_fake_samples_carry_phrases_and_prior_images(tmp_path):
    root = write_ms_cxr(tmp_path)
    ds = MSCXRDataset(root, output_bbox=True, cache_dir=None, dtype=torch.float32)
    i = int(np.argmax(ds.harmonized_df["boxes"].map(len)))
    s = ds[i]
    assert len(s["bbox_phrases"]) == s["bbox"].shape[0] == 3
    assert ds.harmonized_df["sample_id"].iloc[i] == f"ms_cxr:{ds.harmonized_df['dicom_id'].iloc[i]}"
    pairs = MSCXRTDataset(root, cache_dir=tmp_path / "cache", dtype=torch.float32)
    s = pairs[0]
    assert s["img"].shape == s["prior_img"].shape == (1, 224, 224)
    assert not torch.equal(s["img"], s["prior_img"])
    direct = MSCXRTDataset(root, cache_dir=None, dtype=torch.float32)[0]
    assert torch.equal(direct["prior_img"], s["prior_img"])  # cached == uncached
    paths = MSCXRTDataset(root, cache_dir=None,
                          transform=lambda d: {**d, "img": np.zeros((1, 2, 2), np.float32)})[0]
    assert paths["prior_img"].endswith(pairs.harmonized_df["prior_image_path"].iloc[0])
    assert set(LABEL_MAP) == set(SPEC.label_cols)
