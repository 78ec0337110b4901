"""MIMIC-CXR-JPG 2.1.0's radiologist-labelled test set: its studies only, its labels, the same
paths and patients as the full release (a shared image cache)."""

from __future__ import annotations

import io

import pandas as pd
import pytest
import torch

from radharmony.datasets.mimic import (LABEL_COLS, METADATA_COLUMNS, TEST_SPEC, MIMICCXRJPGDataset,
                                       MIMICCXRJPGTestDataset, MIMICCXRJPGTestHarmonizer)
from radharmony.errors import MetadataNotFoundError
from radharmony.fake.mimic import write_mimic
from radharmony.table.schema import validate

META = ",".join(METADATA_COLUMNS) + """
d1,10000032,50414267,CHEST (PA AND LAT),PA,3056,2544,21800506,213014.531,CHEST,postero-anterior,Erect
d2,10000032,50414267,CHEST (PA AND LAT),LATERAL,3056,2544,21800506,213014.531,CHEST,lateral,Erect
d3,10000032,53189527,CHEST (PORTABLE AP),AP,2705,2539,21800626,165500.312,CHEST,,
"""
TEST_HEADER = "study_id," + ",".join("Airspace Opacity" if c == "Lung Opacity" else c
                                     for c in LABEL_COLS)


def test_only_labelled_studies_with_the_radiologists_values():
    cells = ["" for _ in LABEL_COLS]
    cells[LABEL_COLS.index("Lung Opacity")] = "1.0"
    cells[LABEL_COLS.index("Edema")] = "-1.0"
    test = TEST_HEADER + "\n50414267," + ",".join(cells) + "\n"
    ids = {"dicom_id": str, "subject_id": str, "study_id": str}
    raw = {"metadata": pd.read_csv(io.StringIO(META), dtype=ids),
           "chexpert": pd.read_csv(io.StringIO(test), dtype={"study_id": str}),
           "negbio": None, "split": None, "reports": {}}
    df = validate(MIMICCXRJPGTestHarmonizer.harmonize_raw(raw, source="rows"), TEST_SPEC)
    assert df["dicom_id"].tolist() == ["d1", "d2"]  # study 53189527 is not in the test set
    assert (df["Lung Opacity"] == 1).all() and (df["Edema"] == -1).all()
    assert df["Cardiomegaly"].isna().all()
    assert df["image_path"].iloc[0] == "files/p10/p10000032/s50414267/d1.jpg"


def test_missing_test_file_says_where_to_get_it(tmp_path):
    root = write_mimic(tmp_path, images=False)
    (root / "mimic-cxr-2.1.0-test-set-labeled.csv").unlink()
    with pytest.raises(MetadataNotFoundError, match="physionet.org/content/mimic-cxr-jpg"):
        MIMICCXRJPGTestHarmonizer(base_image_dir=root).harmonize()


def test_rows_join_the_full_release_and_share_its_cache(tmp_path):
    root = write_mimic(tmp_path, n_subjects=6)
    cache = tmp_path / "cache"
    full = MIMICCXRJPGDataset(root, cache_dir=cache, dtype=torch.float32)
    test = MIMICCXRJPGTestDataset(root, cache_dir=cache, dtype=torch.float32, output_cls=True)
    f = full.harmonized_df.set_index("dicom_id")
    t = test.harmonized_df.set_index("dicom_id")
    assert set(t.index) == set(f.index[f["split"] == "test"])
    assert (t["image_path"] == f.loc[t.index, "image_path"]).all()
    assert (t["patient_id"] == f.loc[t.index, "patient_id"]).all()
    assert test.cache_keys()[0] in full.cache_keys()
