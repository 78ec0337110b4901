"""SIIM-FISABIO-RSNA COVID-19: study labels broadcast to images, literal boxes, series paths."""

from __future__ import annotations

import io
import warnings

import pandas as pd
import pytest
import torch

from radharmony.datasets.siim_covid import LABEL_MAP, SPEC, SIIMCovidDataset, SIIMCovidHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.siim_covid import write_siim_covid
from radharmony.table.schema import validate

IMAGES = """id,boxes,label,StudyInstanceUID
000a312787f2_image,"[{'x': 789.28836, 'y': 582.43035, 'width': 1026.65662, 'height': 1917.30292}, {'x': 2245.91208, 'y': 591.20528, 'width': 1094.66162, 'height': 1761.54944}]",opacity 1 789.28836 582.43035 1815.94498 2499.73327 opacity 1 2245.91208 591.20528 3340.5737 2352.75472,5776db0cec75
000c3a3f293f_image,,none 1 0 0 1 1,ff0879eb20ed
0012ff7358bc_image,,opacity 1 10 20 30 60,9d514ce429a7
001398f4ff4f_image,,none 1 0 0 1 1,9d514ce429a7
"""
STUDIES = """id,Negative for Pneumonia,Typical Appearance,Indeterminate Appearance,Atypical Appearance
5776db0cec75_study,0,1,0,0
ff0879eb20ed_study,1,0,0,0
9d514ce429a7_study,0,0,0,1
"""


def harmonize(images=IMAGES, studies=STUDIES, files=None):
    raw = {"images": pd.read_csv(io.StringIO(images), dtype=str, keep_default_na=False),
           "studies": None if studies is None else pd.read_csv(io.StringIO(studies),
                                                                 dtype={"id": str}),
           "files": files}
    return validate(SIIMCovidHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_study_labels_go_to_every_image_opacity_per_image():
    df = harmonize().set_index("image_id")
    assert df.loc["000a312787f2", ["Typical Appearance", "Opacity"]].tolist() == [1, 1]
    assert df.loc["000c3a3f293f", ["Negative for Pneumonia", "Opacity"]].tolist() == [1, 0]
    # one study, two images: same study label, only one has a box
    assert df.loc["0012ff7358bc", "Atypical Appearance"] == 1
    assert df.loc["001398f4ff4f", "Atypical Appearance"] == 1
    assert df.loc["0012ff7358bc", "Opacity"] == 1 and df.loc["001398f4ff4f", "Opacity"] == 0
    assert df.loc["001398f4ff4f", "patient_id"] == "9d514ce429a7"  # the study is the group


def test_python_literal_boxes_in_dicom_pixels():
    df = harmonize().set_index("image_id")
    b = df.loc["000a312787f2", "boxes"]
    assert len(b) == 2 and b[0]["x_min"] == pytest.approx(789.28836)
    assert b[0]["x_max"] == pytest.approx(789.28836 + 1026.65662)
    # boxes empty, label string holds the box: it is used
    (c,) = df.loc["0012ff7358bc", "boxes"]
    assert (c["x_min"], c["y_min"], c["x_max"], c["y_max"]) == (10, 20, 30, 60)
    assert SPEC.box_units == "pixel"


def test_paths_from_the_folder_listing_or_a_warning_less_guess():
    files = {"000a312787f2": "train/5776db0cec75/81456c9c5423/000a312787f2.dcm"}
    with pytest.warns(UserWarning, match="3 of 4 images have no .dcm"):
        df = harmonize(files=files).set_index("image_id")
    assert df.loc["000a312787f2", "image_path"] == files["000a312787f2"]
    assert df.loc["000c3a3f293f", "image_path"] == "train/ff0879eb20ed/000c3a3f293f.dcm"


def test_missing_study_row_warns_and_leaves_labels_missing():
    with pytest.warns(UserWarning, match="without a row"):
        df = harmonize(studies=STUDIES.replace("ff0879eb20ed_study,1,0,0,0\n", ""))
    assert pd.isna(df.set_index("image_id").loc["000c3a3f293f", "Negative for Pneumonia"])


def test_code_in_the_boxes_cell_is_refused():
    bad = IMAGES.replace("\"[{'x': 789.28836", "\"__import__('os')[{'x': 789.28836")
    with pytest.raises(MetadataError, match="boxes cell"):
        harmonize(images=bad)


def test_label_map():
    assert set(LABEL_MAP) == set(SPEC.label_cols)
    assert LABEL_MAP["Opacity"] == (("lung_opacity", "exact"),)


def test_fake_finds_series_folders(tmp_path):
    root = write_siim_covid(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ds = SIIMCovidDataset(root, output_bbox=True, output_cls=True, cache_dir=None,
                              dtype=torch.float32)
    assert len(ds) == 5 and ds.harmonized_df["study_id"].nunique() == 4
    assert ds.harmonized_df["image_path"].str.count("/").eq(3).all()
    i = int(ds.harmonized_df["boxes"].map(len).argmax())
    assert ds[i]["bbox"].shape == (2, 4)
