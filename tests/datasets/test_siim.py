"""SIIM-ACR: SIIM's run-length code, one sample per image, merged masks, real counts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.siim import (MASK_SHAPE, SPEC, SIIMPneumothoraxDataset,
                                      SIIMPneumothoraxHarmonizer)
from radharmony.errors import MetadataError
from radharmony.fake.siim import write_siim
from radharmony.imaging.read import read_image
from radharmony.annotations.masks import merge_masks, rle_decode, rle_encode
from radharmony.table.schema import validate
from txv_data import txv_file

SHARED = Path(__file__).resolve().parents[3] / "shared"


def test_relative_column_major_code_by_hand():
    # runs: start 1 length 2 -> pixels 1, 2; then 3 past that run's end (3) -> pixel 6
    mask = rle_decode("1 2 3 1", height=3, width=4, relative=True, order="F")
    assert mask.tolist() == [[0, 0, 1, 0],
                             [1, 0, 0, 0],
                             [1, 0, 0, 0]]
    absolute = rle_decode("1 2 6 1", height=3, width=4, relative=False, order="F")
    assert (absolute == mask).all()


@pytest.mark.parametrize("relative", [True, False])
@pytest.mark.parametrize("order", ["C", "F"])
def test_encode_decode_round_trip(relative, order):
    rng = np.random.default_rng(1)
    mask = (rng.random((17, 23)) > 0.6).astype(np.uint8)
    code = rle_encode(mask, relative=relative, order=order)
    assert (rle_decode(code, height=17, width=23, relative=relative, order=order) == mask).all()
    assert rle_encode(np.zeros((3, 3))) == "-1"


@pytest.mark.parametrize("code, match", [("1 2 3", "malformed"), ("a b", "malformed"),
                                         ("0 13", "runs past")])
def test_bad_codes_raise_naming_the_row(code, match):
    with pytest.raises(MetadataError, match=match) as err:
        rle_decode(code, height=3, width=4, where="train-rle.csv, ImageId X")
    assert "ImageId X" in str(err.value)


def harmonize(text: str) -> pd.DataFrame:
    raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    return validate(SIIMPneumothoraxHarmonizer.harmonize_raw({"rle": raw, "files": None},
                                                             source="rows"), SPEC)


def test_one_sample_per_image_with_all_instances():
    df = harmonize("ImageId, EncodedPixels\nA, -1\nB,5 2 10 3\nC,-1\nB,100 4\n")
    assert list(df["study_id"]) == ["A", "B", "C"]
    assert df["Pneumothorax"].tolist() == [0, 1, 0]
    assert df["rle"].tolist() == [[], ["5 2 10 3", "100 4"], []]
    assert df["image_path"].tolist() == ["A.dcm", "B.dcm", "C.dcm"]


def test_header_without_the_leading_space_is_refused():
    with pytest.raises(MetadataError, match="EncodedPixels"):
        harmonize("ImageId,EncodedPixels\nA,-1\n")


def test_real_table_counts():
    path = txv_file("siim-pneumothorax-train-rle.csv.gz")
    df = SIIMPneumothoraxHarmonizer(csv_path=path).harmonize()
    assert len(df) == SPEC.expected["images"] == 12_047
    assert int(df["Pneumothorax"].sum()) == SPEC.expected["positive"] == 2_669
    assert df["rle"].map(len).sum() + (df["Pneumothorax"] == 0).sum() == SPEC.expected["rows"]
    assert df["rle"].map(len).max() == 10  # one image has ten separate instances
    for codes in df.loc[df["rle"].map(len) > 1, "rle"].head(20):  # instances decode in frame
        masks = [rle_decode(c, height=1024, width=1024, relative=True, order="F")
                 for c in codes]
        assert all(m.any() for m in masks)


def test_fake_dataset_merges_instances_into_one_aligned_mask(tmp_path):
    image_dir = write_siim(tmp_path, n_images=4)
    ds = SIIMPneumothoraxDataset(image_dir, output_cls=True, output_mask=True, cache_dir=None,
                                 dtype=torch.float32)
    df = ds.harmonized_df
    assert len(ds) == 4 and df["image_path"].str.count("/").eq(2).all()
    two = int(np.flatnonzero(df["rle"].map(len).to_numpy() == 2)[0])
    parts = [rle_decode(c, height=1024, width=1024, relative=True, order="F")
             for c in df["rle"].iat[two]]
    merged = ds.source_mask(two)
    assert (merged == merge_masks(parts, shape=MASK_SHAPE)).all()
    assert merged.sum() > max(p.sum() for p in parts)
    sample = ds[two]
    assert sample["mask"].shape == (1, 224, 224) and sample["mask"].dtype == torch.uint8
    expected = cv2.resize(merged, (224, 224), interpolation=cv2.INTER_NEAREST)
    assert (sample["mask"][0].numpy() == expected).all()
    assert sample["cls"].tolist() == [1.0]
    negative = int(np.flatnonzero(df["Pneumothorax"].to_numpy() == 0)[0])
    assert ds[negative]["mask"].sum() == 0


def test_real_siim_dicom_decodes():
    path = SHARED / "real" / "cxr" / "1.2.276.0.7230010.3.1.4.8323329.6904.1517875201.850819.dcm"
    if not path.is_file():
        pytest.skip("shared real samples absent")
    arr, src = read_image(path)
    assert src == MASK_SHAPE and arr.std() > 0


def test_sample_ids_are_image_ids_and_csv_tables_still_give_masks(tmp_path):
    image_dir = write_siim(tmp_path, n_images=3)
    ds = SIIMPneumothoraxDataset(image_dir, output_mask=True, cache_dir=None)
    df = ds.harmonized_df.drop(columns=["sample_id", "view"])
    assert ds[1]["sample_id"] == f"siim_acr_ptx:{df['study_id'].iat[1]}"
    df.assign(rle=df["rle"].map(json.dumps)).to_csv(tmp_path / "table.csv", index=False)
    back = pd.read_csv(tmp_path / "table.csv")  # lists travel as JSON text, as save() writes
    ds2 = SIIMPneumothoraxDataset(image_dir, output_mask=True, cache_dir=None,
                                  harmonized_df=back)
    assert (ds2.source_mask(1) == ds.source_mask(1)).all() and ds2.source_mask(1).any()


def test_user_transform_gets_the_source_resolution_mask(tmp_path):
    image_dir = write_siim(tmp_path, n_images=2)
    seen = {}

    def transform(sample):
        seen.update(sample)
        return {**sample, "img": torch.zeros(1, 8, 8)}

    ds = SIIMPneumothoraxDataset(image_dir, output_mask=True, cache_dir=None,
                                 transform=transform)
    ds[1]
    assert isinstance(seen["img"], str) and seen["img"].endswith(".dcm")
    assert seen["mask"].shape == (1, *MASK_SHAPE)
    assert (seen["mask"][0].numpy() == ds.source_mask(1)).all()


def test_datasets_without_masks_warn_instead(tmp_path):
    from radharmony.datasets.vindr import VinDrCXRDataset
    from radharmony.errors import UnsupportedOutputWarning
    from radharmony.fake.vindr import write_vindr

    with pytest.warns(UnsupportedOutputWarning, match="output_mask"):
        ds = VinDrCXRDataset(write_vindr(tmp_path, n_images=1), output_mask=True, cache_dir=None)
    assert "mask" not in ds[0]
