"""BIMCV-COVID19+: MIDS sessions from the archive listings, PNG and DICOM, a session's Spanish
report and labels on each of its images, participants, no PadChest link."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.bimcv_covid19 import (LABEL_MAP, SPEC, BIMCVCOVID19Dataset,
                                               BIMCVCOVID19Harmonizer, listed_images,
                                               quoted_terms)
from radharmony.errors import MetadataError
from radharmony.fake.bimcv_covid19 import write_bimcv_covid19
from radharmony.table.schema import canonical_views, validate

LABELS_TSV = (
    "\tPatientID\tReportID\tReport\tLabels\tLocalizations\tLabelsLocalizationsBySentence\t"
    "labelCUIS\tLocalizationsCUIS\n"
    "0\tsub-S1\tses-E1\tNeumonía COVID 19 bilateral.\t['COVID 19' 'pneumonia']\t[]\t[]\t[]\t[]\n"
    "1\tsub-S2\tses-E2\tSin hallazgos.\t['normal']\t[]\t[]\t[]\t[]\n")
LISTING = [
    "drwxr-xr-x bimcv/bimcv 0 2020-06-05 12:00 covid19_posi/sub-S1/",
    "-rw-r--r-- bimcv/bimcv 91 2020-06-05 12:00 covid19_posi/sub-S1/ses-E1/mod-rx/"
    "sub-S1_ses-E1_run-1_bp-chest_vp-pa_cr.png",
    "-rw-r--r-- bimcv/bimcv 92 2020-06-05 12:00 covid19_posi/sub-S1/ses-E1/mod-rx/"
    "sub-S1_ses-E1_run-1_bp-chest_vp-pa_cr.json",
    "-rw-r--r-- bimcv/bimcv 93 2020-06-05 12:00 covid19_posi/sub-S1/ses-E1/mod-rx/"
    "sub-S1_ses-E1_run-1_bp-chest_vp-pa_cr.dcm",
    "-rw-r--r-- bimcv/bimcv 94 2020-06-05 12:00 covid19_posi/sub-S2/ses-E2/mod-rx/"
    "sub-S2_ses-E2_run-2_bp-chest_vp-ll_dx.dcm",
    "-rw-r--r-- bimcv/bimcv 95 2020-06-05 12:00 covid19_posi/sub-S3/ses-E3/mod-ct/"
    "sub-S3_ses-E3_run-1_bp-chest_ct.nii.gz",
    "-rw-r--r-- bimcv/bimcv 96 2020-06-05 12:00 covid19_posi/sub-S3/ses-E4/mod-rx/"
    "sub-S3_ses-E4_run-1_bp-chest_vp-ap_cr.png",
]
PARTICIPANTS = "participant\tmodality_dicom\tage\tgender\nsub-S1\t['CR']\t[64 65]\tM\n" \
               "sub-S2\t['DX']\t[41]\tNone\n"


def harmonize(listing=LISTING, files=None, participants=PARTICIPANTS):
    raw = {"labels": pd.read_csv(io.StringIO(LABELS_TSV), sep="\t", dtype=str,
                                 keep_default_na=False),
           "images": listing, "files": files,
           "participants": None if participants is None else pd.read_csv(
               io.StringIO(participants), sep="\t", dtype=str, keep_default_na=False)}
    return validate(BIMCVCOVID19Harmonizer.harmonize_raw(raw, source="rows"), SPEC)


def test_rows_from_the_listing_labels_and_reports_by_hand():
    df = harmonize()
    assert df["image_id"].tolist() == ["sub-S1_ses-E1_run-1_bp-chest_vp-pa_cr",
                                       "sub-S2_ses-E2_run-2_bp-chest_vp-ll_dx",
                                       "sub-S3_ses-E4_run-1_bp-chest_vp-ap_cr"]
    assert df["image_path"].iat[0].endswith("vp-pa_cr.png")  # the PNG, not its DICOM twin
    assert df["image_path"].iat[1].endswith("vp-ll_dx.dcm")  # a DICOM alone is read
    assert df["patient_id"].tolist() == ["sub-S1", "sub-S2", "sub-S3"]
    assert df["study_id"].tolist() == ["sub-S1/ses-E1", "sub-S2/ses-E2", "sub-S3/ses-E4"]
    assert df["view_position"].tolist() == ["pa", "ll", "ap"]
    assert canonical_views(df["view_position"], SPEC.view_map).tolist() == ["PA", "LATERAL", "AP"]
    assert df["modality"].tolist() == ["cr", "dx", "cr"]
    assert df["report"].tolist()[:2] == ["Neumonía COVID 19 bilateral.", "Sin hallazgos."]
    assert df["report"].iat[2] is None
    assert df["COVID 19"].iat[0] == 1 and df["Pneumonia"].iat[0] == 1
    assert df["No Finding"].iat[1] == 1 and df["COVID 19"].iat[1] == 0
    assert np.isnan(df["COVID 19"].iat[2])  # a session without a labels row: unknown
    assert df["labels"].tolist()[:2] == [["COVID 19", "pneumonia"], ["normal"]]
    assert df["patient_sex"].tolist()[:2] == ["M", None]
    assert df["patient_age"].tolist()[:2] == [64, 41] and pd.isna(df["patient_age"].iat[2])
    assert LABEL_MAP["COVID 19"] == (("pneumonia", "approximate"),)
    assert SPEC.identity is None  # nothing in the release links a subject to PadChest


def test_listed_images_are_found_by_name_elsewhere():
    files = {"sub-S1_ses-E1_run-1_bp-chest_vp-pa_cr.png": "part_1/sub-S1/x.png"}
    assert harmonize(files=files)["image_path"].iat[0] == "part_1/sub-S1/x.png"


@pytest.mark.parametrize("cell, terms", [
    ("['COVID 19' 'pneumonia']", ["COVID 19", "pneumonia"]),
    ("['COVID 19', ' pneumonia']", ["COVID 19", "pneumonia"]), ("[]", []),
    ("['']", []), ('["normal"]', ["normal"])])
def test_printed_term_lists(cell, terms):
    assert quoted_terms(cell) == terms


def test_a_labels_cell_that_is_no_list_is_refused():
    with pytest.raises(MetadataError, match="not a printed list"):
        quoted_terms("COVID 19, pneumonia")


def test_listing_lines_and_bare_paths():
    assert listed_images(["./a/sub-1/ses-2/mod-rx/x.png", "a/sub-1/ses-2/mod-rx/x.png",
                          "-rw-r--r-- u/g 1 2020-01-01 00:00 b/sub-1/ses-3/mod-rx/y.dcm",
                          "b/sub-1/ses-3/mod-rx/y.json"]) == \
        ["a/sub-1/ses-2/mod-rx/x.png", "b/sub-1/ses-3/mod-rx/y.dcm"]


def test_fake_reads_pngs_and_dicoms_with_spanish_reports(tmp_path):
    root = write_bimcv_covid19(tmp_path)
    with pytest.warns(UserWarning, match="not verified against a real copy"):
        ds = BIMCVCOVID19Dataset(root, output_cls=True, output_report=True, cache_dir=None,
                                 dtype=torch.float32)
    df = ds.harmonized_df
    assert len(ds) == 6 and df["patient_id"].nunique() == 4
    assert df["image_path"].str.endswith(".dcm").sum() == 1  # the PNG + DICOM pair: PNG
    dicom = int(np.flatnonzero(df["image_path"].str.endswith(".dcm").to_numpy())[0])
    s = ds[dicom]
    assert s["img"].shape == (1, 224, 224) and "Cardiomegalia" in s["report"]
    assert s["sample_id"] == "bimcv_covid19:sub-S03101_ses-E07002_run-2_bp-chest_vp-ap_dx"
    assert df["patient_age"].tolist()[:3] == [64, 64, 64]


def test_without_listings_the_image_folder_is_listed(tmp_path):
    root = write_bimcv_covid19(tmp_path)
    for listing in root.glob("*.tar-tvf.txt"):
        listing.unlink()
    with pytest.warns(UserWarning, match="archive listings"):
        df = BIMCVCOVID19Harmonizer(base_image_dir=root).harmonize(cache_dir=None)
    assert len(df) == 6
