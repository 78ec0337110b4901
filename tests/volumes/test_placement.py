"""Annotations carried from the source volume's voxels onto a returned one by geometry alone:
hand-written cases, file voxels through every canonicalisation (the 48 signed axis orders),
then random geometries (hypothesis) through every kind of preset step
(reorientation, resampling by spacing or size, foreground crop, crop and pad): a box's centre
within 0.5 voxel of its content, a mask's volume within 1 %, points exact, masks never
blended."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from radharmony.volumes import Volume
from radharmony.volumes.placement import (VolumeGrid, carry_slices, clip_boxes, points_inside,
                                          slice_axis, transform_boxes, transform_points,
                                          world_boxes_to_voxels, world_to_voxels)
from radharmony.volumes.presets import Preset

from volume_oracles import ORDERS, order_affine


def canonical(spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0)) -> np.ndarray:
    """The LPS affine of a canonical (S, P, L) grid of ``spacing`` ``(d, h, w)`` mm."""
    a = np.zeros((4, 4))
    a[2, 0], a[1, 1], a[0, 2] = spacing
    a[:3, 3], a[3, 3] = origin, 1.0
    return a


# -- hand-written -------------------------------------------------------------------------------
def test_points_and_boxes_through_a_resampled_grid():
    """Source 2 x 1 x 1 mm, returned 1 x 0.5 x 1 mm with its first voxel 1 mm further S: a
    point at source (x, y, z) = (3, 4, 1) is world (3, 4, 2), returned (3, 8, 1)."""
    grid = VolumeGrid(canonical((2.0, 1.0, 1.0)), (6, 10, 10),
                      canonical((1.0, 0.5, 1.0), origin=(0.0, 0.0, 1.0)), (10, 20, 10))
    assert grid.points(np.array([[3.0, 4.0, 1.0]])).tolist() == [[3.0, 8.0, 1.0]]
    placed = grid.place({"boxes": np.array([[1.5, 2.5, 0.5, 4.5, 6.5, 2.5]]),
                         "box_labels": ["nodule"], "points": np.array([[3.0, 4.0, 1.0]]),
                         "point_labels": ["centre"]})
    # x 1.5..4.5 (1 mm both), y 2.5..6.5 -> 5..13, z 0.5..2.5 (2 mm) -> world 1..5 -> 0..4
    assert placed.boxes.tolist() == [[1.5, 5.0, 0.0, 4.5, 13.0, 4.0]]
    assert placed.boxes_mm.tolist() == [[1.5, 2.5, 1.0, 4.5, 6.5, 5.0]]
    assert placed.points_mm.tolist() == [[3.0, 4.0, 2.0]]
    assert placed.box_labels == ["nodule"] and placed.point_labels == ["centre"]
    assert grid.faults == {}


def test_flipped_and_turned_grids_map_exactly():
    """An RAS-ordered output (axis 0 toward R, 1 toward A, 2 toward S) of a 4 x 5 x 6
    canonical volume: source voxel (d, h, w) is output (5 - w, 4 - h, d)."""
    src = canonical()
    out = np.array([[-1.0, 0, 0, 5], [0, -1, 0, 4], [0, 0, 1, 0], [0, 0, 0, 1]])
    grid = VolumeGrid(src, (4, 5, 6), out, (6, 5, 4))
    # point (x=w, y=h, z=d) = (1, 2, 3) -> output (d0, d1, d2) = (4, 2, 3): x = 3, y = 2, z = 4
    assert grid.points(np.array([[1.0, 2.0, 3.0]])).tolist() == [[3.0, 2.0, 4.0]]
    box = transform_boxes(np.array([[0.5, 1.5, 2.5, 1.5, 2.5, 3.5]]), grid.to_output)
    assert box.tolist() == [[2.5, 1.5, 3.5, 3.5, 2.5, 4.5]]
    assert slice_axis(out) == 2 and slice_axis(src) == 0


def test_bad_input_is_dropped_and_counted():
    grid = VolumeGrid.same(canonical(), (4, 5, 6))
    placed = grid.place({"boxes": np.array([[0.0, 0, 0, 2, 2, 2], [7.0, 0, 0, 9, 2, 2],
                                            [2.0, 2, 2, 1, 3, 3]]),
                         "box_labels": ["a", "outside", "swapped"],
                         "points": np.array([[5.5, 4.5, 3.5], [5.6, 0, 0], [-0.5, -0.5, -0.5]]),
                         "point_labels": ["far corner", "outside", "near corner"]})
    assert placed.box_labels == ["a"] and placed.point_labels == ["far corner", "near corner"]
    assert grid.faults == {"box outside the volume": 1, "box with swapped ends": 1,
                           "point outside the volume": 1}
    mask = grid.mask(np.ones((4, 5, 5), np.uint8))       # another shape: nothing drawn
    assert mask.shape == (4, 5, 6) and not mask.any()
    assert grid.faults["mask of another shape"] == 1


def test_boxes_clip_to_a_crop_and_drop_when_nothing_is_left():
    boxes, keep = clip_boxes(np.array([[-3.0, 1, 1, 2, 2, 2], [6.0, 1, 1, 8, 2, 2]]), (4, 5, 6))
    assert boxes[0].tolist() == [-0.5, 1, 1, 2, 2, 2] and keep.tolist() == [True, False]


def test_slice_labels_resampled_cropped_and_padded():
    """Source slices 2 mm, returned 1 mm starting 1 mm below the first slice: returned
    slice k sits at source position (k - 1) / 2."""
    to_source = np.linalg.inv(canonical((2.0, 1, 1))) @ canonical((1.0, 1, 1), (0, 0, -1.0))
    out = carry_slices(np.array([0, 1, 1], np.float32), to_source, (7, 1, 1), 0, 0)
    assert out.tolist()[1:-1] == [0, 1, 1, 1, 1]    # 0.5 and 1.5: ties to the later slice
    assert np.isnan(out[[0, -1]]).all()             # -0.5 and 2.5: on the outer faces
    crop = np.linalg.inv(canonical()) @ canonical(origin=(0, 0, 1.0))   # first slice dropped
    assert carry_slices(np.array([0, 1, 0], np.float32), crop, (2, 1, 1), 0, 0).tolist() == \
        [1, 0]


# -- random geometries through presets ----------------------------------------------------------
ORIENTATIONS = ("SPL", "RAS", "IPL", "LAI", "PSR")


@st.composite
def scenes(draw):
    shape = tuple(draw(st.integers(14, 26)) for _ in range(3))
    spacing = tuple(draw(st.sampled_from([0.7, 1.0, 1.25, 1.6, 2.0])) for _ in range(3))
    origin = tuple(draw(st.floats(-200, 200, allow_nan=False)) for _ in range(3))
    fit = draw(st.sampled_from(["crop_or_pad", "resize", "longest"]))
    size = tuple(draw(st.integers(16, 36)) for _ in range(3))
    if fit == "crop_or_pad":
        target = tuple(draw(st.sampled_from([0.8, 1.0, 1.5, 2.0])) for _ in range(3))
        preset = Preset("random", orientation=draw(st.sampled_from(ORIENTATIONS)),
                        spacing=target, convention=draw(st.sampled_from(["grid", "zoom"])),
                        size=size)
    else:
        preset = Preset("random", orientation=draw(st.sampled_from(ORIENTATIONS)), size=size,
                        fit=fit, window="minmax", foreground=draw(st.booleans()))
    # a solid block (label 1, HU 1000) and an ellipsoid (label 2, HU 500) on air
    lo = [draw(st.integers(1, n // 3)) for n in shape]
    hi = [draw(st.integers(n // 2, n - 2)) for n in shape]
    return shape, spacing, origin, preset, lo, hi


def _scene_volume(shape, spacing, origin, lo, hi):
    hu = np.full(shape, -1000, np.int16)
    labels = np.zeros(shape, np.uint8)
    block = tuple(slice(a, b + 1) for a, b in zip(lo, hi))
    hu[block], labels[block] = 1000, 1
    return Volume.from_array(hu, canonical(spacing, origin)), labels


def _through(preset, volume):
    """The preset's output (HU) and its grid."""
    array, info = preset.geometry(volume)
    return array, VolumeGrid(np.asarray(info["source_affine"]), tuple(info["source_shape"]),
                             np.asarray(info["affine"]), array.shape)


