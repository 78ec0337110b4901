"""Resampling for presets: MONAI's and PyTorch's grids reproduced, masks never blended."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from radharmony.errors import RadHarmonyError
from radharmony.volumes.geometry import axis_codes, orient
from radharmony.volumes.resample import crop_or_pad, grid_size, resample_spacing, resize

monai = pytest.importorskip("monai")
from monai.data import MetaTensor  # noqa: E402
from monai.transforms import CenterSpatialCrop, Orientation, Resize, Spacing, SpatialPad  # noqa: E402


def test_hand_written_values():
    a = np.arange(10, dtype=np.int16).reshape(10, 1, 1)
    # MONAI Spacing: voxel 0 stays, 9 mm of extent at 1.5 mm is 7 voxels
    assert resample_spacing(a, (1, 1, 1), (1.5, 1, 1))[:, 0, 0].tolist() == \
        [0.0, 1.5, 3.0, 4.5, 6.0, 7.5, 9.0]
    # align_corners=False: sources at (i + 0.5) * 10 / 4 - 0.5
    assert resize(a, (4, 1, 1))[:, 0, 0].tolist() == [0.75, 3.25, 5.75, 8.25]
    # CT-CLIP's zoom: int(10 * 1 / 1.5) = 6 voxels
    assert resample_spacing(a, (1, 1, 1), (1.5, 1, 1), convention="zoom").shape == (6, 1, 1)
    assert crop_or_pad(np.arange(6).reshape(6, 1, 1), (3, 1, 1))[:, 0, 0].tolist() == [2, 3, 4]
    assert crop_or_pad(np.arange(6).reshape(6, 1, 1), (9, 1, 1), value=-1)[:, 0, 0].tolist() \
        == [-1, 0, 1, 2, 3, 4, 5, -1, -1]
    assert grid_size(300, 0.8, 3.0, "grid") == 81 and grid_size(11, 0.7, 1.5, "grid") == 6


@pytest.mark.parametrize("spacing,target", [((0.8, 0.7, 0.7), (3.0, 1.5, 1.5)),
                                            ((2.0, 0.9, 1.1), (0.75, 1.3, 1.0)),
                                            ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))])
def test_spacing_equals_monai_spacing(spacing, target):
    rng = np.random.default_rng(0)
    a = rng.integers(-1024, 2000, (23, 17, 19)).astype(np.int16)
    ours = resample_spacing(a, spacing, target)
    ref = Spacing(pixdim=target, mode="bilinear")(
        MetaTensor(torch.from_numpy(a[None].astype(np.float32)),
                   affine=torch.diag(torch.tensor([*spacing, 1.0], dtype=torch.float64))))
    assert ours.shape == tuple(ref.shape[1:])
    assert np.abs(ours - ref[0].numpy()).max() < 1e-2  # HU; float32 rounding only


def test_resize_equals_monai_and_torch():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(13, 20, 9)).astype(np.float32)
    ours = resize(a, (7, 31, 9))
    ref = Resize((7, 31, 9), mode="trilinear")(torch.from_numpy(a[None]))[0].numpy()
    assert np.abs(ours - ref).max() < 1e-5
    near = resize(a, (7, 31, 9), mode="nearest")
    ref = torch.nn.functional.interpolate(torch.from_numpy(a[None, None]), size=(7, 31, 9),
                                          mode="nearest")[0, 0].numpy()
    assert np.array_equal(near, ref)


def test_masks_are_never_blended():
    labels = np.random.default_rng(2).integers(0, 4, (11, 12, 13)).astype(np.uint8) * 7
    for out in (resample_spacing(labels, (1, 1, 1), (1.7, 0.6, 1.3), mode="nearest"),
                resize(labels, (5, 29, 13), mode="nearest"),
                resample_spacing(labels, (1, 1, 1), (0.6, 1.7, 1), mode="nearest",
                                 convention="zoom")):
        assert out.dtype == np.uint8 and set(np.unique(out)) <= {0, 7, 14, 21}


@pytest.mark.parametrize("shape,size", [((6, 5, 9), (3, 8, 9)), ((7, 4, 2), (10, 1, 5))])
def test_crop_or_pad_equals_monai(shape, size):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    ref = CenterSpatialCrop(size)(SpatialPad(size, value=-1)(torch.from_numpy(a[None])))[0]
    assert np.array_equal(crop_or_pad(a, size, value=-1), ref.numpy())


def test_orient_to_ras_equals_monai_orientation():
    a = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    affine = np.array([[0, 0, 0.7, -10], [0, 0.7, 0, 20], [2.0, 0, 0, -30], [0, 0, 0, 1]])
    ours, new = orient(a, affine, "RAS")
    assert axis_codes(new) == ("R", "A", "S")
    ras = np.diag([-1.0, -1, 1, 1]) @ affine  # MONAI's affines are RAS
    ref = Orientation("RAS")(MetaTensor(torch.from_numpy(a[None]), affine=torch.from_numpy(ras)))
    assert np.array_equal(ours, ref[0].numpy())
    assert np.allclose(np.diag([-1.0, -1, 1, 1]) @ new, ref.affine.numpy())


def test_bad_arguments_name_the_fix():
    with pytest.raises(RadHarmonyError, match="three positive numbers"):
        resample_spacing(np.zeros((2, 2, 2)), (1, 1, 0), (1, 1, 1))
    with pytest.raises(RadHarmonyError, match="one of L/R, P/A and S/I"):
        orient(np.zeros((2, 2, 2)), np.eye(4), "RAR")


def test_a_flipped_axis_left_unresampled_keeps_its_flip():
    """An oriented (flipped) view resampled on other axes only: the flipped axis is not
    resampled (same spacing) and must stay flipped (a preset whose source already has the
    target spacing on an axis it flips, e.g. Merlin's RAS at 1.5 mm in-plane)."""
    a = np.arange(24, dtype=np.int16).reshape(4, 3, 2)[::-1]
    assert resample_spacing(a, (1.0, 1, 1), (1.0, 1, 0.5))[:, 0, 0].tolist() == [18, 12, 6, 0]
    assert resample_spacing(a, (1.0, 1, 1), (1.0, 1, 0.5), mode="nearest")[:, 1, 0].tolist() \
        == [20, 14, 8, 2]
