"""CANDID-PTX: the run-length convention told from the data (both ways), one row per image with
every region, the three mask channels, labels and reports."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.annotations.masks import (detect_rle_relative, rle_decode, rle_encode,
                                          rle_is_monotone)
from radharmony.datasets.candid_ptx import (LABEL_MAP, MASKS, SPEC, CANDIDPTXDataset,
                                            CANDIDPTXHarmonizer)
from radharmony.errors import MetadataError
from radharmony.fake.candid_ptx import region, write_candid_ptx
from radharmony.table.schema import validate

# a 4 x 3 image (height 4, width 3) whose pixels are numbered down the columns:
#   0 4 8
#   1 5 9
#   2 6 10
#   3 7 11
# region: pixels 1, 2 (column 0) and 5, 6 (column 1) -- an absolute code "1 2 5 2",
# a relative one "1 2 2 2" (the second run starts 2 past the first run's end, pixel 3)
ABSOLUTE, RELATIVE = "1 2 5 2", "1 2 2 2"
REGION = np.array([[0, 0, 0], [1, 1, 0], [1, 1, 0], [0, 0, 0]], np.uint8)


def test_the_two_conventions_of_one_region_by_hand():
    assert (rle_decode(ABSOLUTE, height=4, width=3, order="F") == REGION).all()
    assert (rle_decode(RELATIVE, height=4, width=3, relative=True, order="F") == REGION).all()
    assert rle_is_monotone(ABSOLUTE) is True and rle_is_monotone(RELATIVE) is False
    assert rle_is_monotone("5 3") is None and rle_is_monotone("-1") is None


@pytest.mark.parametrize("relative", [True, False])
def test_the_convention_is_told_from_real_looking_regions(relative):
    rng = np.random.default_rng(3)
    codes = [rle_encode(region((300, 280), rng), relative=relative, order="F")
             for _ in range(20)]
    assert detect_rle_relative(["-1", "", *codes]) is relative
    assert detect_rle_relative(["-1", "7 3"]) is None  # single runs: undecidable


def rows(ptx_codes: tuple[str, str], tube: str) -> dict:
    reports = pd.read_csv(io.StringIO(
        "SOPInstanceUID,StudyInstanceUID,filename,Report,EncodedPixels\n"
        "4.1.1,4.2.1,12_1.dcm,Left pneumothorax.,%s\n"
        "4.1.2,4.2.2,12_2.dcm,No pneumothorax.,-1\n"
        "4.1.3,4.2.3,30_1.dcm,Not read.,\n"
        "4.1.1,4.2.1,12_1.dcm,Left pneumothorax.,%s\n" % ptx_codes), dtype=str,
        keep_default_na=False)
    side = ["anon_SOPUID", "annotation_ref", "mask_rle"]
    return {"reports": reports,
            "chest_tube": pd.DataFrame([["4.1.2", "r1", tube]], columns=side),
            "rib_fracture": pd.DataFrame([["4.1.1", "r2", "-1"]], columns=side), "files": None}


@pytest.mark.parametrize("codes, tube, expected", [
    ((RELATIVE, "9 1"), RELATIVE, "relative"), ((ABSOLUTE, "9 1"), ABSOLUTE, "absolute")])
def test_rows_labels_and_codes_by_hand(codes, tube, expected):
    with pytest.warns(UserWarning, match="acute_rib_fracture.csv has two runs"):
        df = validate(CANDIDPTXHarmonizer.harmonize_raw(rows(codes, tube), source="rows"), SPEC)
    assert df["study_id"].tolist() == ["4.1.1", "4.1.2", "4.1.3"]
    assert df["patient_id"].tolist() == ["12", "12", "30"]  # filename's index
    assert df["image_path"].tolist() == ["4.1.1.jpg", "4.1.2.jpg", "4.1.3.jpg"]
    assert df["pneumothorax_rle"].tolist() == [[codes[0], "9 1"], [], []]
    ptx = df["Pneumothorax"].tolist()
    assert ptx[:2] == [1, 0] and np.isnan(ptx[2])  # an empty code: not read
    assert df["Chest tube"].tolist() == [0, 1, 0] and df["chest_tube_rle"].iat[1] == [tube]
    assert df["Rib fracture"].tolist() == [0, 0, 0]  # listed with -1: none drawn
    assert df["rle_convention"].iat[0] == {"pneumothorax": expected, "rib_fracture": "relative",
                                           "chest_tube": expected}
    assert df["report"].tolist() == ["Left pneumothorax.", "No pneumothorax.", "Not read."]
    assert LABEL_MAP["Chest tube"] == (("support_devices", "narrower"),)


def test_single_run_codes_warn_and_read_as_siim():
    with pytest.warns(UserWarning, match="cannot be told from the data"):
        df = CANDIDPTXHarmonizer.harmonize_raw(rows(("3 1", "9 1"), "3 1"), source="rows")
    assert set(df["rle_convention"].iat[0].values()) == {"relative"}


@pytest.mark.parametrize("relative", [True, False])
def test_fake_masks_decode_to_the_drawn_regions_both_ways(tmp_path, relative):
    root = write_candid_ptx(tmp_path, relative=relative)
    ds = CANDIDPTXDataset(root, output_cls=True, output_mask=True, output_report=True,
                          cache_dir=None, dtype=torch.float32)
    df = ds.harmonized_df
    assert df["rle_convention"].iat[0]["pneumothorax"] == ("relative" if relative else "absolute")
    assert df["patient_id"].iat[0] == df["patient_id"].iat[1] == "7"
    assert len(ds) == 6 and df["image_path"].str.startswith("chest_radiographs/").all()
    src = ds.source_masks(1)
    h, w = ds.source_size(1)
    assert src.shape == (h, w, 3) and h != w
    parts = [rle_decode(c, height=h, width=w, relative=relative, order="F")
             for c in df["pneumothorax_rle"].iat[1]]
    assert len(parts) == 2 and (src[..., 0] == np.maximum(*parts)).all()
    assert src[..., 2].sum() > 0 and src[..., 1].sum() == 0   # a tube, no fracture
    code = df["pneumothorax_rle"].iat[1][0]
    if relative:  # read the other way, a relative code gives other pixels ...
        assert (rle_decode(code, height=h, width=w, order="F") != parts[0]).any()
    else:  # ... and an absolute code runs past the image
        with pytest.raises(MetadataError, match="runs past"):
            rle_decode(code, height=h, width=w, relative=True, order="F")
    s = ds[1]
    assert s["masks"].shape == (3, 224, 224) and (s["mask"][0] == s["masks"][0]).all()
    assert s["cls"].tolist() == [1.0, 0.0, 1.0] and "Pneumothorax" in s["report"]
    assert ds[0]["mask"].sum() == 0 and list(MASKS) == ["pneumothorax", "rib_fracture",
                                                         "chest_tube"]


def test_missing_side_tables_warn_and_leave_labels_zero(tmp_path):
    root = write_candid_ptx(tmp_path, images=False)
    (root / "chest_tube.csv").unlink()
    with pytest.warns(UserWarning, match="No chest_tube.csv"):
        df = CANDIDPTXHarmonizer(csv_path=root / "Pneumothorax_reports.csv").harmonize(
            cache_dir=None)
    assert df["Chest tube"].sum() == 0 and df["Rib fracture"].sum() == 1
