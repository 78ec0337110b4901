"""MIMIC-CXR (DICOM): the record list as rows, MIMIC-CXR-JPG's tables from the sibling release,
reports from the zip, the same ids as mimic_cxr_jpg, DICOM pixels (MONOCHROME1 too)."""

from __future__ import annotations

import io
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.mimic import LABEL_COLS, MIMICCXRJPGHarmonizer
from radharmony.datasets.mimic_cxr import SPEC, MIMICCXRDataset, MIMICCXRHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.mimic_cxr import write_mimic_cxr
from radharmony.table.schema import sample_ids, validate

D1 = "0a1b2c3d-11111111-22222222-33333333-44444444"
D2 = "5e6f7a8b-55555555-66666666-77777777-88888888"
RECORDS = f"""subject_id,study_id,dicom_id,path
10000032,50414267,{D1},files/p10/p10000032/s50414267/{D1}.dcm
10000032,53189527,{D2},files/p10/p10000032/s53189527/{D2}.dcm
"""
META = f"""dicom_id,subject_id,study_id,PerformedProcedureStepDescription,ViewPosition,Rows,Columns,StudyDate,StudyTime,ProcedureCodeSequence_CodeMeaning,ViewCodeSequence_CodeMeaning,PatientOrientationCodeSequence_CodeMeaning
{D1},10000032,50414267,CHEST (PA AND LAT),PA,3056,2544,21800506,213014.531,CHEST (PA AND LAT),postero-anterior,Erect
"""


def csv(text):
    return pd.read_csv(io.StringIO(text), dtype=str)


def harmonize(**raw):
    raw = {"records": csv(RECORDS), "metadata": None, "chexpert": None, "negbio": None,
           "split": None, "reports": {}, **raw}
    return validate(MIMICCXRHarmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_record_rows_with_the_jpg_metadata_labels_and_reports():
    labels = "subject_id,study_id," + ",".join(LABEL_COLS) + "\n10000032,50414267,1.0,-1.0" + \
        "," * (len(LABEL_COLS) - 2) + "\n"
    df = harmonize(metadata=csv(META), chexpert=csv(labels),
                   reports={"50414267": " FINAL REPORT\n Lungs clear.\n"})
    assert df["image_path"].tolist() == [f"files/p10/p10000032/s50414267/{D1}.dcm",
                                         f"files/p10/p10000032/s53189527/{D2}.dcm"]
    assert df["patient_id"].tolist() == ["10000032"] * 2
    assert df["study_id"].tolist() == ["50414267", "53189527"]
    assert df["view_position"].tolist() == ["PA", None]  # D2 has no JPG metadata row
    assert df["rows"].tolist()[0] == 3056 and pd.isna(df["rows"].tolist()[1])
    assert df.loc[0, "Atelectasis"] == 1 and df.loc[0, "Cardiomegaly"] == -1
    assert df.iloc[1][list(LABEL_COLS)].isna().all()
    assert df["report"].tolist() == ["FINAL REPORT\n Lungs clear.", None]
    assert list(sample_ids(df, SPEC)) == [f"mimic_cxr:{D1}", f"mimic_cxr:{D2}"]


def test_without_the_jpg_metadata_views_are_missing_with_a_warning():
    with pytest.warns(UserWarning, match="no mimic-cxr-2.0.0-metadata"):
        df = harmonize()
    assert df["view_position"].isna().all() and len(df) == 2


def test_a_path_that_is_not_a_dcm_under_files_is_an_error():
    with pytest.raises(MetadataError, match="path is not"):
        harmonize(records=csv(RECORDS.replace(f"{D2}.dcm", f"{D2}.jpg")))


def test_release_layout_same_ids_as_the_jpg_key_and_reports_from_the_zip(tmp_path):
    base = write_mimic_cxr(tmp_path, images=False)
    assert not list((tmp_path / "mimic-cxr-jpg" / "2.1.0" / "files").rglob("*.txt"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcm = MIMICCXRHarmonizer(base_image_dir=base).harmonize()
        jpg = MIMICCXRJPGHarmonizer(base_image_dir=tmp_path / "mimic-cxr-jpg" / "2.1.0").harmonize()
    assert SPEC.identity.family == "mimic_cxr_jpg" and SPEC.id_col == "dicom_id"
    assert dcm["dicom_id"].tolist() == jpg["dicom_id"].tolist()
    assert (dcm["image_path"].str.slice(0, -4) == jpg["image_path"].str.slice(0, -4)).all()
    for col in ("patient_id", "study_id", "view_position", "split", *LABEL_COLS):
        pd.testing.assert_series_equal(dcm[col], jpg[col], check_names=False)
    with zipfile.ZipFile(base / "mimic-cxr-reports.zip") as zf:
        n_reports = len(zf.namelist())
    assert dcm.drop_duplicates("study_id")["report"].notna().sum() == n_reports


def test_dicom_pixels_monochrome1_inverted(tmp_path):
    base = write_mimic_cxr(tmp_path, n_subjects=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = MIMICCXRDataset(base, cache_dir=None, dtype=torch.float32)
    for i in (1, 2):  # image 2 is MONOCHROME1, image 1 MONOCHROME2
        img = ds[i]["img"][0].numpy()
        mid, lung = img[:, 105:119].mean(), img[:, 50:70].mean()
        assert mid > lung  # the mediastinum is brighter than the lungs either way


def test_merged_with_its_family_one_patient_namespace(tmp_path):
    import radharmony
    from radharmony.datasets.cxr_lt import CXRLTDataset
    from radharmony.fake.cxr_lt import write_cxr_lt

    base = write_mimic_cxr(tmp_path / "dcm", images=False)
    lt_root = write_cxr_lt(tmp_path / "dcm" / "mimic-cxr-jpg" / "2.1.0", images=False)
    kw = dict(cache_dir=None, dtype=torch.float32, output_cls=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merged = radharmony.merge([MIMICCXRDataset(base, **kw), CXRLTDataset(lt_root, **kw)])
    df = merged.harmonized_df
    assert set(df["source"]) == {"mimic_cxr", "cxr_lt"}
    assert df["patient_id"].str.startswith("mimic_cxr_jpg:").all()
    by = df.groupby("source")["patient_id"].apply(set)
    assert by["mimic_cxr"] == by["cxr_lt"]  # the same MIMIC subjects, one namespace
