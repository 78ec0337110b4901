"""LIDC-IDRI: hand-written reader XML -> marks (contours, holes, points, ratings, lines), the
readers' marks grouped per nodule (one a reader), bad input counted and named, one row per CT
series, and masks, boxes and points in the source volume's canonical voxels; the series with
two slices at one position read by the module's policy."""

import warnings

import numpy as np
import pytest

from radharmony.annotations.lidc_xml import group_marks, nodule_records, parse_read
from radharmony.datasets.lidc_idri import (LIDCIDRIHarmonizer, kept_files, nodule_table,
                                           read_lidc_series, series_labels)
from radharmony.errors import MetadataError, MetadataNotFoundError
from radharmony.fake.lidc_idri import write_lidc_idri

XML = b"""<?xml version="1.0" encoding="UTF-8"?>
<LidcReadMessage uid="1.2.0" xmlns="http://www.nih.gov">
<ResponseHeader><SeriesInstanceUid>1.2.3</SeriesInstanceUid>
<StudyInstanceUID>1.2</StudyInstanceUID></ResponseHeader>
<readingSession><servicingRadiologistID>anon</servicingRadiologistID>
<unblindedReadNodule><noduleID>Nodule 001</noduleID>
<characteristics><subtlety>5</subtlety><internalStructure>1</internalStructure>
<calcification>6</calcification><sphericity>3</sphericity><margin>3</margin>
<lobulation>1</lobulation><spiculation>2</spiculation><texture>5</texture>
<malignancy>4</malignancy></characteristics>
<roi><imageZposition>-125.000000 </imageZposition><imageSOP_UID>1.2.3.7</imageSOP_UID>
<inclusion>TRUE</inclusion>
<edgeMap><xCoord>10</xCoord><yCoord>10</yCoord></edgeMap>
<edgeMap><xCoord>14</xCoord><yCoord>10</yCoord></edgeMap>
<edgeMap><xCoord>14</xCoord><yCoord>14</yCoord></edgeMap>
<edgeMap><xCoord>10</xCoord><yCoord>10</yCoord></edgeMap></roi>
<roi><imageZposition>-125.000000 </imageZposition><imageSOP_UID>1.2.3.7</imageSOP_UID>
<inclusion>FALSE</inclusion>
<edgeMap><xCoord>11</xCoord><yCoord>11</yCoord></edgeMap>
<edgeMap><xCoord>12</xCoord><yCoord>11</yCoord></edgeMap>
<edgeMap><xCoord>11</xCoord><yCoord>11</yCoord></edgeMap></roi>
</unblindedReadNodule>
<nonNodule><nonNoduleID>Non-nodule 001</nonNoduleID>
<imageZposition>-130.0</imageZposition><imageSOP_UID>1.2.3.5</imageSOP_UID>
<locus><xCoord>40</xCoord><yCoord>41</yCoord></locus></nonNodule>
</readingSession>
<readingSession><servicingRadiologistID>anon</servicingRadiologistID>
<unblindedReadNodule><noduleID>IL057</noduleID>
<roi><imageZposition>-127.5</imageZposition><imageSOP_UID>1.2.3.6</imageSOP_UID>
<inclusion>TRUE</inclusion><edgeMap><xCoord>13</xCoord><yCoord>12</yCoord></edgeMap></roi>
</unblindedReadNodule></readingSession>
</LidcReadMessage>
"""


def mark(reader, x0, y0, x1, y1, z0, z1=None, kind="contour"):
    """A hand-made mark: an outline from (x0, y0) to (x1, y1) on slices at z0 .. z1."""
    zs = [z0] if z1 is None else [z0, z1]
    return {"reader": reader, "kind": kind, "characteristics": {}, "nodule_id": "n",
            "line": 1, "rois": [{"z": z, "sop": None, "inclusion": True,
                                 "xy": [[x0, y0], [x1, y1]], "line": 1} for z in zs]}


