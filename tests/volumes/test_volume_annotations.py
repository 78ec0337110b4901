"""A volume dataset's ``bbox3d`` and ``points`` from its ``annotations`` hook (source voxels),
on the volume as read and through a preset, with their world coordinates written out by hand;
bad input dropped, counted and named; a batch of them collated."""

from __future__ import annotations

import dataclasses
import doctest

import numpy as np
import pytest
import torch

from radharmony.fake.totalsegmentator import write_totalsegmentator
from radharmony.volumes.placement import AnnotationWarning

# source voxels (x along W, y along H, z along D) of the replica's canonical 8 x 12 x 12 grid:
# 1.5 mm, world x = 1.5 * x - 16.5, y = 1.5 * y - 16.5, z = 1.5 * z (LPS)
BOX = [1.5, 2.5, 0.5, 4.5, 6.5, 2.5]
BOX_MM = [-14.25, -12.75, 0.75, -9.75, -6.75, 3.75]
POINT = [3.0, 4.0, 1.0]
POINT_MM = [-12.0, -10.5, 1.5]


def annotated(base, *, points=((3.0, 4.0, 1.0),), mask_shape=None, **kwargs):
    """The TotalSegmentator replica with hand-written annotations (a test dataset class)."""
    from radharmony.datasets.totalsegmentator import TotalSegmentatorDataset

    class Annotated(TotalSegmentatorDataset):
        spec = dataclasses.replace(TotalSegmentatorDataset.spec,
                                   outputs=frozenset({"mask", "bbox3d", "points"}))

        def annotations(self, index):
            return {"boxes": np.array([BOX]), "box_labels": ["lung_nodule"],
                    "points": np.array(points, np.float64).reshape(-1, 3),
                    "point_labels": [f"p{k}" for k in range(len(points))]}

        def source_mask(self, index):
            mask = super().source_mask(index)
            return mask if mask_shape is None else np.ones(mask_shape, mask.dtype)

    return Annotated(base_image_dir=base, output_mask=True, output_bbox3d=True,
                     output_points=True, **kwargs)


def test_as_read_the_boxes_are_the_source_voxels(tmp_path):
    base = write_totalsegmentator(tmp_path, splits=("train",))
    sample = annotated(base)[0]
    assert sample["bbox3d"].tolist() == [BOX] and sample["bbox3d"].dtype == torch.float32
    assert sample["bbox3d_mm"].tolist() == [BOX_MM] and sample["bbox3d_mm"].dtype == \
        torch.float64
    assert sample["points"].tolist() == [POINT] and sample["points_mm"].tolist() == [POINT_MM]
    assert sample["bbox3d_labels"] == ["lung_nodule"] and sample["point_labels"] == ["p0"]


def test_through_merlin_the_boxes_follow_the_geometry(tmp_path):
    """Merlin: RAS, 1.5 x 1.5 x 3 mm, 224 x 224 x 160: output index (i, j, k) is world
    (-1.5 i + 159, -1.5 j + 159, 3 k - 231); returned x runs along k, y along j, z along i."""
    base = write_totalsegmentator(tmp_path, splits=("train",))
    sample = annotated(base, preset="merlin")[0]
    assert sample["affine"].tolist()[0] == [-1.5, 0.0, 0.0, 159.0]
    # x: world z 0.75..3.75 -> k 77.25..78.25; y: world y -12.75..-6.75 -> j 114.5..110.5;
    # z: world x -14.25..-9.75 -> i 115.5..112.5
    assert sample["bbox3d"].tolist() == [[77.25, 110.5, 112.5, 78.25, 114.5, 115.5]]
    assert sample["bbox3d_mm"].tolist() == [pytest.approx(BOX_MM)]
    assert sample["points"].tolist() == [[77.5, 113.0, 114.0]]
    assert sample["points_mm"].tolist() == [POINT_MM]
    mask = sample["mask"][0]           # the point's voxel k = 78 is source voxel (2, 4, 3): liver
    assert mask.shape == sample["img"].shape[1:] and mask[114, 113, 78].item() == 5


