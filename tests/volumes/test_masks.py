"""Label maps onto another grid by the nearest label (volumes/masks.on_grid): on random
geometries (flips, axis orders, integer up-sampling, shifts) every label keeps its voxels'
world positions and its volume, and no value is ever blended."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from radharmony.volumes.masks import on_grid


@st.composite
def geometries(draw):
    shape = tuple(draw(st.integers(2, 7)) for _ in range(3))
    spacing = [draw(st.sampled_from([0.5, 0.8, 1.0, 1.5, 3.0])) for _ in range(3)]
    order = draw(st.permutations([0, 1, 2]))
    flips = [draw(st.booleans()) for _ in range(3)]
    factor = draw(st.sampled_from([1, 2]))
    seed = draw(st.integers(0, 2 ** 16))
    return shape, spacing, order, flips, factor, seed


@settings(max_examples=40, deadline=None)
@given(geometries())
def test_nearest_label_keeps_positions_and_volumes(geometry):
    shape, spacing, order, flips, factor, seed = geometry
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=shape).astype(np.uint8)
    affine = np.diag([*spacing, 1.0])
    affine[:3, 3] = rng.uniform(-50, 50, 3)
    # the output grid: the source's axes reordered and flipped, each voxel split in factor^3;
    # output index o along axis k sits at source index (o + 1/2) / factor - 1/2 (or mirrored)
    out, out_shape = np.eye(4), []
    out[:3, 3] = affine[:3, 3]
    for k, axis in enumerate(order):
        n = shape[axis] * factor
        first = 0.5 / factor - 0.5
        if flips[k]:
            first = (n - 0.5) / factor - 0.5
        out[:3, k] = affine[:3, axis] / factor * (-1 if flips[k] else 1)
        out[:3, 3] += affine[:3, axis] * first
        out_shape.append(n)
    result = on_grid(labels, affine, out_shape, out)
    assert result.dtype == labels.dtype
    assert set(np.unique(result)) <= set(np.unique(labels))          # never blended
    for label in range(4):
        assert int((result == label).sum()) == int((labels == label).sum()) * factor ** 3
    # every output voxel takes the source voxel whose world box holds its centre
    idx = np.argwhere(np.ones(out_shape, bool))
    world = idx @ out[:3, :3].T + out[:3, 3]
    source = np.rint((world - affine[:3, 3]) / np.diag(affine)[:3]).astype(int)
    assert np.array_equal(result[tuple(idx.T)], labels[tuple(source.T)])


def test_outside_the_source_is_background():
    labels = np.ones((2, 2, 2), np.uint8)
    shifted = np.eye(4)
    shifted[:3, 3] = [1, 0, 0]
    assert on_grid(labels, np.eye(4), (2, 2, 2), shifted)[:, :, :].tolist() == \
        [[[1, 1], [1, 1]], [[0, 0], [0, 0]]]


@settings(max_examples=60, deadline=None)
@given(geometries(), st.floats(0.3, 3.0), st.tuples(*[st.floats(-4, 4)] * 3))
def test_parallel_grids_take_the_same_labels_as_voxel_by_voxel(geometry, zoom, shift):
    """The one-index-per-axis path (every preset's grid) equals indexing every voxel, on
    flips, axis orders, any zoom and shifts, cropped or padded."""
    from radharmony.volumes import masks

    shape, spacing, order, flips, _, seed = geometry
    labels = np.random.default_rng(seed).integers(0, 5, size=shape).astype(np.uint8)
    affine = np.diag([*spacing, 1.0])
    out = np.zeros((4, 4))
    out[3, 3] = 1.0
    for k, axis in enumerate(order):
        out[axis, k] = spacing[axis] * zoom * (-1 if flips[k] else 1)
    out[:3, 3] = np.asarray(shift) * np.asarray(spacing)
    out_shape = tuple(max(1, int(shape[a] / zoom)) + 1 for a in order)
    to_source = np.linalg.inv(affine) @ out
    fast = masks.on_grid(labels, affine, out_shape, out)
    assert np.array_equal(fast, masks._on_parallel_grid(labels, to_source, out_shape))
    slow = masks._on_any_grid(labels, to_source, out_shape)
    assert fast.dtype == labels.dtype and np.array_equal(fast, slow)
