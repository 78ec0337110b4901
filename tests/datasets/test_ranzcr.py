"""RANZCR CLiP: label columns, real patient grouping, traced lines drawn as a mask."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.ranzcr import (COLUMNS, LABEL_MAP, LABELS, LINE_THICKNESS, SPEC,
                                        RANZCRDataset, RANZCRHarmonizer, draw_lines)
from radharmony.errors import MetadataError
from radharmony.fake.ranzcr import write_ranzcr
from radharmony.table.schema import validate

U1, U2 = "1.2.826.0.1.3680043.8.498.111", "1.2.826.0.1.3680043.8.498.222"
TABLE = ",".join(COLUMNS) + f"""
{U1},0,0,1,0,0,0,1,0,0,1,0,258689f05
{U2},0,0,0,0,0,0,0,1,0,0,1,258689f05
"""
LINES = f"""StudyInstanceUID,label,data
{U1},CVC - Normal,"[[10, 10], [10, 50]]"
{U1},NGT - Normal,"[[40, 5], [40, 30], [45, 60]]"
"""


def harmonize(table=TABLE, lines=LINES) -> pd.DataFrame:
    raw = {"table": pd.read_csv(io.StringIO(table), dtype=str),
           "lines": None if lines is None else pd.read_csv(io.StringIO(lines), dtype=str)}
    return validate(RANZCRHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_label_columns_in_release_order_mean_what_they_say():
    df = harmonize().set_index("study_id")
    assert COLUMNS[1:4] == ("ETT - Abnormal", "ETT - Borderline", "ETT - Normal")
    assert df.loc[U1, "ETT - Normal"] == 1 and df.loc[U1, "NGT - Normal"] == 1
    assert df.loc[U1, "CVC - Normal"] == 1 and df.loc[U1, "Swan Ganz Catheter Present"] == 0
    assert df.loc[U2, "CVC - Abnormal"] == 1 and df.loc[U2, "Swan Ganz Catheter Present"] == 1
    assert (df["patient_id"] == "258689f05").all()  # real patient id: one group
    assert df.loc[U1, "image_path"] == f"{U1}.jpg"


def test_lines_kept_per_image_in_row_order():
    df = harmonize().set_index("study_id")
    assert [ln["label"] for ln in df.loc[U1, "lines"]] == ["CVC - Normal", "NGT - Normal"]
    assert df.loc[U1, "lines"][1]["points"] == [[40, 5], [40, 30], [45, 60]]
    assert df.loc[U2, "lines"] == []


def test_draw_lines_values_and_thickness():
    lines = harmonize().set_index("study_id").loc[U1, "lines"]
    mask = draw_lines(lines, (80, 70))
    assert mask[30, 10] == LABELS.index("CVC - Normal") + 1
    assert mask[20, 40] == LABELS.index("NGT - Normal") + 1
    assert mask[30, 10 + LINE_THICKNESS // 2 + 2] == 0 and mask[75, 5] == 0
    assert mask[30, 10 + LINE_THICKNESS // 2 - 1] > 0  # line is 15 px wide


def test_bad_points_and_bad_cell_are_errors():
    with pytest.raises(MetadataError, match="data is not a list"):
        harmonize(lines=LINES.replace("[[10, 10], [10, 50]]", "[10, 10]"))
    with pytest.raises(MetadataError, match="unknown value"):
        harmonize(table=TABLE.replace(",0,0,1,", ",0,0,Y,", 1))


def test_label_map_every_label_a_device():
    assert set(LABEL_MAP) == set(LABELS)


def test_fake_mask_follows_the_image(tmp_path):
    ds = RANZCRDataset(write_ranzcr(tmp_path), output_mask=True, output_cls=True, cache_dir=None,
                       dtype=torch.float32)
    assert ds.harmonized_df["patient_id"].nunique() == len(ds) - 1
    i = int(np.flatnonzero(ds.harmonized_df["lines"].map(len) == 2)[0])
    s = ds[i]
    assert s["mask"].shape == (1, 224, 224)
    assert set(np.unique(s["mask"].numpy())) == {0, LABELS.index("CVC - Normal") + 1}
    empty = int(np.flatnonzero(ds.harmonized_df["lines"].map(len) == 0)[0])
    assert ds[empty]["mask"].sum() == 0
