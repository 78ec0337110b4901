"""NIH ChestX-ray14 and Google's expert labels: hand-written rows, the real tables, the fake."""

import warnings

import numpy as np
import pytest
import torch

from radharmony.datasets.nih import (LABEL_COUNTS, LABELS, NIHChestXray14Dataset,
                                     NIHChestXray14Harmonizer, NIHGoogleDataset,
                                     NIHGoogleHarmonizer)
from radharmony.errors import MetadataError
from radharmony.fake.nih import GOOGLE_EXTRA, entry_row, write_boxes, write_entries, write_nih
from radharmony.table.read_csv import field_names, logical_names

from txv_data import txv_file


def harmonize(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no box file beside hand-written tables
        return NIHChestXray14Harmonizer(csv_path=path, **kw).harmonize()


def test_bracketed_header_names():
    fields = ["Image Index", "OriginalImage[Width", "Height]", "Bbox [x", "y", "w", "h]", "", ""]
    assert logical_names(fields) == ["Image Index", "OriginalImage[Width,Height]",
                                     "Bbox [x,y,w,h]"]
    assert field_names("OriginalImage[Width,Height]") == ["OriginalImage[Width]",
                                                          "OriginalImage[Height]"]
    assert field_names("Follow-up #") == ["Follow-up #"]


def test_hand_written_rows_pin_labels_ids_and_follow_up(tmp_path):
    rows = [entry_row("00000007_002.png", "Infiltration|Effusion", follow_up=5, sex="F"),
            entry_row("00000007_000.png", "No Finding"),
            entry_row("00000012_001.png", "Hernia", view="AP")]
    path = write_entries(tmp_path / "Data_Entry_2017_v2020.csv", rows, sex_column="Patient Sex")
    with pytest.warns(UserWarning, match="no boxes"):
        df = NIHChestXray14Harmonizer(csv_path=path).harmonize()
    first = df.iloc[0]
    assert (first.patient_id, first.study_id, first.image_path) == \
        ("00000007", "00000007_002", "00000007_002.png")
    assert first.follow_up == 2  # the file name, not "Follow-up #" (5)
    assert first.patient_sex == "F"  # read from "Patient Sex"
    assert {k for k in LABELS if first[k] == 1} == {"Infiltration", "Effusion"}
    assert df.loc[1, list(LABELS)].sum() == 0 and not df[list(LABELS)].isna().any().any()
    assert df.loc[2, "Hernia"] == 1 and df.loc[2, "view_position"] == "AP"
    assert df["boxes"].map(len).tolist() == [0, 0, 0] and df["split"].isna().all()


def test_unknown_term_and_wrong_header_raise(tmp_path):
    path = write_entries(tmp_path / "a.csv", [entry_row("00000001_000.png", "Infiltrate")])
    with pytest.raises(MetadataError, match="unknown term.*Infiltrate"):
        harmonize(path)
    odd = write_entries(tmp_path / "c.csv", [entry_row("00000001_000.png"),
                                             ["img1.png", *entry_row("00000001_001.png")[1:]]])
    with pytest.raises(MetadataError, match=r"row 1: Image Index is not .*'img1.png'"):
        harmonize(odd)
    bad = tmp_path / "b.csv"
    bad.write_text(path.read_text().replace("Patient Gender", "Gender"))
    with pytest.raises(MetadataError, match="header does not match.*first difference at column 5"):
        harmonize(bad)


def test_row_longer_than_header_raises(tmp_path):
    path = write_entries(tmp_path / "a.csv", [entry_row("00000001_000.png") + ["extra"]])
    with pytest.raises(MetadataError, match="cannot be parsed.*11 fields per row"):
        harmonize(path)


def test_2017_release_trailing_comma(tmp_path):
    path = write_entries(tmp_path / "Data_Entry_2017.csv", [entry_row("00000003_000.png")])
    lines = path.read_text().splitlines()
    path.write_text("".join(line + ",\n" for line in lines))
    df = harmonize(path)
    assert len(df) == 1 and df.loc[0, "original_height"] == 2048


def test_boxes_split_lists_and_infiltrate(tmp_path):
    rows = [entry_row("00000007_002.png", "Infiltration"), entry_row("00000008_000.png")]
    path = write_entries(tmp_path / "Data_Entry_2017_v2020.csv", rows)
    write_boxes(tmp_path / "BBox_List_2017.csv",
                [("00000007_002.png", "Infiltrate", 102.4, 204.8, 102.4, 51.2),
                 ("00000007_002.png", "Mass", 0, 0, 1024, 1024)])
    (tmp_path / "train_val_list.txt").write_text("00000008_000.png\n")
    (tmp_path / "test_list.txt").write_text("00000007_002.png\n")
    df = NIHChestXray14Harmonizer(csv_path=path).harmonize()
    boxes = df.loc[0, "boxes"]
    assert [b["label"] for b in boxes] == ["Infiltration", "Mass"]
    assert [boxes[0][k] for k in ("x_min", "y_min", "x_max", "y_max")] == \
        pytest.approx([0.1, 0.2, 0.2, 0.25])
    assert df.loc[1, "boxes"] == [] and df["split"].tolist() == ["test", "train"]
    assert df["split_raw"].tolist() == ["test", "train_val"]
    write_boxes(tmp_path / "BBox_List_2017.csv", [("00000008_000.png", "Infiltrates", 1, 1, 2, 2)])
    with pytest.raises(MetadataError, match="unknown Finding Label"):
        NIHChestXray14Harmonizer(csv_path=path).harmonize()


def test_google_crlf_yes_no_and_sets(tmp_path):
    rows = [entry_row("00000013_008.png") + ["NO", "YES", "NO", "NO", "test"],
            entry_row("00000013_026.png") + ["YES", "NO", "NO", "YES", "val"]]
    path = write_entries(tmp_path / "google2019_nih-chest-xray-labels.csv", rows,
                         extra_header=GOOGLE_EXTRA, newline="\r\n")
    assert b"\r\n" in path.read_bytes()
    df = NIHGoogleHarmonizer(csv_path=path).harmonize()
    assert df["Pneumothorax"].tolist() == [1, 0] and df["Nodule or mass"].tolist() == [0, 1]
    assert df["split_raw"].tolist() == ["test", "val"]  # no "\r" left on the last column
    assert df["split"].tolist() == ["test", "valid"]
    path.write_bytes(path.read_bytes().replace(b"YES,NO,NO,YES", b"YES,NO,NO,MAYBE"))
    with pytest.raises(MetadataError, match="label .Nodule or mass. has an unknown value"):
        NIHGoogleHarmonizer(csv_path=path).harmonize()


def test_real_data_entry_counts():
    path = txv_file("Data_Entry_2017_v2020.csv.gz")
    h = NIHChestXray14Harmonizer(csv_path=path)
    df = h.harmonize()
    spec = h.spec.expected
    assert len(df) == spec["images"] == 112_120
    assert df["patient_id"].nunique() == spec["patients"] == 30_805
    assert df["study_id"].nunique() == spec["studies"]
    assert {k: int(df[k].sum()) for k in LABELS} == LABEL_COUNTS
    assert LABEL_COUNTS["Infiltration"] == 19_894 and LABEL_COUNTS["Hernia"] == 227
    n_boxes = df["boxes"].map(len)
    assert n_boxes.sum() == spec["boxes"] == 984 and (n_boxes > 0).sum() == spec["box_images"]
    boxed = df.loc[n_boxes > 0, "boxes"].explode()
    assert set(boxed.map(lambda b: b["label"])) <= set(LABELS)
    assert "Infiltration" in set(boxed.map(lambda b: b["label"]))
    raw = h.read(h.inputs(path))["entries"]
    suffix = raw["Image Index"].str.slice(9, 12).astype(int).to_numpy()
    assert (df["follow_up"].to_numpy() == suffix).all()
    assert (raw["Follow-up #"].astype(int).to_numpy() != suffix).sum() == 24_106


def test_real_google_counts():
    df = NIHGoogleHarmonizer(csv_path=txv_file("google2019_nih-chest-xray-labels.csv.gz")
                             ).harmonize()
    assert len(df) == 4_376 and df["patient_id"].nunique() == 1_695
    assert df["split"].value_counts().to_dict() == {"valid": 2_414, "test": 1_962}
    assert not df[["Fracture", "Pneumothorax", "Airspace opacity", "Nodule or mass"]
                  ].isna().any().any()


def test_fake_replica_yields_samples_with_boxes(tmp_path):
    images = write_nih(tmp_path, n_patients=4, size=128)
    ds = NIHChestXray14Dataset(images, output_cls=True, output_bbox=True, cache_dir=None)
    assert len(ds) == len(list(images.glob("*.png")))
    s = ds[0]
    assert s["img"].shape == (1, 224, 224) and s["cls"].shape == (len(LABELS),)
    assert s["bbox"].shape == (2, 4) and s["bbox_labels"][-1] == "Infiltration"
    assert float(s["bbox"].min()) >= 0 and float(s["bbox"].max()) <= 224
    assert ds[1]["img"].dtype == torch.bfloat16  # the RGBA PNG reads as gray
    assert set(ds.harmonized_df["split"]) == {"train", "test"}
    g = NIHGoogleDataset(images, output_cls=True, cache_dir=None)
    assert g[0]["cls"].shape == (4,) and set(g.harmonized_df["split"]) == {"valid", "test"}
    assert np.isin(g.harmonized_df["image_path"], ds.harmonized_df["image_path"]).all()