def test_hand_written_xml_becomes_marks():
    read = parse_read(XML, source="069.xml")
    assert (read["series_uid"], read["study_uid"], read["readers"]) == ("1.2.3", "1.2", 2)
    assert read["problems"] == []
    first, small = read["marks"]
    assert (first["reader"], first["nodule_id"], first["kind"], first["line"]) == \
        (1, "Nodule 001", "contour", 6)
    assert first["characteristics"] == {
        "subtlety": 5, "internalStructure": 1, "calcification": 6, "sphericity": 3,
        "margin": 3, "lobulation": 1, "spiculation": 2, "texture": 5, "malignancy": 4}
    outline, hole = first["rois"]
    assert (outline["z"], outline["sop"], outline["inclusion"], outline["line"]) == \
        (-125.0, "1.2.3.7", True, 11)  # the trailing blank of imageZposition read
    assert outline["xy"] == [[10, 10], [14, 10], [14, 14], [10, 10]]
    assert hole["inclusion"] is False
    assert (small["reader"], small["kind"], small["characteristics"]) == (2, "point", {})
    assert small["rois"][0]["xy"] == [[13, 12]]
    assert read["non_nodules"] == [{"reader": 1, "nodule_id": "Non-nodule 001", "line": 23,
                                    "z": -130.0, "sop": "1.2.3.5", "xy": [[40, 41]]}]
    # the small nodule lies in reader 1's outline: one nodule, read by both
    groups = group_marks(read["marks"])
    assert groups == [[0, 1]]
    record, = nodule_records(read["marks"], groups)
    assert (record["kind"], record["readers"], record["nodule_ids"]) == \
        ("contour", [1, 2], ["Nodule 001", "IL057"])
    assert record["characteristics"]["malignancy"] == [4]
    assert record["malignancy_median"] == 4.0


def test_a_radiograph_read_is_no_ct_row():
    cr = XML.replace(b"LidcReadMessage", b"IdriReadMessage")
    assert parse_read(cr, source="001.xml") is None
    with pytest.raises(MetadataError, match="not a well-formed XML"):
        parse_read(XML[:200], source="069.xml")


def test_grouping_one_mark_a_reader_nearest_group():
    marks = [mark(1, 10, 10, 14, 14, -125.0),   # nodule A
             mark(1, 100, 100, 104, 104, -125.0),  # reader 1's nodule B, far away
             mark(2, 12, 12, 16, 16, -127.5),    # near A: joins it
             mark(2, 15, 15, 16, 16, -125.0),    # near A, but reader 2 is in A already
             mark(3, 107, 101, 107, 101, -130.0, kind="point"),  # within 5 px of B
             mark(3, 30, 10, 30, 10, -125.0, kind="point")]      # 16 px from A: alone
    assert group_marks(marks) == [[0, 2], [1, 4], [3], [5]]
    # nearest of two candidates: reader 2's mark between A (centre 12) and C (centre 20)
    two = [mark(1, 10, 10, 14, 14, 0.0), mark(1, 18, 10, 22, 14, 0.0),
           mark(2, 17, 10, 21, 14, 0.0)]
    assert group_marks(two) == [[0], [1, 2]]


def test_series_labels_from_median_malignancy():
    def groups(*medians):
        return [{"kind": "contour", "malignancy_median": m} for m in medians]
    assert series_labels(groups(4.0, 2.0)) == [1.0, 0.0, 1.0]
    assert series_labels(groups(2.0, 1.5)) == [1.0, 0.0, 0.0]
    assert np.isnan(series_labels(groups(3.0, 2.0))[2])   # indeterminate
    assert np.isnan(series_labels(groups(None))[2])       # outlined, never rated
    assert series_labels([{"kind": "point", "malignancy_median": None}]) == [0.0, 1.0, 0.0]
    assert series_labels([]) == [0.0, 0.0, 0.0]


