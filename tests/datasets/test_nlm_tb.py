"""NLM Montgomery / Shenzhen: the label in the file name, clinical readings, lung masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from radharmony.datasets.nlm_tb import (LABEL_MAP, SHENZHEN_SPEC, SPEC, MontgomeryDataset,
                                        MontgomeryHarmonizer, ShenzhenDataset, parse_reading)
from radharmony.errors import MetadataError, MetadataNotFoundError
from radharmony.fake.nlm_tb import write_montgomery, write_shenzhen
from radharmony.table.schema import validate

# real names (torchxrayvision's test lists): ids are not contiguous
RAW = {"files": ["MCUCXR_0001_0.png", "MCUCXR_0008_0.png", "MCUCXR_0104_1.png"],
       "readings": {"MCUCXR_0104_1": "Patient's Sex: M\nPatient's Age: 052Y\n\nRUL cavity, TB.\n"},
       "masks": {"MCUCXR_0001_0": True}}


def test_last_digit_of_the_stem_is_the_label():
    df = validate(MontgomeryHarmonizer.harmonize_raw(RAW, source="rows"), SPEC)
    df = df.set_index("patient_id")
    assert df["Tuberculosis"].to_dict() == {"MCUCXR_0001": 0, "MCUCXR_0008": 0,
                                            "MCUCXR_0104": 1}
    assert df.loc["MCUCXR_0104", "image_path"] == "CXR_png/MCUCXR_0104_1.png"
    assert df.loc["MCUCXR_0104", "patient_sex"] == "M" and df.loc["MCUCXR_0104",
                                                                  "patient_age"] == 52
    assert df.loc["MCUCXR_0104", "report"].endswith("RUL cavity, TB.")
    assert df.loc["MCUCXR_0008", "report"] is None
    assert df["has_mask"].tolist() == [True, False, False]
    assert LABEL_MAP == {"Tuberculosis": (("tuberculosis", "exact"),)}


@pytest.mark.parametrize("text, expected", [
    ("Patient's Sex: F\nPatient's Age: 027Y\nnormal", ("F", 27)),
    ("male 45yrs\nnormal", ("M", 45)), ("female 61yr\nPTB", ("F", 61)),
    ("Female,35\nnormal", ("F", 35)), ("normal", (None, None)), (None, (None, None))])
def test_clinical_reading_sex_and_age(text, expected):
    assert parse_reading(text) == expected


def test_file_without_label_digit_is_refused():
    with pytest.raises(MetadataError, match="no label in its name"):
        MontgomeryHarmonizer.harmonize_raw({**RAW, "files": ["MCUCXR_0001.png"]})


def test_missing_folder_says_where(tmp_path):
    with pytest.raises(MetadataNotFoundError, match="CXR_png"):
        MontgomeryHarmonizer(base_image_dir=tmp_path).harmonize()


def test_montgomery_mask_is_both_lungs(tmp_path):
    base = write_montgomery(tmp_path)
    ds = MontgomeryDataset(base, output_mask=True, output_cls=True, cache_dir=None,
                           dtype=torch.float32)
    assert len(ds) == 5 and ds.harmonized_df["Tuberculosis"].sum() == 2
    m = ds.source_mask(0)
    assert m.shape == (248, 300) and set(np.unique(m)) == {0, 1}
    assert m[:, :150].any() and m[:, 150:].any()  # left and right lungs
    s = ds[0]
    assert s["mask"].shape == (1, 224, 224) and s["mask"].dtype == torch.uint8
    no_mask = int(np.flatnonzero(~ds.harmonized_df["has_mask"].to_numpy(bool))[0])
    with pytest.raises(Exception, match="Lung mask"):
        ds[no_mask]


def test_shenzhen_readings_and_counts_spec(tmp_path):
    ds = ShenzhenDataset(write_shenzhen(tmp_path), output_report=True, cache_dir=None)
    df = ds.harmonized_df.set_index("patient_id")
    assert df.loc["CHNCXR_0330", "patient_sex"] == "F" and df.loc["CHNCXR_0330",
                                                                  "patient_age"] == 61
    assert df.loc["CHNCXR_0002", "report"] is None  # no reading file
    assert SHENZHEN_SPEC.expected["images"] == 662 and "mask" not in SHENZHEN_SPEC.outputs
