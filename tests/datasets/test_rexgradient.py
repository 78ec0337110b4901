"""ReXGradient-160K: the page's harmonizer notes, pinned row by row."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from radharmony.datasets.rexgradient import _format_report
from radharmony.reports.format import format_report
from radharmony.errors import MetadataNotFoundError
from radharmony.harmonizer import (ReXGradientTestHarmonizer, ReXGradientTrainHarmonizer,
                                   ReXGradientValidHarmonizer)

from conftest import shared_file

PAGE_COLUMNS = ['patient_id', 'study_id', 'image_path', 'view_position', 'report',
                'accession_number', 'patient_sex', 'patient_age', 'study_date']


def entry(**over):
    e = {"AccessionNumber": "GRDNACC1", "Comparison": "None.", "EthnicGroup": None,
         "Findings": "Clear lungs.", "ImageBodyPart": ["", ""], "ImageModality": ["CR", "CR"],
         "ImagePath": ["../deid_png/P1/GRDNACC1/studies/S1/series/SE1/instances/I1.png",
                       "../deid_png/P1/GRDNACC1/studies/S1/series/SE1/instances/I2.png"],
         "ImageShape": [[2140, 1760], ""], "ImageViewPosition": ["POSTERO_ANTERIOR", None],
         "Impression": "Normal.", "Indication": "Cough", "InstitutionName": "x",
         "Manufacturer": "['SAMSUNG']", "PatientAge": "007Y", "PatientID": "P1",
         "PatientSex": "F", "PatientSize": float("nan"), "PatientWeight": 0.0,
         "StudyDate": 20191127, "StudyInstanceUid": "S1"}
    e.update(over)
    return e


def harmonize(tmp_path, entries: dict, name="valid_metadata_view_position.json"):
    p = tmp_path / name
    p.write_text(json.dumps(entries))  # json writes NaN bare, like the real files
    return ReXGradientValidHarmonizer(csv_path=p).harmonize()


def test_real_excerpt_counts():
    path = shared_file("real", "rexgradient", "test_metadata_excerpt.json")
    df = ReXGradientTestHarmonizer(csv_path=path).harmonize()
    assert len(df) == 162
    assert df["study_id"].nunique() == 100
    assert df["patient_id"].nunique() == 98
    assert df.columns.tolist() == PAGE_COLUMNS
    assert not df["image_path"].str.startswith("../").any()
    # mostly "" in this form (-> missing); the raw values that are present are kept as shipped
    assert int(df["view_position"].isna().sum()) == 135
    assert df["view_position"].value_counts().to_dict() == {"AP": 15, "PA": 5, "N/A": 4,
                                                            "LATERAL": 2, "LL": 1}
    assert df["study_date"].dtype.name == "Int64"
    assert set(df["patient_sex"]) <= {"F", "M", "O"}


def test_one_row_per_image_with_study_fields_repeated(tmp_path):
    df = harmonize(tmp_path, {"k1": entry()})
    assert df.columns.tolist() == PAGE_COLUMNS
    assert df["image_path"].tolist() == ["P1/GRDNACC1/studies/S1/series/SE1/instances/I1.png",
                                         "P1/GRDNACC1/studies/S1/series/SE1/instances/I2.png"]
    assert df["view_position"].tolist() == ["POSTERO_ANTERIOR", None]  # raw kept, null missing
    assert df["report"].nunique() == 1
    row = df.iloc[0]
    assert (row.patient_id, row.study_id, row.accession_number) == ("P1", "S1", "GRDNACC1")
    assert row.patient_age == "007Y" and row.patient_sex == "F" and row.study_date == 20191127


@pytest.mark.parametrize("sections, expected", [
    (("Cough", "Comparison: 1/15/1999", "Clear.", "Normal."),
     "INDICATION:\nCough\n\nCOMPARISON:\nComparison: 1/15/1999\n\nFINDINGS:\nClear.\n\n"
     "IMPRESSION:\nNormal."),
    (("Cough", "None.", "Clear.", "Normal."), "INDICATION:\nCough\n\nFINDINGS:\nClear.\n\n"
                                             "IMPRESSION:\nNormal."),
    (("Cough", "Comparison: None.", None, "Normal."), "INDICATION:\nCough\n\nIMPRESSION:\nNormal."),
    (("", "None", float("nan"), "  Normal. "), "IMPRESSION:\nNormal."),
    (("", None, "NONE", float("nan")), None),
    (("N/A", "none", "", "null"), None),
])
def test_report_format(sections, expected):
    assert format_report(*sections) == expected
    assert _format_report is format_report


def test_dataset_adds_canonical_view_keeping_raw(tmp_path):
    from radharmony.dataset import ReXGradientValidDataset

    df = harmonize(tmp_path, {"k": entry(ImageViewPosition=["POSTERO_ANTERIOR", "LL"])})
    ds = ReXGradientValidDataset(base_image_dir=tmp_path, harmonized_df=df, cache_dir=None)
    assert ds.harmonized_df["view_position"].tolist() == ["POSTERO_ANTERIOR", "LL"]
    assert ds.harmonized_df["view"].tolist() == ["PA", "LATERAL"]
    assert len(ds.filter(ds.harmonized_df["view"] == "PA")) == 1


def test_empty_view_string_is_missing_and_lengths_checked(tmp_path):
    df = harmonize(tmp_path, {"k": entry(ImageViewPosition=["", "LL"])})
    assert df["view_position"].tolist() == [None, "LL"]


def test_missing_view_list_gives_missing_views(tmp_path):
    e = entry()
    del e["ImageViewPosition"]
    assert harmonize(tmp_path, {"k": e})["view_position"].isna().all()


def test_csv_path_rejected_naming_the_json(rex_root):
    csv = rex_root / "download" / "metadata" / "valid_metadata.csv"
    with pytest.raises(ValueError, match="valid_metadata_view_position.json"):
        ReXGradientValidHarmonizer(csv_path=csv).harmonize()


def test_metadata_autodiscovered_from_ancestor_download_folder(rex_root, rex_images):
    h = ReXGradientTrainHarmonizer(base_image_dir=rex_images)
    assert h.resolve_metadata_path() == \
        rex_root / "download" / "metadata" / "train_metadata_view_position.json"
    assert len(h.harmonize()) > 0


def test_plain_json_used_when_view_position_file_absent(tmp_path):
    meta = tmp_path / "metadata"
    meta.mkdir()
    (meta / "test_metadata.json").write_text(json.dumps({"k": entry()}))
    h = ReXGradientTestHarmonizer(base_image_dir=tmp_path / "deid_png")
    assert h.resolve_metadata_path().name == "test_metadata.json"


def test_missing_metadata_lists_places_and_fix(tmp_path):
    with pytest.raises(MetadataNotFoundError) as exc:
        ReXGradientTestHarmonizer(base_image_dir=tmp_path / "deid_png").harmonize()
    msg = str(exc.value)
    assert "test_metadata_view_position.json" in msg
    assert str(tmp_path / "download" / "metadata") in msg
    assert "csv_path=" in msg


def test_fake_has_real_quirks(rex_root):
    text = (rex_root / "download/metadata/train_metadata_view_position.json").read_text()
    assert "NaN" in text and '"Comparison": "Comparison: None."' in text
    raw = json.loads(text)
    key, e = next(iter(raw.items()))
    assert key == f"p{e['PatientID']}_a{e['AccessionNumber']}_s{e['StudyInstanceUid']}"
    assert list(e) == sorted(e)
    assert all(p.startswith("../deid_png/") for e in raw.values() for p in e["ImagePath"])
    df = ReXGradientTrainHarmonizer(csv_path=rex_root / "download/metadata/"
                                    "train_metadata_view_position.json").harmonize()
    assert df["report"].isna().any()  # the all-empty study
    assert df.groupby("patient_id")["study_id"].nunique().max() > 1


def test_page_column_list_survives_csv(tmp_path, rex_root):
    h = ReXGradientValidHarmonizer(
        csv_path=rex_root / "download/metadata/valid_metadata_view_position.json",
        base_image_dir=rex_root / "deid_png")
    df = h.harmonize()
    df.to_csv(tmp_path / "x.csv", index=False)
    assert pd.read_csv(tmp_path / "x.csv").columns.tolist() == PAGE_COLUMNS
