"""TotalSegmentator v2: meta.csv as shipped (semicolons, BOM, val), the 117 masks merged into one
label map on the volume's grid (names in order, overlaps, refused on another grid), and the
label map carried through a preset by the nearest label."""

import numpy as np
import pytest

from radharmony.datasets.totalsegmentator import STRUCTURES, TotalSegmentatorHarmonizer
from radharmony.errors import MetadataError
from radharmony.fake.totalsegmentator import (file_affine, file_order, structure_boxes,
                                              write_totalsegmentator)
from radharmony.fake.volumes import write_nifti

META = ("\ufeffimage_id;age;gender;institute;study_type;split;manufacturer;scanner_model;kvp;"
        "pathology;pathology_location\n"
        "s0007;63;f;A;ct thorax;train;Siemens;SOMATOM Force;100;tumor;liver\n"
        "s1402;71;m;B;ct abdomen;val;GE;Revolution;120;no_pathology;\n"
        "s0100;55;m;A;ct neck;test;Siemens;SOMATOM Force;;;\n")


def test_meta_csv_as_shipped(tmp_path):
    (tmp_path / "meta.csv").write_text(META, encoding="utf-8")
    df = TotalSegmentatorHarmonizer(base_image_dir=tmp_path).harmonize()
    assert df["patient_id"].tolist() == ["s0007", "s1402", "s0100"]
    assert df["image_path"].tolist() == ["s0007/ct.nii.gz", "s1402/ct.nii.gz",
                                         "s0100/ct.nii.gz"]
    assert df["mask_dir"].tolist()[1] == "s1402/segmentations"
    assert df["split"].tolist() == ["train", "valid", "test"]
    assert df["split_raw"].tolist() == ["train", "val", "test"]
    assert df["pathology_location"].tolist()[0] == "liver"
    assert df["age"].tolist() == ["63", "71", "55"] and df["gender"].tolist() == ["f", "m", "m"]
    (tmp_path / "meta.csv").write_text(META.replace(";val;", ";validation;"),
                                       encoding="utf-8")
    with pytest.raises(MetadataError, match="split"):
        TotalSegmentatorHarmonizer(base_image_dir=tmp_path).harmonize()


def test_structures_in_the_release_order():
    assert len(STRUCTURES) == 117 and len(set(STRUCTURES)) == 117
    assert STRUCTURES[:2] == ("spleen", "kidney_right") and STRUCTURES[4] == "liver"
    assert STRUCTURES.index("heart") + 1 == 51 and STRUCTURES[-1] == "costal_cartilages"


def expected_label_map(shape=(8, 12, 12)) -> np.ndarray:
    out = np.zeros(shape, np.uint8)
    for name, box in structure_boxes(shape).items():   # liver, heart, aorta: in label order
        out[box] = STRUCTURES.index(name) + 1
    return out


def dataset(base, **kwargs):
    from radharmony.datasets.totalsegmentator import TotalSegmentatorDataset
    return TotalSegmentatorDataset(base_image_dir=base, output_mask=True, **kwargs)


def test_mask_is_the_merged_label_map_on_the_volume_grid(tmp_path):
    base = write_totalsegmentator(tmp_path, splits=("train",))
    sample = dataset(base)[0]
    mask = sample["mask"][0].numpy()
    assert mask.shape == sample["img"].shape[1:]
    assert np.array_equal(mask, expected_label_map())   # aorta (52) over heart (51)
    assert set(np.unique(mask)) == {0, 5, 51, 52}


def test_a_mask_on_another_grid_is_refused_naming_both_files(tmp_path):
    from radharmony.volumes.masks import MaskGeometryError

    base = write_totalsegmentator(tmp_path, splits=("train",))
    liver = base / "s0000" / "segmentations" / "liver.nii.gz"
    mask = np.zeros((8, 12, 12), np.uint8)
    mask[structure_boxes((8, 12, 12))["liver"]] = 1
    shifted = file_affine().copy()
    shifted[0, 3] += 1e-4                                 # within 1e-3 mm: the same grid
    write_nifti(liver, file_order(mask), shifted, dtype=np.uint8)
    assert np.array_equal(dataset(base)[0]["mask"][0].numpy(), expected_label_map())
    shifted[0, 3] += 0.01
    write_nifti(liver, file_order(mask), shifted, dtype=np.uint8)
    with pytest.raises(MaskGeometryError) as err:
        dataset(base)[0]
    assert "liver.nii.gz" in str(err.value) and "ct.nii.gz" in str(err.value)
    write_nifti(liver, file_order(mask[:, :, :10]), file_affine(), dtype=np.uint8)
    with pytest.raises(MaskGeometryError, match="shape"):
        dataset(base)[0]


def test_mask_through_a_preset_keeps_labels_and_positions(tmp_path):
    base = write_totalsegmentator(tmp_path, splits=("train",))
    native = dataset(base)[0]
    sample = dataset(base, preset="merlin")[0]
    mask, img = sample["mask"][0].numpy(), sample["img"]
    assert mask.shape == img.shape[1:] and mask.dtype == np.uint8
    assert set(np.unique(mask)) == {0, 5, 51, 52}            # labels, never blended

    def centre(m, affine, label, layout_hwd=False):
        idx = np.argwhere(m == label).astype(np.float64)
        if layout_hwd:                                        # (H, W, D) -> (D, H, W)
            idx = idx[:, [2, 0, 1]]
        return (affine[:3, :3] @ idx.mean(axis=0)) + affine[:3, 3]

    from radharmony.volumes.presets import get_preset
    hwd = get_preset("merlin").layout == "CHWD"
    src = centre(native["mask"][0].numpy(), native["affine"].numpy(), 5)
    out = centre(mask, sample["affine"].numpy(), 5, hwd)
    spacing = sample["spacing"].numpy()
    assert np.all(np.abs(src - out) <= spacing + 1e-6)      # within a voxel of the output