def test_bad_input_is_counted_named_and_left_out():
    bad = (XML.replace(b"<servicingRadiologistID>anon</servicingRadiologistID>\n<unblinded",
                       b"<unblinded", 1)  # session 1 without a reader id
           .replace(b"<edgeMap><xCoord>13</xCoord><yCoord>12</yCoord></edgeMap>",
                    b"<edgeMap><xCoord>13</xCoord><yCoord>12</yCoord></edgeMap>"
                    b"<edgeMap><xCoord>-2</xCoord><yCoord>12</yCoord></edgeMap>"))
    read = parse_read(bad, source="069.xml")
    assert [(p["line"], p["what"].split(" (")[0]) for p in read["problems"]] == [
        (5, "unknown reader id"), (28, "a point outside the image")]  # one line less
    assert read["marks"] == [] and read["non_nodules"] == [] and read["readers"] == 1
    unclosed = XML.replace(b"<edgeMap><xCoord>10</xCoord><yCoord>10</yCoord></edgeMap></roi>",
                           b"</roi>")
    read = parse_read(unclosed, source="069.xml")
    assert [(p["line"], p["what"][:29]) for p in read["problems"]] == [
        (11, "a contour that does not close")]
    assert [r["inclusion"] for r in read["marks"][0]["rois"]] == [False]  # the hole stays
    scale = XML.replace(b"<malignancy>4</malignancy>", b"<malignancy>7</malignancy>")
    read = parse_read(scale, source="069.xml")
    assert read["problems"][0]["what"] == "malignancy 7 outside 1..5: that rating left out"
    assert read["marks"][0]["characteristics"]["malignancy"] is None


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    return write_lidc_idri(tmp_path_factory.mktemp("lidc"))


def test_one_row_per_ct_series(replica):
    df = LIDCIDRIHarmonizer(base_image_dir=replica).harmonize()
    uid = "1.3.6.1.4.1.14519.5.2.1.6279.6001.0"
    assert df["patient_id"].tolist() == ["LIDC-IDRI-0001", "LIDC-IDRI-0002", "LIDC-IDRI-0003"]
    assert df["study_id"].tolist() == [f"{uid}.1", f"{uid}.2", f"{uid}.3"]
    assert df["series_instance_uid"].tolist() == [f"{uid}.1.3001", f"{uid}.2.3002",
                                                  f"{uid}.3.3003"]
    assert df["image_path"].iloc[0] == f"LIDC-IDRI/LIDC-IDRI-0001/{uid}.1/{uid}.1.3001"
    assert df["xml_path"].iloc[1] == f"LIDC-IDRI/LIDC-IDRI-0002/{uid}.2/{uid}.2.3002/070.xml"
    assert df["nodule_ge_3mm"].tolist() == [1.0, 1.0, 0.0]
    assert df["nodule_lt_3mm"].tolist() == [1.0, 0.0, 0.0]
    assert df["malignancy_suspicious"].tolist() == [1.0, 0.0, 0.0]  # medians 4, 2, none
    assert df["readers"].tolist() == [4, 1, 1]
    assert df["nodule_count"].tolist() == [2, 1, 0]
    assert df["non_nodules"].tolist() == [1, 0, 1] and df["xml_problems"].tolist() == [0, 0, 0]
    a, b = df["nodules"].iloc[0]
    assert (a["kind"], a["readers"], a["characteristics"]["malignancy"]) == \
        ("contour", [1, 2, 3], [4, 5, 3])
    assert (b["kind"], b["readers"], b["malignancy_median"]) == ("point", [1, 4], None)


def test_the_collection_folder_is_the_metadata(tmp_path, replica):
    h = LIDCIDRIHarmonizer(csv_path=replica / "LIDC-IDRI", base_image_dir=tmp_path)
    assert len(h.harmonize()) == 3
    with pytest.raises(MetadataNotFoundError, match="LIDC-IDRI collection folder"):
        LIDCIDRIHarmonizer(base_image_dir=tmp_path).harmonize()


@pytest.fixture(scope="module")
def dataset(replica):
    from radharmony.datasets.lidc_idri import LIDCIDRIDataset
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LIDCIDRIDataset(base_image_dir=replica, output_mask=True)


