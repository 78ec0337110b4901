"""RSNA 2024 Lumbar Spine: one row per stack (the axial series split by orientation, each
stack what ``read_volume(folder, stack=k)`` reads), the 25 severities as labels and grades,
and the marked points in the stack's canonical voxel coordinates -- on the very voxel the fake
marked -- with bad points counted and named, never drawn."""

import warnings

import numpy as np
import pandas as pd
import pytest

from radharmony.errors import MetadataError
from radharmony.fake.rsna_lumbar_spine import MARK, write_rsna_lumbar_spine
from radharmony.volumes import read_volume

pytest.importorskip("torch")

from radharmony.datasets.rsna_lumbar_spine import (  # noqa: E402
    GRADED, RSNALumbarSpineDataset, RSNALumbarSpineHarmonizer)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_rsna_lumbar_spine(tmp_path_factory.mktemp("lumbar"))


@pytest.fixture(scope="module")
def ds(root):
    return RSNALumbarSpineDataset(root, output_cls=True, output_grade=True)


def test_one_row_per_stack_the_axial_series_split_in_two(ds):
    df = ds.harmonized_df
    first = df[df["study_id"] == "1001"]
    assert first["image_path"].tolist() == [
        "train_images/1001/10011/1.dcm", "train_images/1001/10012/1.dcm",
        "train_images/1001/10013/1.dcm", "train_images/1001/10013/4.dcm"]
    assert first["stack"].tolist() == [0, 0, 0, 1]
    assert first["num_stacks"].tolist() == [1, 1, 2, 2]
    assert first["num_slices"].tolist() == [5, 5, 3, 3]
    assert first["instance_numbers"].tolist() == [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [1, 2, 3],
                                                  [4, 5, 6]]
    assert first["series_description"].tolist() == ["Sagittal T1", "Sagittal T2/STIR",
                                                     "Axial T2", "Axial T2"]
    assert first["stack_id"].tolist() == ["1001_10011_0", "1001_10012_0", "1001_10013_0",
                                          "1001_10013_1"]
    assert ds.rows.ids[3] == "rsna_lumbar_spine:1001_10013_1"
    assert (df["patient_id"] == df["study_id"]).all() and len(df) == 8


def test_each_stack_is_the_readers_stack_in_its_stored_type(ds, root):
    for i, (shape, stack) in {2: ((1, 3, 16, 12), 0), 3: ((1, 3, 16, 12), 1),
                              1: ((1, 16, 12, 5), 0)}.items():   # sagittal: D = the rows
        sample = ds[i]
        folder = root / ds.harmonized_df["image_path"].iat[i].rsplit("/", 1)[0]
        assert tuple(sample["img"].shape) == shape and str(sample["img"].dtype) == "torch.uint16"
        expected = read_volume(folder, stack=stack).array
        assert np.array_equal(sample["img"][0].numpy(), expected)
    assert ds.read_params(3)["stack"] == 1 and ds.job(3).inputs[0].endswith("/1001/10013")


def test_severities_are_labels_and_grades_the_empty_cell_unknown(ds):
    row = ds.harmonized_df.iloc[0]          # study 1001: Normal/Mild, Moderate, Severe, ...
    assert [row[c] for c in GRADED[:4]] == [0.0, 1.0, 1.0, 0.0]
    grades = [row[f"{c}_grade"] for c in GRADED[:4]]
    assert np.isnan(grades[0]) and grades[1:3] == [3.0, 4.0] and np.isnan(grades[3])
    last = GRADED[-1]                       # right_subarticular_stenosis_l5_s1, empty
    assert np.isnan(row[last]) and np.isnan(row[f"{last}_grade"])
    assert row["severity_raw"][GRADED[1]] == "Moderate" and row["severity_raw"][last] is None
    sample = ds[0]
    assert sample["grade"][:3].tolist()[1:] == [3.0, 4.0] and sample["grade_mask"][0] == 0
    study2 = ds.harmonized_df.iloc[4]       # study 1002 starts one word later: Moderate
    assert study2[GRADED[0]] == 1.0 and study2[f"{GRADED[0]}_grade"] == 3.0


def test_points_land_on_the_voxels_the_fake_marked(ds):
    """Hand-worked: the sagittal T2's instance 4 is slice 1 along the normal (its instance
    numbers run against it), so (x 5, y 3) -> W = 5 - 1 - 1 = 3 (toward L), H = 5 (the columns
    run toward P), D = 15 - 3 = 12 (the rows run down); the axial's second stack holds
    instances 4-6 in order: instance 5 at (4, 6) -> (4, 6, 1); the sagittal T1's instance 1 is
    its last slice: (0, 15) -> (0, 0, 0)."""
    expected = {1: ([3.0, 5.0, 12.0], "spinal_canal_stenosis_l1_l2"),
                3: ([4.0, 6.0, 1.0], "left_subarticular_stenosis_l4_l5"),
                0: ([0.0, 0.0, 0.0], "right_neural_foraminal_narrowing_l5_s1")}
    for i, (point, label) in expected.items():
        ann = ds.annotations(i)
        assert ann["points"].dtype == np.float64 and ann["points"].tolist() == [point]
        assert ann["point_labels"] == [label]
        x, y, z = (int(v) for v in point)
        volume = ds.read_volume(i).array
        assert volume[z, y, x] == MARK and (volume == MARK).sum() == 1
    assert ds.annotations(2) == {}            # the axial's first stack has no point