def _inside(box, shape) -> bool:
    return bool(np.all(box[:3] >= -0.5) and np.all(box[3:] <= np.array(shape[::-1]) - 0.5))


def _voxel_box(mask: np.ndarray) -> np.ndarray:
    """The (x0, y0, z0, x1, y1, z1) envelope of a mask's voxels (faces at +-0.5)."""
    found = np.nonzero(mask)
    d, h, w = ([f.min() - 0.5, f.max() + 0.5] for f in found)
    return np.array([w[0], h[0], d[0], w[1], h[1], d[1]])


@settings(max_examples=60, deadline=None)
@given(scenes())
def test_a_box_follows_its_content_through_any_preset(scene):
    shape, spacing, origin, preset, lo, hi = scene
    volume, labels = _scene_volume(shape, spacing, origin, lo, hi)
    array, grid = _through(preset, volume)
    box = np.array([[lo[2] - 0.5, lo[1] - 0.5, lo[0] - 0.5, hi[2] + 0.5, hi[1] + 0.5,
                     hi[0] + 0.5]])
    placed = grid.place({"boxes": box, "box_labels": ["block"]})
    assume(_inside(transform_boxes(box, grid.to_output)[0], array.shape))  # not cropped
    assert placed.box_labels == ["block"]
    centre = (placed.boxes[0, :3] + placed.boxes[0, 3:]) / 2
    for content in (array > 0, grid.mask(labels) == 1):   # the image (linear), the mask
        seen = _voxel_box(content)
        assert np.abs((seen[:3] + seen[3:]) / 2 - centre).max() <= 0.5 + 1e-6
    # the world box is the source box's, whatever the preset did
    assert placed.boxes_mm[0] == pytest.approx(transform_boxes(box, volume.affine,
                                                               world=True)[0], abs=1e-6)


