"""Volume augmentations (flips, turns, rotations, crops) move the image, mask, boxes, points,
slice labels and affine together: hand-written maps, then random geometries and chains
(hypothesis): exact transforms keep boxes, points and masks exact; rotations keep a box's centre
within 0.5 voxel of its content and a mask's volume within 1 %; draws are seeded."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radharmony.augment import Compose
from radharmony.augment.volumes import (RandomCrop3D, RandomFlip3D, RandomRotate3D,
                                        RandomTurn3D, warp_volume)
from radharmony.errors import RadHarmonyError
from radharmony.volumes.placement import slice_axis, transform_boxes, transform_points


def canonical(spacing=(1.0, 1.0, 1.0)) -> np.ndarray:
    a = np.zeros((4, 4))
    a[2, 0], a[1, 1], a[0, 2] = spacing
    a[:3, 3], a[3, 3] = (-20.0, 15.0, 100.0), 1.0
    return a


def scene(shape, spacing, lo, hi):
    """A block (HU 1000, label 1) on air, an odd label 7 at its centre voxel, its box, the
    centre as a point, per-slice labels (1 where the block is), the affine; a second image
    channel holds each voxel's slice number."""
    img = torch.full((2, *shape), -1000, dtype=torch.int16)
    img[1] = torch.arange(shape[0], dtype=torch.int16)[:, None, None]
    mask = torch.zeros((1, *shape), dtype=torch.uint8)
    block = tuple(slice(a, b + 1) for a, b in zip(lo, hi))
    img[(0, *block)], mask[(0, *block)] = 1000, 1
    centre = [(a + b) // 2 for a, b in zip(lo, hi)]
    mask[(0, *centre)] = 7
    affine = canonical(spacing)
    box = np.array([[lo[2] - 0.5, lo[1] - 0.5, lo[0] - 0.5, hi[2] + 0.5, hi[1] + 0.5,
                     hi[0] + 0.5]])
    point = np.array([centre[::-1]], np.float64)
    return {"img": img, "mask": mask, "affine": torch.from_numpy(affine),
            "bbox3d": torch.from_numpy(box).float(),
            "bbox3d_mm": torch.from_numpy(transform_boxes(box, affine, world=True)),
            "bbox3d_labels": ["block"], "points": torch.from_numpy(point).float(),
            "points_mm": torch.from_numpy(transform_points(point, affine, world=True)),
            "point_labels": ["centre"],
            "slice_labels": torch.tensor([float(lo[0] <= d <= hi[0]) for d in range(shape[0])])}


def voxel_box(mask: np.ndarray) -> np.ndarray:
    found = np.nonzero(mask)
    d, h, w = ([f.min() - 0.5, f.max() + 0.5] for f in found)
    return np.array([w[0], h[0], d[0], w[1], h[1], d[1]])


# -- hand-written -------------------------------------------------------------------------------
def test_a_flip_and_a_turn_by_hand():
    s = scene((4, 5, 6), (2.0, 1.0, 1.0), (1, 1, 1), (2, 2, 3))
    flipped = RandomFlip3D(p=1.0, axis=0)(s)
    assert flipped["img"][0, :, 1, 1].tolist() == [-1000, 1000, 1000, -1000]  # 1..2 -> 2..1
    assert flipped["points"].tolist() == [[2.0, 1.0, 2.0]]                   # z 1 -> 4 - 1 - 1
    assert flipped["affine"][2].tolist() == [-2.0, 0.0, 0.0, 106.0]          # z = 106 - 2 d
    assert flipped["slice_labels"].tolist() == [0, 1, 1, 0]
    turned = RandomTurn3D(p=1.0, plane=(1, 2), generator=torch.Generator().manual_seed(0))
    seen = set()
    for _ in range(12):
        out = turned(s)
        k = _turns(s, out)                       # torch.rot90's turn in (H, W), 1 to 3 times
        seen.add(k)
        assert k in (1, 2, 3) and torch.equal(out["mask"], torch.rot90(s["mask"], k, (2, 3)))
        assert out["mask"][(0, *out["points"][0].long().flip(0).tolist())].item() == 7
        world = transform_points(out["points"].double().numpy(), out["affine"].numpy(),
                                 world=True)
        assert world.tolist() == s["points_mm"].tolist()
    assert seen == {1, 2, 3}


def _turns(before, after) -> int:
    for k in range(4):
        if torch.equal(torch.rot90(before["img"], k, (2, 3)), after["img"]):
            return k
    return -1


def test_a_crop_drops_what_falls_outside():
    s = scene((6, 6, 6), (1.0, 1.0, 1.0), (0, 0, 0), (1, 1, 1))
    out = warp_volume(s, np.array([[1, 0, 0, 3], [0, 1, 0, 3], [0, 0, 1, 3], [0, 0, 0, 1.0]]),
                      (3, 3, 3))
    assert out["bbox3d"].shape == (0, 6) and out["bbox3d_labels"] == [] and \
        out["bbox3d_mm"].shape == (0, 6)
    assert out["points"].shape == (0, 3) and out["point_labels"] == []
    assert out["slice_labels"].tolist() == [0, 0, 0]
    assert out["affine"][:3, 3].tolist() == [-17.0, 18.0, 103.0]


def test_bad_arguments_and_samples_are_refused():
    with pytest.raises(RadHarmonyError, match="unknown axis"):
        RandomFlip3D(axis="horizontal")
    with pytest.raises(RadHarmonyError, match="larger than the volume"):
        RandomCrop3D((8, 2, 2))(scene((4, 5, 6), (1, 1, 1), (1, 1, 1), (2, 2, 2)))
    with pytest.raises(RadHarmonyError, match="needs a volume sample"):
        RandomFlip3D(p=1.0)({"img": torch.zeros(1, 4, 4, 4)})


def test_draws_are_seeded_and_differ_between_calls():
    s = scene((12, 12, 12), (1.0, 1.0, 1.0), (2, 3, 4), (8, 8, 9))
    before = s["img"].clone()
    aug = Compose([RandomTurn3D(p=0.5), RandomRotate3D(p=1.0, degrees=8.0),
                   RandomCrop3D((10, 10, 10))])
    torch.manual_seed(3)
    a = [aug(s) for _ in range(3)]
    torch.manual_seed(3)
    b = [aug(s) for _ in range(3)]
    assert all(torch.equal(x["img"], y["img"]) and torch.equal(x["affine"], y["affine"])
               for x, y in zip(a, b))
    assert not torch.equal(a[0]["affine"], a[1]["affine"])
    assert torch.equal(s["img"], before)                     # the input is left as it was


def test_module_example():
    import radharmony.augment.volumes

    assert doctest.testmod(radharmony.augment.volumes).failed == 0


# -- random geometries and chains ---------------------------------------------------------------
@st.composite
def exact_chains(draw):
    shape = tuple(draw(st.integers(6, 14)) for _ in range(3))
    spacing = tuple(draw(st.sampled_from([0.7, 1.0, 1.5, 3.0])) for _ in range(3))
    lo = [draw(st.integers(0, n // 2)) for n in shape]
    hi = [draw(st.integers(a, n - 1)) for a, n in zip(lo, shape)]
    steps = draw(st.lists(st.sampled_from(["flip0", "flip1", "flip2", "turn01", "turn12",
                                           "turn02", "crop"]), min_size=1, max_size=4))
    return shape, spacing, lo, hi, steps, draw(st.integers(0, 2 ** 16))


def _chain(steps, shape):
    out, shape = [], list(shape)
    for step in steps:
        if step.startswith("flip"):
            out.append(RandomFlip3D(p=1.0, axis=int(step[-1])))
        elif step.startswith("turn"):
            out.append(RandomTurn3D(p=1.0, plane=(int(step[-2]), int(step[-1]))))
        else:
            size = tuple(max(1, min(shape) - 2) for _ in range(3))  # fits after any turn
            out.append(RandomCrop3D(size))
            shape = list(size)
    return Compose(out)


@settings(max_examples=80, deadline=None)
@given(exact_chains())
def test_flips_turns_and_crops_keep_everything_exact(chain):
    shape, spacing, lo, hi, steps, seed = chain
    s = scene(shape, spacing, lo, hi)
    torch.manual_seed(seed)
    out = _chain(steps, shape)(s)
    mask, affine = out["mask"][0].numpy(), out["affine"].numpy()
    assert (out["img"][0].numpy() == 1000).sum() == (mask > 0).sum()  # image and mask agree
    if (mask > 0).any():
        assert out["bbox3d"].tolist() == [voxel_box(mask > 0).tolist()]
        # world envelope: the source box's, cut to what is left
        assert out["bbox3d_mm"].numpy() == pytest.approx(
            transform_boxes(out["bbox3d"].double().numpy(), affine, world=True))
    else:
        assert out["bbox3d"].shape == (0, 6)
    if (mask == 7).any():
        assert out["point_labels"] == ["centre"]
        assert mask[tuple(out["points"][0].long().flip(0).tolist())] == 7
        assert transform_points(out["points"].double().numpy(), affine, world=True) == \
            pytest.approx(s["points_mm"].numpy(), abs=1e-9)
        assert out["points_mm"].tolist() == s["points_mm"].tolist()
    else:
        assert out["points"].shape == (0, 3)
    # each returned slice is one source slice, whose label it keeps (the whole slice's, even
    # where a crop cut the block out of it)
    axis = slice_axis(affine)
    source = np.moveaxis(out["img"][1].numpy(), axis, 0).reshape(mask.shape[axis], -1)
    assert (source == source[:, :1]).all()
    assert out["slice_labels"].tolist() == s["slice_labels"][source[:, 0]].tolist()
    assert out["spacing"].numpy() == pytest.approx(np.linalg.norm(affine[:3, :3], axis=0))


@st.composite
def rotations(draw):
    shape = tuple(draw(st.integers(16, 26)) for _ in range(3))
    spacing = tuple(draw(st.sampled_from([0.7, 1.0, 1.5, 2.0])) for _ in range(3))
    lo = [draw(st.integers(4, n // 3)) for n in shape]
    hi = [draw(st.integers(n // 2, n - 5)) for n in shape]
    degrees = tuple(draw(st.sampled_from([None, 5.0, 10.0])) for _ in range(3))
    return shape, spacing, lo, hi, degrees, draw(st.integers(0, 2 ** 16))


@settings(max_examples=40, deadline=None)
@given(rotations())
def test_a_rotated_box_keeps_its_centre_on_the_content(case):
    shape, spacing, lo, hi, degrees, seed = case
    s = scene(shape, spacing, lo, hi)
    out = RandomRotate3D(p=1.0, degrees=degrees, generator=torch.Generator().manual_seed(seed))(s)
    box = out["bbox3d"][0].double().numpy()
    centre = (box[:3] + box[3:]) / 2
    # the content's centre of mass (a rotated block's voxel envelope misses its sharp corners)
    for content in (out["img"][0].numpy() > 0, out["mask"][0].numpy() > 0):
        mass = np.array([f.mean() for f in np.nonzero(content)])[::-1]
        assert np.abs(mass - centre).max() <= 0.5
    assert set(np.unique(out["mask"].numpy())) <= {0, 1, 7}             # never blended
    assert transform_points(out["points"].double().numpy(), out["affine"].numpy(),
                            world=True) == pytest.approx(s["points_mm"].numpy(), abs=1e-4)
    assert out["points_mm"].tolist() == s["points_mm"].tolist()  # float32 voxels, exact mm


@settings(max_examples=4, deadline=None)
@given(st.tuples(*[st.floats(-10, 10)] * 3), st.sampled_from([(1.0, 1.0, 1.0),
                                                               (2.0, 1.0, 1.0)]))
def test_a_rotated_mask_keeps_its_volume_within_one_percent(angles, spacing):
    """An ellipsoid ~120 voxels across (nearest labelling moves each face by up to half a
    voxel: 1 % needs about that size)."""
    shape = (70, 130, 130) if spacing[0] == 2.0 else (130, 130, 130)
    centre = (np.asarray(shape) - 1) / 2
    d, h, w = np.meshgrid(*[(np.arange(n) - c) * sp for n, c, sp in zip(shape, centre, spacing)],
                          indexing="ij", sparse=True)
    inside = (d / 58.0) ** 2 + (h / 55.0) ** 2 + (w / 60.0) ** 2 <= 1
    s = {"img": torch.from_numpy(inside.astype(np.int16)[None]),
         "mask": torch.from_numpy(inside.astype(np.uint8)[None]),
         "affine": torch.from_numpy(canonical(spacing))}
    aug = RandomRotate3D(p=1.0, degrees=[(a, a) for a in angles])
    out = aug(s)
    assert out["mask"].sum().item() == pytest.approx(inside.sum(), rel=0.01)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_the_interpolating_path_equals_the_exact_one_on_exact_maps(mode):
    """The grid of a rotation (one affine_grid between normalized coordinates) sampled at a
    turn, a flip and a crop of a 5 x 6 x 7 volume gives what indexing gives."""
    from radharmony.augment.volumes import _exact, _sample, _take

    x = torch.arange(210, dtype=torch.float32).reshape(1, 5, 6, 7)
    # returned (o0, o1, o2) <- input (o2 + 1, 5 - o1, o0): a turn with a flip and a crop
    turn = np.array([[0, 0, 1, 1], [0, -1, 0, 5], [1, 0, 0, 0], [0, 0, 0, 1.0]])
    flip = np.array([[-1, 0, 0, 4], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    for t, shape in ((turn, (7, 6, 4)), (flip, (5, 6, 7))):
        exact = _take(x, _exact(t, x.shape[-3:], shape))
        assert torch.allclose(_sample(x, t, shape, mode), exact, atol=1e-3)
