"""CXR-LT: 45- and 26-label overlays on MIMIC-CXR-JPG (same image paths and ids), splits,
the unverified-columns warning, label cells and the label maps."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pytest

from radharmony.datasets.cxr_lt import (LABELS_2023, LABELS_2024, SPEC, SPEC_2023,
                                        CXRLT2023Harmonizer, CXRLTHarmonizer)
from radharmony.datasets.mimic import MIMICCXRJPGHarmonizer
from radharmony.errors import MetadataError, UnverifiedFormatWarning
from radharmony.fake.cxr_lt import write_cxr_lt
from radharmony.table.schema import sample_ids, validate

D1 = "0a1b2c3d-11111111-22222222-33333333-44444444"
D2 = "5e6f7a8b-55555555-66666666-77777777-88888888"


def rows(labels, cells, *, extra=""):
    """A CXR-LT table: two images of study 50000001 of subject 10000032."""
    head = "dicom_id,subject_id,study_id,ViewPosition,fpath," + ",".join(
        f'"{c}"' if "," in c else c for c in labels) + extra
    lines = [head]
    for dicom, view, values in ((D1, "PA", cells[0]), (D2, "LATERAL", cells[1])):
        lines.append(f"{dicom},10000032,50000001,{view},files/p10/p10000032/s50000001/"
                     f"{dicom}.jpg," + ",".join(values))
    return pd.read_csv(io.StringIO("\n".join(lines) + "\n"), dtype=str)


def harmonize(raw, spec=SPEC, cls=CXRLTHarmonizer):
    return validate(cls.harmonize_raw(raw, source="rows"), spec)


def test_2024_rows_pin_ids_paths_and_labels():
    first = ["0"] * len(LABELS_2024)
    first[LABELS_2024.index("Rib Fracture")] = "1"
    first[LABELS_2024.index("Azygos Lobe")] = ""
    second = ["0"] * len(LABELS_2024)
    second[LABELS_2024.index("Normal")] = "1"
    raw = rows(LABELS_2024, [first, second], extra=",split")
    raw["split"] = ["train", "val"]
    df = harmonize(raw)
    assert df["image_path"].tolist() == [
        f"files/p10/p10000032/s50000001/{D1}.jpg", f"files/p10/p10000032/s50000001/{D2}.jpg"]
    assert df["patient_id"].tolist() == ["10000032"] * 2
    assert df["study_id"].tolist() == ["50000001"] * 2
    assert df.loc[0, "Rib Fracture"] == 1 and df.loc[0, "Normal"] == 0
    assert np.isnan(df.loc[0, "Azygos Lobe"]) and df.loc[1, "Normal"] == 1
    assert df["split"].tolist() == ["train", "valid"]
    assert df["split_raw"].tolist() == ["train", "val"]
    assert df["view_position"].tolist() == ["PA", "LATERAL"]
    assert list(sample_ids(df, SPEC)) == [f"cxr_lt:{D1}", f"cxr_lt:{D2}"]


def test_same_image_paths_and_native_ids_as_mimic_cxr_jpg(tmp_path):
    root = write_cxr_lt(tmp_path, images=False)
    with pytest.warns(UnverifiedFormatWarning, match="labels.csv"):
        lt = CXRLTHarmonizer(base_image_dir=root).harmonize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jpg = MIMICCXRJPGHarmonizer(base_image_dir=root).harmonize()
    assert sorted(lt["image_path"]) == sorted(jpg["image_path"])
    assert sorted(lt["dicom_id"]) == sorted(jpg["dicom_id"])
    assert SPEC.identity.family == SPEC_2023.identity.family == "mimic_cxr_jpg"
    joined = lt.merge(jpg, on="image_path", suffixes=("", "_jpg"))
    assert (joined["patient_id"] == joined["patient_id_jpg"]).all()
    assert (joined["split"] == joined["split_jpg"]).all()  # the fake keeps MIMIC's split


def test_2023_files_are_its_split_and_an_unlabelled_test_file_is_nan(tmp_path):
    root = write_cxr_lt(tmp_path, images=False)
    with pytest.warns(UnverifiedFormatWarning, match="cxr-lt-2023"):
        df = CXRLT2023Harmonizer(base_image_dir=root).harmonize()
    assert list(SPEC_2023.label_cols) == list(LABELS_2023) and "No Finding" in LABELS_2023
    assert set(df["split_raw"]) == {"train", "development", "test"}
    test = df[df["split"] == "test"]
    assert len(test) and test[list(LABELS_2023)].isna().all(axis=None)
    assert not df.loc[df["split"] == "train", list(LABELS_2023)].isna().any(axis=None)


def test_path_that_names_another_image_is_an_error():
    raw = rows(LABELS_2023, [["0"] * 26, ["0"] * 26])
    raw.loc[1, "fpath"] = f"files/p10/p10000032/s59999999/{D2}.jpg"
    with pytest.raises(MetadataError, match="does not match"):
        harmonize(raw, SPEC_2023, CXRLT2023Harmonizer)


def test_label_cell_other_than_0_1_is_an_error():
    cells = ["0"] * 26
    cells[3] = "-1"
    with pytest.raises(MetadataError, match="not 0, 1 or empty"):
        harmonize(rows(LABELS_2023, [cells, ["0"] * 26]), SPEC_2023, CXRLT2023Harmonizer)


def test_label_maps_cover_the_labels_and_the_hierarchy():
    from radharmony.vocabulary import mapping

    assert list(SPEC.label_map) == list(LABELS_2024)
    assert list(SPEC_2023.label_map) == list(LABELS_2023)
    m = mapping(["cxr_lt"])
    rib = m[m["source_label"] == "Rib Fracture"]
    assert ("fracture", "narrower") in set(zip(rib["finding"], rib["relation"]))
    lobar = m[m["source_label"] == "Lobar Atelectasis"]
    assert ("atelectasis", "narrower") in set(zip(lobar["finding"], lobar["relation"]))


def test_found_in_physionets_download_layout_beside_mimic_cxr_jpg(tmp_path):
    files = tmp_path / "physionet.org" / "files"
    jpg = write_cxr_lt(files / "mimic-cxr-jpg" / "2.1.0", images=False)
    release = files / "cxr-lt-iccv-workshop-cvamd" / "2.0.0"
    release.mkdir(parents=True)
    for name in ("cxr-lt-2024", "cxr-lt-2023"):
        (jpg / name).rename(release / name)
    with pytest.warns(UnverifiedFormatWarning):
        h = CXRLTHarmonizer(base_image_dir=jpg)
        assert len(h.harmonize()) == 12
    assert h.csv_path == release / "cxr-lt-2024" / "labels.csv"
    with pytest.warns(UnverifiedFormatWarning):
        assert len(CXRLT2023Harmonizer(base_image_dir=jpg).harmonize()) == 12