@st.composite
def ellipsoids(draw):
    """A coarse source (1.6 - 3 mm) holding an ellipsoid, returned at ~130 voxels across it
    (resampled to a spacing, either convention, or resized): nearest labelling moves each
    face by up to half a returned voxel, so a mask keeps its volume within 1 % from about
    that size on (measured: the worst of 30 such geometries was 0.84 %)."""
    shape = tuple(draw(st.integers(30, 44)) for _ in range(3))
    spacing = tuple(draw(st.sampled_from([1.6, 2.0, 2.5, 3.0])) for _ in range(3))
    radii = [0.4 * n * s * draw(st.floats(0.8, 1.0)) for n, s in zip(shape, spacing)]
    if draw(st.booleans()):
        target = tuple(2 * r / draw(st.floats(120, 140)) for r in radii)
        size = tuple(int(n * s / t) + 4 for n, s, t in zip(shape, spacing, target))
        preset = Preset("fine", spacing=target, size=size,
                        convention=draw(st.sampled_from(["grid", "zoom"])))
    else:
        preset = Preset("resized", size=tuple(draw(st.integers(150, 170)) for _ in range(3)),
                        fit="resize", window="minmax")
    return shape, spacing, radii, preset


@settings(max_examples=8, deadline=None)
@given(ellipsoids())
def test_a_mask_keeps_its_volume_within_one_percent(scene):
    shape, spacing, radii, preset = scene
    centre = (np.asarray(shape) - 1) / 2
    z, y, x = np.meshgrid(*[(np.arange(n) - c) * s for n, c, s in zip(shape, centre, spacing)],
                          indexing="ij")
    inside = (z / radii[0]) ** 2 + (y / radii[1]) ** 2 + (x / radii[2]) ** 2 <= 1
    volume = Volume.from_array(np.where(inside, 500, -1000).astype(np.int16), canonical(spacing))
    _, grid = _through(preset, volume)
    out = grid.mask(inside.astype(np.uint8))
    source_mm3, out_mm3 = (np.abs(np.linalg.det(a[:3, :3])) for a in (grid.source_affine,
                                                                        grid.affine))
    assert out.sum() * out_mm3 == pytest.approx(inside.sum() * source_mm3, rel=0.01)


