"""OpenI: report sections, exact MeSH heading labels, XML vs DICOM ids, real counts, fakes."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from radharmony.datasets.openi import (LABEL_COLS, SPEC, OpenIDataset, OpenIHarmonizer,
                                       dicom_imageid)
from radharmony.fake.openi import report_xml, write_openi
from radharmony.table.schema import canonical_views, validate
from txv_data import txv_file

SECTIONS = ("None.", "Chest pain", "Small left effusion.", "Effusion.")


def harmonize(reports: dict[int, tuple], dicom: pd.DataFrame | None = None) -> pd.DataFrame:
    xml = {f"ecgen-radiology/{n}.xml": report_xml(n, *r).encode() for n, r in reports.items()}
    return validate(OpenIHarmonizer.harmonize_raw({"xml": xml, "dicom": dicom}, source="rows"),
                    SPEC)


def test_headings_match_exactly_never_by_substring():
    df = harmonize({
        7: (SECTIONS, ["Pleural Effusion/left/small", "Lung/hyperdistention"], ["emphysema"],
            ["CXR7_IM-0001-1001"]),
        8: (SECTIONS, ["Pericardial Effusion", "Subcutaneous  Emphysema"], [],
            ["CXR8_IM-0002-1001"]),
        9: (SECTIONS, ["normal"], [], ["CXR9_IM-0003-1001"])}).set_index("study_id")
    assert df.loc["CXR7", "Pleural Effusion"] == 1 and df.loc["CXR7", "Pericardial Effusion"] == 0
    assert df.loc["CXR8", "Pericardial Effusion"] == 1 and df.loc["CXR8", "Pleural Effusion"] == 0
    assert df.loc["CXR8", "Subcutaneous Emphysema"] == 1 and df.loc["CXR8", "Emphysema"] == 0
    assert df.loc["CXR7", "Emphysema"] == 0  # automatic tags are not labels
    assert df.loc["CXR7", "mesh_automatic"] == ["emphysema"]
    assert df.loc["CXR7", "mesh_major"] == ["Pleural Effusion/left/small", "Lung/hyperdistention"]
    assert df.loc["CXR9", "normal"] == 1 and df.loc["CXR9", "Cardiomegaly"] == 0


def test_no_indexing_means_missing_and_imageless_reports_give_no_row():
    df = harmonize({1: (SECTIONS, ["No Indexing"], [], ["CXR1_IM-0001-1001"]),
                    2: (SECTIONS, ["normal"], [], [])})
    assert list(df["study_id"]) == ["CXR1"]
    assert all(math.isnan(df.loc[0, c]) for c in LABEL_COLS)


def test_sections_in_report_order_and_empty_ones_dropped():
    df = harmonize({3: (("None.", "Cough", None, "No acute disease."), ["normal"], [],
                        ["CXR3_IM-0001-1001", "CXR3_IM-0001-2001"])})
    assert df.loc[0, "report"] == "INDICATION:\nCough\n\nIMPRESSION:\nNo acute disease."
    assert df["report"].nunique() == 1 and len(df) == 2  # one report, two images


def test_xml_ids_matched_to_the_dicom_table():
    assert dicom_imageid("CXR1_1_IM-0001-3001") == "CXR1_IM-0001-3001"
    assert dicom_imageid("CXR1000_IM-0003-2001") == "CXR1000_IM-0003-2001"
    dicom = pd.DataFrame({"imageid": ["CXR1_IM-0001-3001"], "View Position": ["LL"]})
    with pytest.warns(UserWarning, match="1 OpenI images have no row"):
        df = harmonize({1: (SECTIONS, ["normal"], [],
                            ["CXR1_1_IM-0001-3001", "CXR1_1_IM-0001-4001"])}, dicom)
    assert df["view_position"].tolist() == ["LL", None]  # as the DICOM table spells it
    assert df["image_path"].tolist() == ["CXR1_1_IM-0001-3001.png", "CXR1_1_IM-0001-4001.png"]


def test_real_archive_counts():
    path = txv_file("NLMCXR_reports.tgz")
    txv_file("nlmcxr_dicom_metadata.csv.gz")
    h = OpenIHarmonizer(csv_path=path)
    raw = h.read(h.inputs(path))
    assert len(raw["xml"]) == SPEC.expected["reports"] == 3_955
    with pytest.warns(UserWarning, match=r"1 OpenI images have no row.*CXR1000_IM-0003-1001"):
        df = h.harmonize()
    assert len(df) == SPEC.expected["images"] == 7_470
    assert df["study_id"].nunique() == SPEC.expected["reports_with_images"] == 3_851
    assert df["dicom_imageid"].isin(raw["dicom"]["imageid"]).sum() == 7_469
    assert df["view_position"].value_counts().to_dict() == {
        "PA": 3_593, "LL": 717, "AP": 423, "LATERAL": 119, "RL": 29, "LARGE LATERAL": 2}
    views = canonical_views(df["view_position"], SPEC.view_map)
    assert pd.Series(views).value_counts().to_dict() == {"PA": 3_593, "LATERAL": 867, "AP": 423}
    per_report = df.drop_duplicates("study_id")
    assert int(per_report["normal"].sum()) == 1_379
    assert per_report["Cardiomegaly"].isna().sum() == 92  # "No Indexing" reports with images
    assert df["report"].isna().sum() == 40  # images of reports whose four sections are empty
    assert df["report"].str.contains("IMPRESSION:\n", regex=False).sum() == 7_418


def test_fake_dataset_samples(tmp_path):
    image_dir = write_openi(tmp_path)
    with pytest.warns(UserWarning, match="no row in the DICOM table"):
        ds = OpenIDataset(image_dir, output_cls=True, output_report=True, cache_dir=None,
                          dtype=torch.float32)
    assert len(ds) == 10 and ds.harmonized_df["study_id"].nunique() == 5
    sample = ds[0]
    assert sample["img"].shape == (1, 224, 224) and sample["cls"].shape == (len(LABEL_COLS),)
    assert sample["report"].startswith("INDICATION:\nPositive TB test")
    assert sample["cls"][LABEL_COLS.index("normal")] == 1
