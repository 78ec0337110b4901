"""CT-RATE: hand-written rows (ids, XYSpacing, the v1/v2 rescale, names), the fake's volumes read
exactly (v1 rescaled once, v2 never), one volume per study, the table cache."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets.ct_rate import (LABELS, CTRATETrainHarmonizer, CTRATEValidHarmonizer,
                                         numbers)
from radharmony.errors import MetadataError
from radharmony.fake.ct_rate import METADATA_HEADER, write_ct_rate

#: two reconstructions of one scan (v1 intercept -1024, non-square pixels on the second) and
#: one of another patient (-8192); every other metadata column empty
META = [{"VolumeName": "train_7_a_1.nii.gz", "XYSpacing": "[0.75, 0.75]", "ZSpacing": "1.5",
         "RescaleSlope": "1", "RescaleIntercept": "-1024",
         "ImagePositionPatient": "[-175.0, -190.0, -300.5]",
         "ImageOrientationPatient": "[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]",
         "PatientSex": "F", "PatientAge": "058Y"},
        {"VolumeName": "train_7_a_2.nii.gz", "XYSpacing": "[0.703125, 0.8]", "ZSpacing": "1",
         "RescaleSlope": "1", "RescaleIntercept": "-1024",
         "ImagePositionPatient": "[-175.0, -190.0, -300.5]",
         "ImageOrientationPatient": "[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]",
         "PatientSex": "F", "PatientAge": "058Y"},
        {"VolumeName": "train_12_b_1.nii.gz", "XYSpacing": "[0.58, 0.58]", "ZSpacing": "2.5",
         "RescaleSlope": "1.0", "RescaleIntercept": "-8192.0",
         "ImagePositionPatient": "[-150.0, -160.0, -420.0]",
         "ImageOrientationPatient": "[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]",
         "PatientSex": "M", "PatientAge": "071Y"}]
REPORTS = ('VolumeName,ClinicalInformation_EN,Technique_EN,Findings_EN,Impressions_EN\n'
           'train_7_a_1.nii.gz,Cough.,Non-contrast axial images.,"Mild emphysema, no nodule.",'
           'Emphysema.\n'
           'train_12_b_1.nii.gz,,Axial images.,Clear lungs.,Normal.\n')
LABEL_ROWS = {"train_7_a_1.nii.gz": {"Emphysema": 1, "Lung nodule": 0},
              "train_7_a_2.nii.gz": {"Emphysema": 1},
              "train_12_b_1.nii.gz": {"Medical material": 1, "Pericardial effusion": 1}}


def write_dataset(root: Path, *, trees=()) -> Path:
    """The three CSVs from the rows above under ``root/dataset``; ``trees``: (tree, name)
    pairs of empty volume files to place."""
    base = root / "dataset"
    (base / "metadata").mkdir(parents=True)
    pd.DataFrame([{c: row.get(c, "") for c in METADATA_HEADER} for row in META]).to_csv(
        base / "metadata" / "train_metadata.csv", index=False)
    (base / "radiology_text_reports").mkdir()
    (base / "radiology_text_reports" / "train_reports.csv").write_text(REPORTS)
    (base / "multi_abnormality_labels").mkdir()
    pd.DataFrame([{"VolumeName": n, **{k: v.get(k, 0) for k in LABELS}}
                  for n, v in LABEL_ROWS.items()]).to_csv(
        base / "multi_abnormality_labels" / "train_predicted_labels.csv", index=False)
    for tree, name in trees:
        patient, scan = name.split("_")[1], name.split("_")[2]
        path = base / tree / f"train_{patient}" / f"train_{patient}_{scan}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    return base


def test_hand_written_rows_pin_ids_spacing_labels_and_reports(tmp_path):
    base = write_dataset(tmp_path)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        df = CTRATETrainHarmonizer(base_image_dir=base).harmonize()
    assert any("1 of 3 volumes have no row in the report table" in str(w.message) for w in rec)
    assert df["patient_id"].tolist() == ["train_7", "train_7", "train_12"]
    assert df["study_id"].tolist() == ["train_7_a", "train_7_a", "train_12_b"]
    assert df["volume_name"].tolist() == ["train_7_a_1", "train_7_a_2", "train_12_b_1"]
    assert df["reconstruction"].tolist() == [1, 2, 1]
    # no volume tree at all: the current release's (v2) paths, nothing to rescale
    assert df["image_path"].tolist() == ["train_fixed/train_7/train_7_a/train_7_a_1.nii.gz",
                                         "train_fixed/train_7/train_7_a/train_7_a_2.nii.gz",
                                         "train_fixed/train_12/train_12_b/train_12_b_1.nii.gz"]
    assert df["volume_version"].tolist() == [2, 2, 2]
    assert df["rescale_slope"].isna().all() and df["rescale_intercept"].isna().all()
    # XYSpacing: two numbers each, the second kept where it differs
    assert df["spacing_x"].tolist() == [0.75, 0.703125, 0.58]
    assert df["spacing_y"].tolist() == [0.75, 0.8, 0.58]
    assert df["spacing_z"].tolist() == [1.5, 1.0, 2.5]
    assert df["image_position_patient"].iloc[2] == [-150.0, -160.0, -420.0]
    assert df["image_orientation_patient"].iloc[0] == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert (df["patient_sex"].tolist(), df["patient_age"].tolist()) == \
        (["F", "F", "M"], ["058Y", "058Y", "071Y"])
    assert df.loc[0, "Emphysema"] == 1 and df.loc[0, "Lung nodule"] == 0
    assert df.loc[2, "Medical material"] == 1 and df.loc[2, "Pericardial effusion"] == 1
    assert df.loc[2, "Emphysema"] == 0
    # the scan's report serves its second reconstruction, which has no report row
    assert df.loc[0, "report"] == ("CLINICAL INFORMATION:\nCough.\n\nTECHNIQUE:\nNon-contrast "
                                   "axial images.\n\nFINDINGS:\nMild emphysema, no nodule.\n\n"
                                   "IMPRESSION:\nEmphysema.")
    assert df.loc[1, "report"] == df.loc[0, "report"]
    assert df.loc[1, "section_findings"] == "Mild emphysema, no nodule."
    assert df.loc[2, "section_clinical_information"] is None
    assert df.loc[2, "report"] == "TECHNIQUE:\nAxial images.\n\nFINDINGS:\nClear lungs.\n\n" \
                                  "IMPRESSION:\nNormal."
    assert set(df["split"]) == {"train"} and set(df["split_raw"]) == {"train"}


def test_the_version_is_found_per_volume_and_only_v1_is_rescaled(tmp_path):
    """v2 (``train_fixed/``) wins where a volume is in both trees; a volume only in the v1
    tree (``train/``) takes the metadata's rescale; nothing is rescaled twice."""
    base = write_dataset(tmp_path, trees=[("train_fixed", "train_7_a_1.nii.gz"),
                                          ("train", "train_7_a_1.nii.gz"),
                                          ("train", "train_7_a_2.nii.gz"),
                                          ("train", "train_12_b_1.nii.gz")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = CTRATETrainHarmonizer(base_image_dir=base).harmonize()
    assert df["volume_version"].tolist() == [2, 1, 1]
    assert df["image_path"].tolist() == ["train_fixed/train_7/train_7_a/train_7_a_1.nii.gz",
                                         "train/train_7/train_7_a/train_7_a_2.nii.gz",
                                         "train/train_12/train_12_b/train_12_b_1.nii.gz"]
    assert df["rescale_slope"].tolist()[1:] == [1.0, 1.0] and np.isnan(df["rescale_slope"][0])
    assert df["rescale_intercept"].tolist()[1:] == [-1024.0, -8192.0]
    assert np.isnan(df["rescale_intercept"][0])


def test_only_the_v1_tree_makes_every_unlisted_volume_v1(tmp_path):
    base = write_dataset(tmp_path, trees=[("train", "train_7_a_1.nii.gz")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = CTRATETrainHarmonizer(base_image_dir=base).harmonize()
    assert df["volume_version"].tolist() == [1, 1, 1]
    assert df["image_path"].iloc[2] == "train/train_12/train_12_b/train_12_b_1.nii.gz"


def test_valid_split_finds_the_valid_labels_beside_validation_files(tmp_path):
    base = write_ct_rate(tmp_path, split="valid", n_patients=2, metadata_only=True)
    assert (base / "multi_abnormality_labels" / "valid_predicted_labels.csv").is_file()
    assert (base / "metadata" / "validation_metadata.csv").is_file()
    df = CTRATEValidHarmonizer(base_image_dir=base).harmonize()  # no warning: all found
    assert df["patient_id"].tolist() == ["valid_1", "valid_1", "valid_2", "valid_2", "valid_2"]
    assert df["image_path"].iloc[0] == "valid_fixed/valid_1/valid_1_a/valid_1_a_1.nii.gz"
    assert not df[list(LABELS)].isna().any().any()
    assert set(df["split"]) == {"valid"}


def test_xy_spacing_is_two_numbers_or_an_error():
    cells = pd.Series(["[0.75, 0.75]", " [0.5,0.6] ", "[1e-1, 2]"])
    assert numbers(cells, 2, source="t", column="XYSpacing").tolist() == \
        [[0.75, 0.75], [0.5, 0.6], [0.1, 2.0]]
    for bad in ("0.75", "[0.75]", "[0.75, 0.75, 1]", "[0.75, x]"):
        with pytest.raises(MetadataError, match="XYSpacing is not a list of 2 numbers"):
            numbers(pd.Series(["[0.7, 0.7]", bad]), 2, source="t", column="XYSpacing")


def test_a_bad_volume_name_is_named(tmp_path):
    base = write_dataset(tmp_path)
    meta = base / "metadata" / "train_metadata.csv"
    meta.write_text(meta.read_text().replace("train_12_b_1.nii.gz", "train_12_b.nii.gz", 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(MetadataError, match=r"row 2: VolumeName is not .*train_12_b\.nii"):
            CTRATETrainHarmonizer(base_image_dir=base).harmonize()


# -- volumes ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """Patients 1-2 of the fake: every volume in the v2 tree, and in the v1 tree as well."""
    root = tmp_path_factory.mktemp("ct_rate")
    both = ("train_1_a_1", "train_1_a_2", "train_2_a_1", "train_2_a_2", "train_2_b_1")
    return write_ct_rate(root, n_patients=2, both=both)


def dataset(base, **kw):
    from radharmony.datasets.ct_rate import CTRATETrainDataset

    return CTRATETrainDataset(base_image_dir=base, cache_dir=None, **kw)


def test_a_v2_volume_is_hu_in_the_canonical_order_with_its_header_geometry(replica):
    ds = dataset(replica)
    assert ds.harmonized_df["volume_version"].tolist() == [2, 2, 2, 2, 2]  # v2 preferred
    s = ds[1]  # train_1_a_2: XYSpacing "[0.75, 0.8]", ZSpacing 1, IPP [-175, -190, -310.5]
    img = s["img"][0].numpy()
    assert s["img"].shape == (1, 12, 20, 24) and s["img"].dtype == torch.int16
    # HU, not stored values: padding outside the field of view, air around the body
    assert img[0, 0, 0] == -1024 and -1020 <= img[6, 10, 0] <= -980
    assert s["spacing"].tolist() == pytest.approx([1.0, 0.8, 0.75])  # (d, h, w): z, y, x
    # canonical (S, P, L) = the file's (slice, row, column): no flip for this orientation
    assert s["affine"].numpy() == pytest.approx(np.array(
        [[0, 0, 0.75, -175.0], [0, 0.8, 0, -190.0], [1.0, 0, 0, -310.5], [0, 0, 0, 1]]))


def test_a_v1_volume_is_rescaled_once_and_takes_the_metadata_geometry(replica, tmp_path):
    """The same volumes read from the v1 tree (stored values, header defaults, the metadata's
    rescale -1024 or -8192 and geometry) equal the v2 reads voxel for voxel."""
    v2 = dataset(replica)
    import shutil

    v1_only = tmp_path / "dataset"
    shutil.copytree(replica, v1_only, ignore=shutil.ignore_patterns("train_fixed"))
    v1 = dataset(v1_only)
    df = v1.harmonized_df
    assert df["volume_version"].tolist() == [1, 1, 1, 1, 1]
    assert df["rescale_intercept"].tolist() == [-1024.0, -8192.0, -8192.0, -1024.0, -8192.0]
    for i in range(len(v1)):
        a, b = v1[i], v2[i]
        assert torch.equal(a["img"], b["img"]), i
        assert a["affine"].numpy() == pytest.approx(b["affine"].numpy(), abs=1e-5), i
    assert v1[1]["spacing"].tolist() == pytest.approx([1.0, 0.8, 0.75])


def test_a_rescale_on_a_v2_volume_is_refused_not_applied_twice(replica):
    from radharmony.volumes.checks import HounsfieldError

    ds = dataset(replica)
    df = ds.harmonized_df.copy()
    df.loc[0, ["rescale_slope", "rescale_intercept"]] = [1.0, -1024.0]  # as CT-CLIP does
    bad = dataset(replica, harmonized_df=df.drop(columns=["sample_id", "view", "age_years",
                                                          "sex"]))
    with pytest.raises(HounsfieldError, match="train_1_a_1.nii.gz"):
        bad[0]


def test_one_per_study_keeps_the_thinnest_reconstruction_as_the_mixtures_do(replica):
    """Scan ``a``'s second reconstruction has 1.0 mm slices, its first 1.5 mm: the thinner
    one is kept (the mixtures' CT tasks read the same volume of each study)."""
    from radharmony.mixture.tasks.volumes import chosen_volumes

    ds = dataset(replica, one_per_study=True)
    assert ds.harmonized_df["volume_name"].tolist() == ["train_1_a_2", "train_2_a_2",
                                                        "train_2_b_1"]
    whole = dataset(replica).harmonized_df
    assert sorted(whole["volume_name"].iloc[chosen_volumes(whole)[0]]) == \
        ds.harmonized_df["volume_name"].tolist()
    train, val = ds.get_datasets(2, seed=0)  # patient-grouped, as every dataset
    assert not set(train.harmonized_df["patient_id"]) & set(val.harmonized_df["patient_id"])


def test_the_cached_table_follows_the_trees(replica, tmp_path):
    import shutil

    base = tmp_path / "dataset"
    shutil.copytree(replica, base, ignore=shutil.ignore_patterns("train_fixed"))
    cache = tmp_path / "cache"
    first = CTRATETrainHarmonizer(base_image_dir=base).harmonize(cache_dir=cache)
    assert first["volume_version"].tolist() == [1] * 5
    shutil.copytree(replica / "train_fixed", base / "train_fixed")  # v2 downloaded later
    again = CTRATETrainHarmonizer(base_image_dir=base).harmonize(cache_dir=cache)
    assert again["volume_version"].tolist() == [2] * 5
    assert again["rescale_intercept"].isna().all()


def test_cached_samples_equal_uncached_ones(replica, tmp_path):
    from radharmony.datasets.ct_rate import CTRATETrainDataset

    cached = CTRATETrainDataset(base_image_dir=replica, cache_dir=tmp_path / "c",
                                output_cls=True)
    plain = dataset(replica, output_cls=True)
    for _ in range(2):  # filling, then from the cache
        for i in (0, 2):
            a, b = cached[i], plain[i]
            assert a.keys() == b.keys()
            assert torch.equal(a["img"], b["img"]) and torch.equal(a["affine"], b["affine"])
    assert len(set(cached.cache_keys())) == len(cached)


# -- the command line and the viewer --------------------------------------------------------------
def test_cli_list_info_harmonize_cache_on_the_fake(replica, tmp_path, capsys):
    import json

    from radharmony.cli.main import main

    assert main(["list", "--json"]) == 0
    keys = {d["key"] for d in json.loads(capsys.readouterr().out)}
    assert {"ct_rate_train", "ct_rate_valid"} <= keys
    assert main(["info", "ct_rate_train", "--root", str(replica), "--json", "-q"]) == 0
    info = json.loads(capsys.readouterr().out)
    info = info[0] if isinstance(info, list) else info
    assert (info["images"], info["studies"], info["patients"]) == (5, 3, 2)
    assert main(["info", "ct_rate_train", "--root", str(replica), "-q"]) == 0
    assert "  volumes           5  (full release: 47,149)" in capsys.readouterr().out
    out = tmp_path / "tables"
    assert main(["harmonize", "ct_rate_train", "--root", str(replica), "--out", str(out),
                 "-q"]) == 0
    table = pd.read_parquet(out / "ct_rate_train.parquet")
    assert table["volume_name"].tolist()[:2] == ["train_1_a_1", "train_1_a_2"]
    capsys.readouterr()
    cache = tmp_path / "cache"
    assert main(["cache", "ct_rate_train", "--root", str(replica), "--cache-dir", str(cache),
                 "--json", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    report = report[0] if isinstance(report, list) else report
    assert (report["cached"], report["failed"]) == (5, 0)
    assert len(list((cache / "volumes").rglob("*.b2nd"))) == 5


def test_the_viewer_shows_a_volume_s_middle_axial_slice(replica):
    import cv2

    from radharmony.viewer.app import ViewerApp

    app = ViewerApp([dataset(replica, output_cls=True, output_report=True)])
    s = app.sample(index=1)
    assert s["image_error"] is None and (s["height"], s["width"]) == (20, 24)
    assert s["fields"]["volume_shape"] == [12, 20, 24]
    assert [x["title"] for x in s["sections"]] == ["CLINICAL INFORMATION", "TECHNIQUE",
                                                   "FINDINGS", "IMPRESSION"]
    png = cv2.imdecode(np.frombuffer(app.image_png(index=1), np.uint8), cv2.IMREAD_UNCHANGED)
    assert png.shape == (20, 24) and png.min() == 0 and png.max() == 255


def test_a_preset_sample_is_the_model_input_cached_or_not(replica, tmp_path):
    from radharmony.datasets.ct_rate import CTRATETrainDataset
    from radharmony.volumes.presets import PRESETS

    plain = dataset(replica, preset="merlin", dtype=torch.float32)
    cached = CTRATETrainDataset(base_image_dir=replica, cache_dir=tmp_path / "c",
                                preset="merlin", dtype=torch.float32)
    direct = PRESETS["merlin"].apply(dataset(replica).read_volume(2))  # the preset's own
    for _ in range(2):  # filling, then from the cache
        a, b = cached[2], plain[2]
        assert a["img"].shape == (1, 224, 224, 160) and a["img"].dtype == torch.float32
        assert torch.equal(a["img"], b["img"]) and torch.equal(a["affine"], b["affine"])
        assert np.array_equal(a["img"].numpy(), direct)
    assert 0.0 <= float(a["img"].min()) and float(a["img"].max()) <= 1.0
    assert a["spacing"].tolist() == pytest.approx([1.5, 1.5, 3.0])  # RAS axes: x, y, z
    assert dataset(replica, preset="merlin")[2]["img"].dtype == torch.bfloat16


def test_a_volume_sample_carries_its_report_sections_and_has_no_study_level(replica):
    from radharmony.errors import RadHarmonyError

    s = dataset(replica, output_report=True)[1]  # train_1_a_2: its scan's report
    assert s["indication"] == "Pleural effusion? Shortness of breath (2 days)."
    assert s["technique"].startswith("Non-contrast images were taken in the axial plane")
    assert s["findings"].startswith("Trachea and both main bronchi are open.")
    assert s["impression"] == "Scan a: Lungs are clear."
    assert (s["history"], s["comparison"]) == (None, None)
    with pytest.raises(RadHarmonyError, match="has no study level.*one_per_study=True"):
        dataset(replica, level="study")


def test_a_v1_file_rewritten_with_its_geometry_is_refused_not_rescaled_again(replica, tmp_path):
    """A v1 file already fixed (HU and the real geometry in its header, as the dataset's own
    fix-up script writes it) would get the metadata's rescale a second time: refused, named."""
    import shutil

    from radharmony.data.volumes import VolumeHeaderError

    base = tmp_path / "dataset"
    shutil.copytree(replica, base, ignore=shutil.ignore_patterns("train_fixed"))
    v2 = replica / "train_fixed/train_1/train_1_a/train_1_a_1.nii.gz"
    shutil.copy(v2, base / "train/train_1/train_1_a/train_1_a_1.nii.gz")  # the fixed file
    ds = dataset(base)
    with pytest.raises(VolumeHeaderError, match="train_1_a_1.nii.gz: the header does not hold"):
        ds[0]
    assert ds[1]["img"].dtype == torch.int16  # the untouched v1 file still reads


def test_v1_geometry_replaces_whatever_default_header_the_file_has(replica, tmp_path):
    """The metadata's geometry replaces the header's own transform, so a v1 file written with
    no transform codes at all (the Analyze base affine: x flipped, origin centred) reads as
    the same volume as its v2 file."""
    import shutil

    from radharmony.fake.volumes import write_nifti
    from radharmony.volumes.nifti import read_nifti_array

    base = tmp_path / "dataset"
    shutil.copytree(replica, base, ignore=shutil.ignore_patterns("train_fixed"))
    path = base / "train/train_1/train_1_a/train_1_a_2.nii.gz"
    _, stored = read_nifti_array(path)  # the file's (i, j, k) voxels
    write_nifti(path, np.array(stored), np.eye(4), qform=0, sform=0, slope=0.0, intercept=0.0)
    a, b = dataset(base)[1], dataset(replica)[1]
    assert torch.equal(a["img"], b["img"])
    assert a["affine"].numpy() == pytest.approx(b["affine"].numpy(), abs=1e-5)
