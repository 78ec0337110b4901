"""Label maps on a volume's grid: binary mask files merged into one map, refused when their
geometry is not the image's, and carried onto another grid by the nearest label.

- :func:`merge_masks`: one NIfTI file per structure (TotalSegmentator's
  ``segmentations/<structure>.nii.gz``) -> a uint8/uint16 label map in the canonical order,
  structure ``k`` of the given order written as ``k + 1`` (0: none). A voxel claimed by two
  structures keeps the later one in the order. A file whose affine differs from the image's
  by more than :data:`AFFINE_TOLERANCE` (mm, any entry) or whose shape differs is refused,
  naming both files: a mask is never drawn on the wrong grid.
- :func:`on_grid`: a canonical label map -> the grid of a preset's output (its LPS affine
  and shape), each output voxel taking the label of the nearest source voxel (0 outside):
  never blended.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import RadHarmonyError

#: the largest difference (mm, per affine entry) between a mask's and its image's geometry
AFFINE_TOLERANCE = 1e-3


class MaskGeometryError(RadHarmonyError, ValueError):
    """A mask file's grid (affine or shape) is not its image's."""


def header_affine(path: str | Path) -> tuple[np.ndarray, tuple[int, ...]]:
    """The LPS affine of a NIfTI file's (i, j, k) index and its shape, from the header only."""
    from .nifti import nifti_geometry, parse_header

    path = Path(path)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as f:
        header = parse_header(f.read(540), path)
    return nifti_geometry(header)[0], tuple(int(n) for n in header.shape[:3])


def merge_masks(paths: Sequence[str | Path], image: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(label map, LPS affine)`` in the canonical order of the binary masks ``paths``
    (label ``k + 1`` for ``paths[k]``; a missing file is skipped: that structure is absent),
    checked against the grid of ``image`` (a NIfTI file)."""
    from .geometry import to_canonical
    from .nifti import nifti_geometry, read_nifti_array

    reference, shape = header_affine(image)
    out = np.zeros(shape, np.uint8 if len(paths) < 256 else np.uint16)
    for k, path in enumerate(paths):
        if not Path(path).is_file():
            continue
        header, stored = read_nifti_array(path)
        affine = nifti_geometry(header)[0]
        if stored.shape[:3] != shape or not np.allclose(affine, reference, rtol=0,
                                                        atol=AFFINE_TOLERANCE):
            worst = float(np.abs(affine - reference).max()) if stored.shape[:3] == shape \
                else float("nan")
            raise MaskGeometryError(
                f"The mask {path} is not on the grid of its image {image}",
                expected=f"shape {shape} and an affine within {AFFINE_TOLERANCE} mm of the "
                         "image's", found=f"shape {stored.shape[:3]}, largest affine "
                         f"difference {worst:.6g} mm",
                fix="pass the mask made for this image (or resample it onto the image's grid "
                    "yourself, by nearest label)")
        out[np.asarray(stored).reshape(shape) > 0] = k + 1
    array, affine = to_canonical(out, reference)
    return np.ascontiguousarray(array), affine


def on_grid(labels: np.ndarray, affine: np.ndarray, shape: Sequence[int],
            out_affine: np.ndarray) -> np.ndarray:
    """``labels`` (index -> world by ``affine``) on the grid ``shape`` / ``out_affine``: each
    output voxel takes the nearest source voxel's label (0 outside the source). Grids whose
    axes are parallel (every preset: flips, axis orders, spacings, crops) take one index per
    axis (:func:`_on_parallel_grid`, the same values ~50x faster); others index each voxel."""
    to_source = np.linalg.inv(np.asarray(affine, np.float64)) @ np.asarray(out_affine,
                                                                           np.float64)
    axes = np.abs(to_source[:3, :3]) > 1e-9
    if (axes.sum(axis=0) == 1).all() and (axes.sum(axis=1) == 1).all():
        return _on_parallel_grid(labels, to_source, shape)
    return _on_any_grid(labels, to_source, shape)


def _on_any_grid(labels: np.ndarray, to_source: np.ndarray, shape) -> np.ndarray:
    """:func:`on_grid` voxel by voxel (``to_source``: output index -> source index)."""
    grids = np.ogrid[tuple(slice(0, int(n)) for n in shape)]
    index = []
    for row in range(3):
        value = to_source[row, 3] + sum(to_source[row, a] * grids[a] for a in range(3))
        index.append(np.rint(value).astype(np.int64))
    index = np.broadcast_arrays(*index)
    inside = np.ones(index[0].shape, bool)
    for axis, idx in enumerate(index):
        inside &= (idx >= 0) & (idx < labels.shape[axis])
    out = np.zeros(tuple(int(n) for n in shape), labels.dtype)
    out[inside] = labels[tuple(idx[inside] for idx in index)]
    return out


def _on_parallel_grid(labels: np.ndarray, to_source: np.ndarray, shape) -> np.ndarray:
    """:func:`on_grid` where each output axis runs along one source axis (``to_source``: output
    index -> source index, one non-zero per row and column): one source index per output
    position and axis (rounded as :func:`on_grid` rounds), gathered at once."""
    source_axis = [int(np.flatnonzero(np.abs(to_source[:3, o]) > 1e-9)[0]) for o in range(3)]
    index, keep = [], []
    for o, a in enumerate(source_axis):
        idx = np.rint(to_source[a, 3] + to_source[a, o] * np.arange(int(shape[o]))).astype(
            np.int64)
        inside = (idx >= 0) & (idx < labels.shape[a])
        index.append(idx[inside])
        keep.append(inside)
    out = np.zeros(tuple(int(n) for n in shape), labels.dtype)
    out[np.ix_(*keep)] = labels.transpose(source_axis)[np.ix_(*index)]
    return out
