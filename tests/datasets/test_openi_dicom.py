"""OpenI as DICOM: the same sample ids, reports and labels as the PNG key, files found by
name in either folder layout, MONOCHROME1 12-bit pixels read as the PNG shows them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from radharmony.datasets.openi import OpenIDataset, OpenIHarmonizer
from radharmony.datasets.openi_dicom import (SPEC, OpenIDicomDataset, OpenIDicomHarmonizer,
                                             dicom_file)
from radharmony.fake.openi import write_openi


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    root = tmp_path_factory.mktemp("openi")
    write_openi(root, dicom=True)
    return root


def harmonized(cls, base):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the replica's image without a DICOM-table row
        return cls(base_image_dir=base).harmonize()


def test_dicom_file_of_an_xml_image():
    assert dicom_file("CXR1_IM-0001-3001") == "1/1_IM-0001-3001.dcm"
    assert dicom_file("CXR3955_IM-2019-1001") == "3955/3955_IM-2019-1001.dcm"


def test_same_native_ids_reports_and_labels_as_the_png_key(replica):
    dcm = harmonized(OpenIDicomHarmonizer, replica / "NLMCXR_dcm")
    png = harmonized(OpenIHarmonizer, replica / "NLMCXR_png")
    assert dcm["image_id"].tolist() == png["image_path"].str.slice(0, -4).tolist()
    assert dcm["image_id"].tolist()[:3] == ["CXR1_1_IM-0001-1001", "CXR1_1_IM-0001-2001",
                                            "CXR2_IM-0002-1001"]
    # both folder layouts: report 1 in its own folder, report 2 flat in the root
    assert dcm["image_path"].tolist()[:3] == ["1/1_IM-0001-1001.dcm", "1/1_IM-0001-2001.dcm",
                                              "2_IM-0002-1001.dcm"]
    assert (dcm["report"].fillna("") == png["report"].fillna("")).all()
    labels = list(SPEC.label_cols)
    np.testing.assert_array_equal(dcm[labels].to_numpy(), png[labels].to_numpy())


def test_without_a_listing_the_path_is_the_per_report_form(replica, tmp_path):
    h = OpenIDicomHarmonizer(csv_path=replica / "NLMCXR_reports.tgz",
                             base_image_dir=tmp_path / "absent")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = h.harmonize()
    assert df["image_path"].tolist()[2] == "2/2_IM-0002-1001.dcm"


def test_sample_ids_and_pixels_match_the_png_key(replica):
    kw = dict(cache_dir=None, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcm = OpenIDicomDataset(replica / "NLMCXR_dcm", **kw)
        png = OpenIDataset(replica / "NLMCXR_png", **kw)
    assert [s.split(":", 1)[1] for s in dcm.harmonized_df["sample_id"]] == \
        [s.split(":", 1)[1] for s in png.harmonized_df["sample_id"]]
    for i in (0, 2):  # a foldered and a flat file; MONOCHROME1 inverted back
        assert float((dcm[i]["img"] - png[i]["img"]).abs().mean()) < 0.02


def test_merged_with_the_png_key_one_patient_namespace(replica):
    import radharmony

    kw = dict(cache_dir=None, dtype=torch.float32, output_cls=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merged = radharmony.merge([OpenIDicomDataset(replica / "NLMCXR_dcm", **kw),
                                   OpenIDataset(replica / "NLMCXR_png", **kw)])
    df = merged.harmonized_df
    assert df["patient_id"].str.startswith("openi:").all()
    by = df.groupby("source")["patient_id"].apply(set)
    assert by["openi"] == by["openi_dicom"]