@settings(max_examples=60, deadline=None)
@given(scenes())
@example(((18, 14, 14), (2.0, 0.7, 0.7), (0.0, 0.0, 0.0),
          Preset("random", orientation="SPL", spacing=(0.8, 0.8, 0.8), convention="zoom",
                 size=(16, 16, 16)), [1, 1, 1], [9, 7, 7]))  # the centre point cropped away
def test_masks_are_never_blended_and_points_are_exact(scene):
    shape, spacing, origin, preset, lo, hi = scene
    volume, labels = _scene_volume(shape, spacing, origin, lo, hi)
    centre = tuple((np.asarray(lo) + np.asarray(hi)) // 2)
    labels[centre] = 7                                  # one odd voxel inside the block
    array, grid = _through(preset, volume)
    out = grid.mask(labels)
    assert set(np.unique(out)) <= {0, 1, 7} and out.dtype == labels.dtype
    point = np.array([centre[::-1]], np.float64)
    placed = grid.place({"points": point, "point_labels": ["centre"]})
    world = transform_points(point, grid.source_affine, world=True)
    if len(placed.points):                              # not cropped away
        assert placed.points_mm == pytest.approx(world, abs=1e-12)
        assert transform_points(placed.points, grid.affine, world=True) == \
            pytest.approx(world, abs=1e-9)
        near = tuple(np.floor(placed.points[0, ::-1] + 0.5).astype(int))
        assert out[near] in (1, 7)
    else:  # dropped with its world row (they travel in step), and truly outside
        assert placed.points_mm.shape == (0, 3)
        assert not points_inside(grid.points(point), array.shape).any()


# -- through every canonicalisation -------------------------------------------------------------
@settings(max_examples=96, deadline=None)
@given(st.sampled_from(ORDERS), st.tuples(*[st.integers(2, 7)] * 3), st.data())
def test_file_voxels_reach_the_canonical_voxel_holding_them(order, shape, data):
    """Any of the 48 signed axis orders a file may store: a voxel (and a box of voxels) given
    in the file's own index goes through its affine to mm, then to the canonical grid's voxels,
    exactly onto the canonical voxel(s) holding the same values."""
    from radharmony.volumes.geometry import to_canonical

    affine = order_affine(*order)
    array = np.arange(np.prod(shape)).reshape(shape)
    canon, canon_affine = to_canonical(array, affine)
    lo = [data.draw(st.integers(0, n - 1)) for n in shape]
    hi = [data.draw(st.integers(a, n - 1)) for a, n in zip(lo, shape)]
    world = (affine[:3, :3] @ np.array(lo, float) + affine[:3, 3])[None]
    x, y, z = world_to_voxels(world, canon_affine)[0]
    assert (x, y, z) == pytest.approx(np.round((x, y, z)), abs=1e-9)
    assert canon[int(round(z)), int(round(y)), int(round(x))] == array[tuple(lo)]
    corners = np.array([[a - 0.5, b - 0.5, c - 0.5] for a in (lo[0], hi[0] + 1)
                        for b in (lo[1], hi[1] + 1) for c in (lo[2], hi[2] + 1)])
    mm = corners @ affine[:3, :3].T + affine[:3, 3]
    box = world_boxes_to_voxels(np.concatenate([mm.min(0), mm.max(0)])[None], canon_affine)[0]
    inside = np.zeros(shape, bool)
    inside[tuple(slice(a, b + 1) for a, b in zip(lo, hi))] = True
    found = np.isin(canon, array[inside])
    assert box == pytest.approx(_voxel_box(found), abs=1e-9)
