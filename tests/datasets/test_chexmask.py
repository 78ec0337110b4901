"""CheXmask: the 1-indexed row-major code, landmarks, ids joining the base datasets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.chexmask import (CHEXPERT_SPEC, CheXmaskCheXpertDataset,
                                          CheXmaskCheXpertHarmonizer, CheXmaskNIHDataset,
                                          decode_chexmask, parse_landmarks)
from radharmony.datasets.chexpert import CheXpertDataset
from radharmony.errors import MetadataError
from radharmony.fake.chexmask import encode_chexmask, write_chexmask, write_chexmask_table
from radharmony.fake.chexpert import write_chexpert
from radharmony.annotations.masks import rle_decode
from radharmony.table.schema import validate


def test_code_is_absolute_one_indexed_row_major():
    m = decode_chexmask("1 2 6 1", height=2, width=3)
    assert m.tolist() == [[1, 1, 0], [0, 0, 1]]  # pixel 1 is the top-left, runs along rows
    zero_based = rle_decode("1 2", height=2, width=3)
    one_based = decode_chexmask("1 2", height=2, width=3)
    assert zero_based.tolist()[0] == [0, 1, 1] and one_based.tolist()[0] == [1, 1, 0]
    mask = (np.arange(35).reshape(5, 7) % 3 == 0).astype(np.uint8)
    assert np.array_equal(decode_chexmask(encode_chexmask(mask), height=5, width=7), mask)
    with pytest.raises(MetadataError, match="1-indexed"):
        decode_chexmask("0 3", height=2, width=3)
    assert decode_chexmask("", height=2, width=2).sum() == 0


def test_landmarks_both_printed_forms():
    a = parse_landmarks("[[10 20]\n [30 40]]")
    b = parse_landmarks("10,20,30,40")
    assert a.tolist() == b.tolist() == [[10, 20], [30, 40]]


def test_chexpert_ids_lose_the_release_prefix():
    raw = pd.DataFrame({"Path": ["CheXpert-v1.0-small/train/patient00004/study2/view1_frontal.jpg",
                                 "train/patient00005/study1/view2_lateral.jpg"],
                        "Dice RCA (Max)": ["0.9", "0.8"], "Dice RCA (Mean)": ["0.7", "0.6"],
                        "Landmarks": ["1,2", "3,4"], "Left Lung": ["1 1", ""],
                        "Right Lung": ["", ""], "Heart": ["", ""], "Height": ["2", ""],
                        "Width": ["2", ""]})
    df = validate(CheXmaskCheXpertHarmonizer.harmonize_raw(raw, source="rows"), CHEXPERT_SPEC)
    assert df["image_path"].tolist() == ["train/patient00004/study2/view1_frontal.jpg",
                                         "train/patient00005/study1/view2_lateral.jpg"]
    assert df["patient_id"].tolist() == ["patient00004", "patient00005"]
    assert df["study_id"].tolist()[0] == "patient00004/study2"
    assert df["dice_rca_mean"].tolist() == [0.7, 0.6]  # by name, whatever the column order
    assert pd.isna(df["height"].iloc[1])


def test_nih_fake_mask_values_and_side(tmp_path):
    ds = CheXmaskNIHDataset(write_chexmask(tmp_path, "nih"), output_mask=True, cache_dir=None,
                            dtype=torch.float32)
    src = ds.source_mask(0)
    h, w = src.shape
    assert (h, w) == (72, 56)
    assert src[int(h * .45), int(w * .3)] == 1  # "Right Lung" on the image's left
    assert src[int(h * .45), int(w * .7)] == 2 and src[int(h * .62), int(w * .55)] == 3
    assert ds.landmarks(0).shape == ds.landmarks(1).shape == (120, 2)
    assert ds.source_mask(len(ds) - 1).shape == (1024, 1024)  # empty Height/Width
    assert ds[0]["mask"].shape == (1, 224, 224)
    assert ds.harmonized_df["sample_id"].iloc[0] == "chexmask_nih:00000001_000"


def test_overlay_on_chexpert_shares_ids_and_cache(tmp_path):
    release = write_chexpert(tmp_path / "cx", n_patients=3)
    base = CheXpertDataset(release, cache_dir=tmp_path / "cache", dtype=torch.float32)
    import cv2
    sizes = {p: cv2.imread(str(release / p), cv2.IMREAD_GRAYSCALE).shape
             for p in base.harmonized_df["image_path"]}
    write_chexmask_table(release / "CheXpert.csv.gz", "Path", sizes)
    masks = CheXmaskCheXpertDataset(release, output_mask=True, cache_dir=tmp_path / "cache",
                                    dtype=torch.float32)
    cols = ["patient_id", "study_id", "image_path"]
    pd.testing.assert_frame_equal(masks.harmonized_df[cols], base.harmonized_df[cols])
    base.pre_cache(progress=False)
    assert masks.cache_keys() == base.cache_keys()
    assert torch.equal(masks[0]["img"], base[0]["img"])
    assert masks[0]["mask"].max() == 3


@pytest.mark.parametrize("key", ["mimic", "padchest"])
def test_joined_overlays_share_the_base_ids_and_cache(tmp_path, key):
    from radharmony.datasets.chexmask import CheXmaskMIMICDataset, CheXmaskPadChestDataset
    from radharmony.datasets.mimic import MIMICCXRJPGDataset
    from radharmony.datasets.padchest import PadChestDataset

    root = write_chexmask(tmp_path, key)
    base_cls, mask_cls = {"mimic": (MIMICCXRJPGDataset, CheXmaskMIMICDataset),
                          "padchest": (PadChestDataset, CheXmaskPadChestDataset)}[key]
    with pytest.warns(UserWarning) if key == "mimic" else _no_warning():
        base = base_cls(root, cache_dir=tmp_path / "cache", dtype=torch.float32)
    masks = mask_cls(root, output_mask=True, cache_dir=tmp_path / "cache", dtype=torch.float32)
    cols = ["patient_id", "study_id", "image_path"]
    pd.testing.assert_frame_equal(masks.harmonized_df[cols], base.harmonized_df[cols])
    base.pre_cache(progress=False)
    assert masks.cache_keys() == base.cache_keys()
    assert masks[0]["mask"].max() == 3


def test_joined_overlay_drops_unknown_ids_and_needs_the_base_table():
    from radharmony.datasets.chexmask import CheXmaskMIMICHarmonizer
    from radharmony.errors import MetadataNotFoundError

    raw = pd.DataFrame({"dicom_id": ["d1", "d2"], "Dice RCA (Mean)": ["0.8", "0.9"],
                        "Dice RCA (Max)": ["0.9", "0.9"], "Landmarks": ["1,2", "3,4"],
                        "Left Lung": ["", ""], "Right Lung": ["", ""], "Heart": ["", ""],
                        "Height": ["4", "4"], "Width": ["4", "4"]})
    meta = pd.DataFrame({"dicom_id": ["d2"], "subject_id": ["10000032"], "study_id": ["5001"]})
    with pytest.warns(UserWarning, match="1 of 2 CheXmask ids are not in the mimic"):
        df = CheXmaskMIMICHarmonizer.harmonize_raw({"table": raw, "base_table": meta})
    assert df["image_path"].tolist() == ["files/p10/p10000032/s5001/d2.jpg"]
    assert df["dice_rca_mean"].tolist() == [0.9]
    with pytest.raises(MetadataNotFoundError, match="mimic metadata table"):
        CheXmaskMIMICHarmonizer.harmonize_raw({"table": raw, "base_table": None})


def _no_warning():
    import contextlib

    return contextlib.nullcontext()


def test_mimic_overlay_sample_ids_equal_the_base(tmp_path):
    from radharmony.datasets.chexmask import CheXmaskMIMICDataset
    from radharmony.datasets.mimic import MIMICCXRJPGDataset

    root = write_chexmask(tmp_path, "mimic")
    with pytest.warns(UserWarning):
        base = MIMICCXRJPGDataset(root, cache_dir=None)
    masks = CheXmaskMIMICDataset(root, cache_dir=None)
    assert [s.split(":", 1)[1] for s in masks.harmonized_df["sample_id"]] == \
        [s.split(":", 1)[1] for s in base.harmonized_df["sample_id"]]