def test_a_point_on_a_missing_instance_or_outside_its_image_is_named_never_drawn(tmp_path):
    root = write_rsna_lumbar_spine(tmp_path, bad_points=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = RSNALumbarSpineHarmonizer(base_image_dir=root).harmonize()
    text = [str(w.message) for w in caught]
    assert any("train_label_coordinates.csv: 1 point(s) on an instance number its series "
               "does not have, not drawn: line(s) 5 (first: study 1001, series 10012, "
               "instance 99" in t for t in text), text
    assert any("train_label_coordinates.csv: 1 point(s) outside their image" in t
               and "line(s) 6 " in t and "x 40.0" in t for t in text), text
    drawn = [p for ps in df["points_raw"] for p in ps]
    assert len(drawn) == 6 and not any(p[0] == 99 or p[1] == 40.0 for p in drawn)


def test_a_severity_word_the_release_does_not_use_is_named(tmp_path):
    root = write_rsna_lumbar_spine(tmp_path, n_studies=1)
    train = pd.read_csv(root / "train.csv", dtype=str)
    train.loc[0, GRADED[2]] = "Mild"
    train.to_csv(root / "train.csv", index=False)
    with pytest.raises(MetadataError, match=r"row 0: spinal_canal_stenosis_l3_l4 is not a "
                                            r"severity.*Normal/Mild, Moderate, Severe or empty"):
        RSNALumbarSpineHarmonizer(base_image_dir=root).harmonize()


def test_studies_without_images_and_series_without_geometry_are_counted(tmp_path):
    import pydicom

    root = write_rsna_lumbar_spine(tmp_path)
    path = root / "train_images/1002/10021/3.dcm"      # a file without its orientation
    ds = pydicom.dcmread(path)
    del ds.ImageOrientationPatient
    ds.save_as(path, enforce_file_format=True)
    train = pd.read_csv(root / "train.csv", dtype=str)
    pd.concat([train, train.iloc[[0]].assign(study_id="1003")]).to_csv(root / "train.csv",
                                                                       index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = RSNALumbarSpineHarmonizer(base_image_dir=root).harmonize()
    text = " | ".join(str(w.message) for w in caught)
    assert "1 series left out, their files not splitting into stacks (first: 1002/10021: " \
        in text and "3.dcm: no usable ImageOrientationPatient" in text
    assert "1 of 3 studies have no series under train_images/ (first: 1003)" in text
    assert "1002_10021_0" not in set(df["stack_id"]) and len(df) == 7


def test_two_stacks_of_one_series_are_two_cache_entries(root, tmp_path):
    cached = RSNALumbarSpineDataset(root, cache_dir=tmp_path / "cache")
    keys = cached.pre_cache(progress=False)
    assert keys == cached.cache_keys() and len(set(keys)) == 8
    assert keys[2] != keys[3]                  # the axial series' two stacks
    for i in (2, 3):
        assert np.array_equal(cached[i]["img"].numpy(), cached.read_volume(i).array[None])


def test_stack_points_leaves_out_another_instance_and_beyond_the_volume():
    """An axial stack (slices toward S, rows P, columns L: already canonical): (x, y) on
    instance 2 is voxel (x, y, 1); instance 9 is not in the stack, x 50 beyond its 4 columns."""
    from radharmony.datasets.rsna_lumbar_spine import stack_points

    axial = np.array([[0, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]], dtype=float)
    points, labels, left = stack_points(
        [[9, 1.0, 1.0, "a"], [1, 50.0, 1.0, "b"], [2, 3.0, 0.5, "c"], [1, 3.5, -0.5, "d"]],
        [1, 2], axial, (2, 4, 4))
    assert points.tolist() == [[3.0, 0.5, 1.0], [3.5, -0.5, 0.0]] and labels == ["c", "d"]
    assert left == [[9, 1.0, 1.0, "a"], [1, 50.0, 1.0, "b"]]


def test_output_points_puts_them_on_the_returned_volume_and_in_world_mm(root):
    """Through the volume dataset's placement: as read, the points are the hook's voxels; with
    a preset, the same world millimetres (the marked voxel's centre) on the preset's grid."""
    plain = RSNALumbarSpineDataset(root, output_points=True)[1]
    assert plain["points"].tolist() == [[3.0, 5.0, 12.0]]
    assert plain["point_labels"] == ["spinal_canal_stenosis_l1_l2"]
    world = plain["affine"].numpy() @ np.array([12.0, 5.0, 3.0, 1.0])   # (d, h, w) of it
    assert np.allclose(plain["points_mm"].numpy(), [world[:3]])
    merlin = RSNALumbarSpineDataset(root, output_points=True, preset="merlin")[1]
    assert np.allclose(merlin["points_mm"].numpy(), [world[:3]])
    x, y, z = merlin["points"][0].tolist()
    back = merlin["affine"].numpy() @ np.array([z, y, x, 1.0])
    assert np.allclose(back[:3], world[:3], atol=1e-4)
