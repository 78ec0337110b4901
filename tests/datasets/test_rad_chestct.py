"""RAD-ChestCT: hand-written label rows (the abnormality axis, the matrix kept whole, ids,
splits, spacing), the declared geometry of a bare array read exactly, canonical labels."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radharmony.datasets.rad_chestct import (ABNORMALITIES, LABEL_MAP, LOCATIONS,
                                             METADATA_FILE, SPEC, RADChestCTHarmonizer,
                                             location_matrix)
from radharmony.vocabulary.derive import derive_findings
from radharmony.vocabulary.table import check_label_map, finding_ids
from radharmony.errors import MetadataError
from radharmony.fake.rad_chestct import LABEL_HEADER, write_rad_chestct


def write_tables(base: Path, labels: dict, meta: list[tuple], *, header=LABEL_HEADER) -> Path:
    """``labels``: split file name -> {note: present 'abn*loc' columns}; every other cell 0."""
    base.mkdir(parents=True, exist_ok=True)
    for name, rows in labels.items():
        frame = pd.DataFrame(0, index=range(len(rows)), columns=list(header[1:]))
        frame.insert(0, "NoteAcc_DEID", list(rows))
        for i, present in enumerate(rows.values()):
            frame.loc[i, list(present)] = 1
        frame.to_csv(base / name, index=False)
    pd.DataFrame(meta, columns=["NoteAcc_DEID", "MRN_DEID", "final_spacing"]).to_csv(
        base / METADATA_FILE, index=False)
    return base


LABELS = {"imgtrain_Abnormality_and_Location_Labels.csv": {
              "trn00001": ["nodule*right_upper", "nodule*left_lower", "cabg*heart"],
              "trn00002": []},
          "imgvalid_Abnormality_and_Location_Labels.csv": {
              "val00001": ["groundglass*lung", "pleural_effusion*right"]},
          "imgtest_Abnormality_and_Location_Labels.csv": {
              "tst00001": ["pacemaker_or_defib*heart"]}}
META = [("trn00001", "AB1234", "[0.8, 0.8, 0.8]"), ("trn00002", "AB1234", "0.8"),
        ("val00001", "CD5678", ""), ("tst00001", "EF9012", "[0.8, 0.8, 0.8]"),
        ("trn09999", "GH0000", "[0.8, 0.8, 0.8]")]   # in the metadata only: not public


def harmonize(base: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RADChestCTHarmonizer(base_image_dir=base).harmonize()


def test_hand_written_rows_pin_ids_splits_labels_and_the_matrix(tmp_path):
    df = harmonize(write_tables(tmp_path / "r", LABELS, META))
    assert df["study_id"].tolist() == ["trn00001", "trn00002", "val00001", "tst00001"]
    assert df["patient_id"].tolist() == ["AB1234", "AB1234", "CD5678", "EF9012"]
    assert df["split"].tolist() == ["train", "train", "valid", "test"]
    assert df["image_path"].tolist() == ["trn00001.npz", "trn00002.npz", "val00001.npz",
                                         "tst00001.npz"]
    assert df["spacing_mm"].tolist()[:2] == [0.8, 0.8] and np.isnan(df["spacing_mm"][2])
    # the abnormality axis: present at any location; every other abnormality 0
    assert df.loc[0, "nodule"] == 1 and df.loc[0, "cabg"] == 1
    assert df.loc[0, list(ABNORMALITIES)].sum() == 2
    assert df.loc[1, list(ABNORMALITIES)].sum() == 0
    assert df.loc[2, "groundglass"] == 1 and df.loc[2, "pleural_effusion"] == 1
    assert df.loc[3, "pacemaker_or_defib"] == 1
    # the whole matrix, as present pairs in the file's column order
    assert df.loc[0, "abnormality_locations"] == [["cabg", "heart"], ["nodule", "left_lower"],
                                                  ["nodule", "right_upper"]]
    matrix = location_matrix(df.loc[0, "abnormality_locations"])
    assert matrix.shape == (84, 52) and matrix.sum() == 3
    assert matrix[ABNORMALITIES.index("nodule"), LOCATIONS.index("right_upper")] == 1


def test_abnormality_axis_maps_into_the_canonical_space():
    assert len(ABNORMALITIES) == 84 and len(LOCATIONS) == 52
    assert set(LABEL_MAP) == set(ABNORMALITIES)
    assert LABEL_MAP["nodulegr1cm"] == (("nodule", "narrower"),)
    assert LABEL_MAP["pulmonary_edema"] == (("edema", "exact"),)
    assert LABEL_MAP["hernia"] == (("hiatal_hernia", "broader"),)
    assert LABEL_MAP["cabg"] is None
    check_label_map(SPEC)                    # every finding known, every relation valid
    assert {f for m in LABEL_MAP.values() if m for f, _ in m} <= set(finding_ids())


def test_canonical_labels_of_hand_written_rows(tmp_path):
    df = harmonize(write_tables(tmp_path / "r", LABELS, META))
    canon = derive_findings(df, SPEC, findings=["nodule", "lung_opacity", "pleural_effusion",
                                                "support_devices"])
    assert canon["nodule"].tolist() == [1, 0, 0, 0]
    # groundglass is narrower than lung_opacity: positive implies it, a negative says nothing
    assert canon["lung_opacity"].tolist()[2] == 1
    assert canon["pleural_effusion"].tolist() == [0, 0, 1, 0]
    assert canon["support_devices"].tolist()[3] == 1


def test_an_absent_abnormality_is_unknown_and_a_bad_column_is_named(tmp_path):
    header = ("NoteAcc_DEID", "nodule*lung", "nodule*right_upper", "emphysema*lung")
    df = harmonize(write_tables(tmp_path / "a", {
        "imgtrain_Abnormality_and_Location_Labels.csv": {"trn00001": ["emphysema*lung"]}},
        META[:1], header=header))
    assert df.loc[0, "emphysema"] == 1 and df.loc[0, "nodule"] == 0
    assert np.isnan(df.loc[0, "atelectasis"])   # no column of it in the file: unknown
    with pytest.raises(MetadataError, match="abnormality"):
        harmonize(write_tables(tmp_path / "b", {
            "imgtrain_Abnormality_and_Location_Labels.csv": {"trn00001": []}},
            META[:1], header=("NoteAcc_DEID", "nodule_right_upper")))


def test_volume_read_with_the_declared_geometry(tmp_path):
    torch = pytest.importorskip("torch")
    from radharmony.datasets.rad_chestct import RADChestCTDataset
    from radharmony.fake.volumes import synthetic_ct

    base = write_rad_chestct(tmp_path, per_split=1, hidden=0)
    hu = synthetic_ct((10, 16, 16), rng=np.random.default_rng(3))
    hu[0, 0, 0], hu[-1, -1, -1] = 777, -555           # the top slice (S), the last corner
    np.savez_compressed(base / "trn00001.npz", ct=hu[::-1])   # stored I, P, L
    ds = RADChestCTDataset(base_image_dir=base)
    assert ds.harmonized_df["study_id"].iat[0] == "trn00001"
    sample = ds[0]
    img = sample["img"][0].numpy()
    assert img.dtype == np.int16 and img.shape == (10, 16, 16)
    assert np.array_equal(img, hu)                      # canonical (S, P, L) is the source
    assert sample["spacing"].tolist() == pytest.approx([0.8, 0.8, 0.8])
    affine = sample["affine"].numpy()
    # axis 0 runs superior, 1 posterior, 2 left (LPS); the file's first slice is at z = 0
    assert np.allclose(affine[:3, :3], np.array([[0, 0, 0.8], [0, 0.8, 0], [0.8, 0, 0]]))
    assert affine[2, 3] == pytest.approx(-7.2)
    assert isinstance(sample["img"], torch.Tensor)


def test_label_cells_spelled_as_floats_or_empty_and_bad_text_named(tmp_path):
    base = tmp_path / "f"
    write_tables(base, {}, META[:2])
    name = base / "imgtrain_Abnormality_and_Location_Labels.csv"
    name.write_text("NoteAcc_DEID,nodule*lung,nodule*right_upper,emphysema*lung\n"
                    "trn00001,1.0,0.0,\ntrn00002,0.0,0.0,0.0\n")
    df = harmonize(base)
    assert df["nodule"].tolist() == [1, 0]
    assert np.isnan(df.loc[0, "emphysema"]) and df.loc[1, "emphysema"] == 0
    name.write_text("NoteAcc_DEID,nodule*lung\ntrn00001,1\ntrn00002,yes\n")
    with pytest.raises(MetadataError, match="row 1"):
        harmonize(base)