def test_contours_points_and_boxes_in_source_voxels(dataset):
    # readers 1-3 outline nodule A; a voxel needs 2 of the 3 (consensus 0.5)
    labels = dataset.drawn(0)["labels"]
    assert labels.shape == (8, 32, 32) and labels.dtype == np.uint16
    expected = np.zeros((8, 32, 32), np.uint16)
    expected[2, 11:15, 11:15] = 1   # readers 1 (10-14) and 2 (11-15)
    expected[3, 10:15, 10:15] = 1   # reader 3's ring (hole 11-13) and reader 1 make the edge
    assert np.array_equal(labels, expected)
    ann = dataset.annotations(0)
    assert ann["boxes"].tolist() == [[9.5, 9.5, 1.5, 14.5, 14.5, 3.5]]  # x, y, z; voxel +-0.5
    assert ann["box_labels"] == ["nodule_ge_3mm"]
    # the small nodule: readers 1 and 4 at x 25 and 26, y 20, slice 5; the non-nodule
    assert ann["points"].tolist() == [[25.5, 20.0, 5.0], [5.0, 25.0, 1.0]]
    assert ann["point_labels"] == ["nodule_lt_3mm", "non_nodule"]
    three = dataset.annotations(2)  # no nodule: the non-nodule alone
    assert sorted(three) == ["point_labels", "points"]
    assert three["points"].tolist() == [[16.0, 16.0, 4.0]]
    assert dataset.harmonized_df["sample_id"].iloc[0] == \
        "lidc_idri:1.3.6.1.4.1.14519.5.2.1.6279.6001.0.1.3001"
    sample = dataset[0]
    assert np.array_equal(sample["mask"][0].numpy(), expected)


def test_consensus_share(replica):
    from radharmony.datasets.lidc_idri import LIDCIDRIDataset
    every = LIDCIDRIDataset(base_image_dir=replica, consensus=1.0)
    labels = every.drawn(0)["labels"]
    assert np.argwhere(labels).tolist() == [[3, 11, 14], [3, 12, 14], [3, 13, 14],
                                            [3, 14, 11], [3, 14, 12], [3, 14, 13], [3, 14, 14]]
    assert every.annotations(0)["boxes"].tolist() == [[10.5, 10.5, 2.5, 14.5, 14.5, 3.5]]
    anyone = LIDCIDRIDataset(base_image_dir=replica, consensus=0.0)
    assert anyone.annotations(0)["boxes"].tolist() == [[9.5, 9.5, 1.5, 15.5, 15.5, 4.5]]
    # slices 2 and 3: the two squares' union; slice 4: reader 2's square
    assert int((anyone.drawn(0)["labels"] > 0).sum()) == 34 + 34 + 25


def test_duplicate_slice_positions_keep_the_lowest_instance(replica, dataset):
    folder = replica / dataset.harmonized_df["image_path"].iloc[1]
    files, dropped = kept_files(folder)
    assert dropped == 1 and len(files) == 8
    assert folder / "000009.dcm" not in files  # the duplicate: the highest InstanceNumber
    with pytest.warns(UserWarning, match="1 slices at a position already held"):
        volume = read_lidc_series(str(folder))
    assert volume.shape == (8, 32, 32)
    # the reader outlined 5-8 on the dropped duplicate: drawn on the kept slice at its z
    labels = dataset.drawn(1)["labels"]
    assert np.argwhere(labels).min(axis=0).tolist() == [3, 5, 5]
    assert np.argwhere(labels).max(axis=0).tolist() == [3, 8, 8]


def test_bad_marks_are_warned_with_file_and_line(tmp_path):
    from radharmony.datasets.lidc_idri import LIDCIDRIDataset
    root = write_lidc_idri(tmp_path, bad=True)
    with pytest.warns(UserWarning, match=r"2 problems in the reader XML files .*069\.xml:\d+: "
                                         r"a contour that does not close.*069\.xml:\d+: "
                                         r"unknown reader id"):
        df = LIDCIDRIHarmonizer(base_image_dir=root).harmonize()
    assert df["xml_problems"].tolist() == [2, 0, 0] and df["readers"].iloc[0] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = LIDCIDRIDataset(base_image_dir=root)
    with pytest.warns(UserWarning, match=r"1 marks off the series or outside the volume .*"
                                         r"069\.xml:\d+: outside the volume"):
        ann = ds.annotations(0)
    assert ann["points"].tolist() == [[25.5, 20.0, 5.0], [5.0, 25.0, 1.0]]  # (40, 5) not drawn
    assert ann["boxes"].tolist() == [[9.5, 9.5, 1.5, 14.5, 14.5, 3.5]]


def test_the_mask_follows_a_preset_by_the_nearest_label(replica):
    from radharmony.datasets.lidc_idri import LIDCIDRIDataset
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample = LIDCIDRIDataset(base_image_dir=replica, output_mask=True, preset="m3d")[0]
    assert sample["mask"].shape == sample["img"].shape == (1, 32, 256, 256)
    assert sorted(sample["mask"].unique().tolist()) == [0, 1]  # never blended