def test_bad_input_is_dropped_counted_and_named(tmp_path):
    base = write_totalsegmentator(tmp_path, splits=("train",))
    ds = annotated(base, points=((3.0, 4.0, 1.0), (12.0, 0.0, 0.0)), mask_shape=(8, 12, 11))
    with pytest.warns(AnnotationWarning) as caught:
        sample = ds[0]
    message = str(caught[0].message)
    assert "row 0" in message and "totalsegmentator:s0000" in message
    assert "ct.nii.gz" in message and "1 point outside the volume" in message
    assert "1 mask of another shape" in message
    assert sample["point_labels"] == ["p0"] and sample["points"].tolist() == [POINT]
    assert not sample["mask"].any()                           # never drawn in the wrong place
    assert ds.annotation_faults == {"point outside the volume": 1, "mask of another shape": 1}


def test_a_batch_keeps_boxes_and_points_per_sample(tmp_path):
    from radharmony import collate
    from radharmony.data.collate import pad_boxes

    base = write_totalsegmentator(tmp_path, splits=("train", "train"))
    ds = annotated(base)
    batch = collate([ds[0], ds[1]])
    assert isinstance(batch["bbox3d"], list) and batch["bbox3d"][1].tolist() == [BOX]
    assert batch["point_labels"] == [["p0"], ["p0"]]
    padded, valid = pad_boxes(batch["bbox3d"] + [torch.zeros(0, 6)])
    assert padded.shape == (3, 1, 6) and valid.tolist() == [[True], [True], [False]]
    assert pad_boxes(batch["points_mm"])[0].dtype == torch.float64


def test_module_examples():
    import radharmony.data.collate
    import radharmony.volumes.placement

    for module in (radharmony.volumes.placement, radharmony.data.collate):
        assert doctest.testmod(module).failed == 0


def test_augmentation_after_the_cache_moves_everything_together(tmp_path):
    """A left-right flip (W, 12 voxels) as the train transform, over the volume cache: x -> 11 -
    x, the world box and point unchanged, the affine following the voxels."""
    from radharmony.augment.volumes import RandomFlip3D

    base = write_totalsegmentator(tmp_path, splits=("train",))
    ds = annotated(base, cache_dir=tmp_path / "cache")
    plain = ds[0]
    flipped = ds.get_datasets(train_transform=RandomFlip3D(p=1.0, axis=2))[0]
    assert flipped["bbox3d"].tolist() == [[6.5, 2.5, 0.5, 9.5, 6.5, 2.5]]
    assert flipped["bbox3d_mm"].tolist() == [BOX_MM] and flipped["points"].tolist() == \
        [[8.0, 4.0, 1.0]]
    assert flipped["points_mm"].tolist() == [POINT_MM]
    assert torch.equal(flipped["img"], plain["img"].flip(-1))
    assert torch.equal(flipped["mask"], plain["mask"].flip(-1))
    assert flipped["affine"][0].tolist() == [0.0, 0.0, -1.5, 0.0]   # x = 1.5 (11 - w) - 16.5
    assert torch.equal(ds[0]["img"], plain["img"])                  # the cache is unaugmented


def test_radfm_layout_keeps_boxes_in_the_affine_axes(tmp_path):
    """RadFM's layout (3, H, W, D; here in-plane 48 for speed, RadFM's is 512): the mask
    follows it; boxes and points stay x along the affine's W, z along its D."""
    from radharmony.volumes.presets import PRESETS

    base = write_totalsegmentator(tmp_path, splits=("train",))
    small = dataclasses.replace(PRESETS["radfm"], name="radfm_48", size=(0, 48, 48))
    sample = annotated(base, preset=small)[0]
    assert sample["img"].shape == (3, 48, 48, 8) and sample["mask"].shape == (1, 48, 48, 8)
    x, y, z = sample["points"][0].tolist()
    assert sample["points_mm"].tolist() == [POINT_MM]
    assert z == 1.0 and x == pytest.approx(3 * 4 + 1.5)             # 12 -> 48: 4 voxels each
    assert sample["mask"][0, round(y), round(x), round(z)].item() == 5      # the liver


def test_under_a_user_transform_annotations_stay_on_the_source_voxels(tmp_path):
    """A user transform receives the volume's path and reads it its own way: the boxes and
    points are handed over as the dataset gives them (source voxels), without mm."""
    base = write_totalsegmentator(tmp_path, splits=("train",))

    def transform(sample):
        return {**sample, "img": torch.zeros(1, 2, 2, 2)}

    sample = annotated(base, transform=transform, cache_dir=None)[0]
    assert sample["bbox3d"].tolist() == [BOX] and sample["points"].tolist() == [POINT]
    assert "bbox3d_mm" not in sample and "points_mm" not in sample
    assert sample["bbox3d_labels"] == ["lung_nodule"]