def test_uids_come_from_the_xml_whatever_the_folder_names(tmp_path):
    """The NBIA Data Retriever's descriptive folder names (``01-01-2000-NA-NA-30178``,
    ``3000566.000000-NA-03192``) in place of the UIDs: the table keeps the XML's UIDs."""
    root = write_lidc_idri(tmp_path)
    patient = root / "LIDC-IDRI" / "LIDC-IDRI-0002"
    study, = patient.iterdir()
    series, = study.iterdir()
    series.rename(study / "3000566.000000-NA-03192")
    study.rename(patient / "01-01-2000-NA-NA-30178")
    df = LIDCIDRIHarmonizer(base_image_dir=root).harmonize()
    uid = "1.3.6.1.4.1.14519.5.2.1.6279.6001.0"
    assert df["study_id"].iloc[1] == f"{uid}.2"
    assert df["series_instance_uid"].iloc[1] == f"{uid}.2.3002"
    assert df["image_path"].iloc[1] == \
        "LIDC-IDRI/LIDC-IDRI-0002/01-01-2000-NA-NA-30178/3000566.000000-NA-03192"


def test_the_nodule_table_holds_each_nodule_and_its_median_ratings(replica):
    table = nodule_table(LIDCIDRIHarmonizer(base_image_dir=replica).harmonize())
    assert table[["patient_id", "nodule", "kind", "readers", "mask_label"]].values.tolist() == [
        ["LIDC-IDRI-0001", 1, "contour", 3, 1], ["LIDC-IDRI-0001", 2, "point", 2, 0],
        ["LIDC-IDRI-0002", 1, "contour", 1, 1]]
    assert table["malignancy"].tolist()[::2] == [4.0, 2.0]  # medians of 4, 5, 3 and of 2
    assert np.isnan(table["malignancy"].iloc[1])  # a small nodule is never rated
    assert table["calcification"].tolist()[::2] == [6.0, 6.0]


def test_a_consensus_outside_0_1_and_a_missing_xml_are_refused(tmp_path):
    from radharmony.datasets.lidc_idri import LIDCIDRIDataset
    from radharmony.errors import ImageReadError, RadHarmonyError
    root = write_lidc_idri(tmp_path)
    with pytest.raises(RadHarmonyError, match="consensus is a share of the readers"):
        LIDCIDRIDataset(base_image_dir=root, consensus=2)
    ds = LIDCIDRIDataset(base_image_dir=root)
    (root / ds.harmonized_df["xml_path"].iloc[2]).unlink()
    with pytest.raises(ImageReadError, match="reader XML is missing"):
        ds.annotations(2)


def test_boxes_and_points_are_sample_outputs_as_read_and_through_a_preset(replica):
    from radharmony.datasets.lidc_idri import LIDCIDRIDataset
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = LIDCIDRIDataset(base_image_dir=replica, output_bbox3d=True, output_points=True)[0]
        m3d = LIDCIDRIDataset(base_image_dir=replica, output_bbox3d=True, output_points=True,
                              preset="m3d")[0]
    # as read, the returned volume is the source: the hook's voxels, unchanged
    assert plain["bbox3d"].tolist() == [[9.5, 9.5, 1.5, 14.5, 14.5, 3.5]]
    assert plain["bbox3d_labels"] == ["nodule_ge_3mm"]
    assert plain["points"].tolist() == [[25.5, 20.0, 5.0], [5.0, 25.0, 1.0]]
    # through m3d the world box stays the same; its voxels scale 256/32 in plane, 32/8 in depth
    assert np.allclose(m3d["bbox3d_mm"].numpy(), plain["bbox3d_mm"].numpy())
    x0, y0, z0, x1, y1, z1 = m3d["bbox3d"][0].tolist()
    assert abs((x0 + x1) / 2 - (12.0 + 0.5) * 8 + 0.5) <= 0.5 + 1e-6
    assert abs((z0 + z1) / 2 - (2.5 + 0.5) * 4 + 0.5) <= 0.5 + 1e-6
