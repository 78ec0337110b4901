"""A DICOM series' files in the reader's geometric sort, from their headers alone: which rank a
file holds, and where a box drawn on one file's pixels lies in the canonical volume. Datasets
whose tables name a slice by its file (RSNA's ``slice_number``, ``instance_number``) place
their annotations through these, never by the file's number as a rank (series are stored in
descending z too).

- :func:`series_geometry`: the file stems in sorted order, the sorted array's LPS affine, the
  canonical volume's affine and shape (the series choice and checks of
  :func:`radharmony.volumes.read_volume`).
- :func:`file_ranks`: each ``<number>.dcm``'s rank; a number with no file counted and named.
- :func:`box_voxels`: slice boxes ``[x, y, width, height]`` -> ``(N, 6)`` canonical voxels;
  :func:`slice_points`: slice pixels -> ``(N, 3)`` canonical voxels (:func:`canonical_grid`:
  the canonical affine and shape of a sorted array, nothing allocated).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np


def canonical_grid(raw_affine, shape) -> tuple[np.ndarray, tuple[int, int, int]]:
    """The canonical volume's LPS affine and shape of a sorted ``(slice, row, column)`` array
    of ``shape`` whose LPS affine is ``raw_affine`` (nothing read or allocated)."""
    from ..volumes.geometry import to_canonical

    view, canonical = to_canonical(np.broadcast_to(np.int8(0), tuple(shape)), raw_affine)
    return canonical, tuple(int(n) for n in view.shape)


def slice_points(ranks, x, y, raw_affine, canonical_affine) -> np.ndarray:
    """Pixel ``(x, y)`` (column, row; pixel centres at whole numbers) on the slices of rank
    ``ranks`` in the series' geometric sort -> float64 ``(N, 3)`` ``(x, y, z)`` in the
    canonical volume's voxels (x along W, y along H, z along D; voxel k's centre at k)."""
    to_canonical = np.linalg.inv(np.asarray(canonical_affine, np.float64)) @ \
        np.asarray(raw_affine, np.float64)
    k = np.asarray(ranks, np.float64)
    raw = np.stack([k, np.asarray(y, np.float64), np.asarray(x, np.float64), np.ones_like(k)])
    return np.round((to_canonical @ raw)[:3].T[:, ::-1], 9) + 0.0


def box_voxels(boxes, ranks, raw_affine, canonical_affine) -> np.ndarray:
    """Slice boxes ``[x, y, width, height]`` (pixel-edge coordinates of the slice's rows and
    columns) on the slices of rank ``ranks`` in the series' geometric sort -> float64 ``(N, 6)``
    ``(x0, y0, z0, x1, y1, z1)`` in the canonical volume's voxels (x along W, y along H, z
    along D; voxel k's centre at k, a box one slice deep). ``raw_affine``: the LPS affine of
    the sorted ``(slice, row, column)`` array; ``canonical_affine``: the canonical volume's."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    ranks = np.asarray(ranks, np.float64)
    to_canonical = np.linalg.inv(np.asarray(canonical_affine, np.float64)) @ \
        np.asarray(raw_affine, np.float64)
    x, y, w, h = boxes.T
    corners = []
    for k, r, c in ((ranks - 0.5, y - 0.5, x - 0.5), (ranks + 0.5, y + h - 0.5, x + w - 0.5)):
        raw = np.stack([k, r, c, np.ones_like(k)])
        corners.append((to_canonical @ raw)[:3].T)
    low, high = np.minimum(*corners), np.maximum(*corners)
    out = np.concatenate([low[:, ::-1], high[:, ::-1]], axis=1)  # (d, h, w) -> (x, y, z)
    return np.round(out, 9) + 0.0


def file_ranks(names, numbers, rows, *, where: str, folder, what: str = "boxes"
               ) -> tuple[list[int], list[int]]:
    """The rank of each file ``<number>.dcm`` among ``names`` (the series' file stems in its
    geometric sort) and the positions of the entries kept; a number with no file is counted
    and named in one warning (its file and the table's ``rows``), its entry dropped."""
    rank = {name: k for k, name in enumerate(names)}
    kept, ranks, missing = [], [], []
    for i, (number, row) in enumerate(zip(numbers, rows)):
        k = rank.get(str(int(number)))
        if k is None:
            missing.append(f"row {int(row)}: {Path(folder) / f'{int(number)}.dcm'}")
        else:
            kept.append(i)
            ranks.append(k)
    if missing:
        warnings.warn(f"{where}: {len(missing)} {what} on a slice with no file, dropped "
                      f"({'; '.join(missing[:5])}{' ...' if len(missing) > 5 else ''})",
                      UserWarning, stacklevel=3)
    return kept, ranks


def series_geometry(folder) -> tuple[list[str], np.ndarray, np.ndarray, tuple[int, int, int]]:
    """A DICOM series' geometry from its headers alone: the file stems in the reader's
    geometric sort, the LPS affine of the sorted ``(slice, row, column)`` array, the canonical
    volume's LPS affine and shape (what :func:`radharmony.volumes.read_volume` returns; its
    series choice and checks, so a folder it refuses is refused here too)."""
    from ..volumes.dicom import choose, geometry
    from ..volumes.dicom_headers import find_files, scan

    headers, _ = scan(find_files(Path(folder)))
    _, headers = choose(headers, str(folder), None)
    slices, raw, _ = geometry(headers, str(folder))
    shape = (len(slices), int(slices[0].get("Rows")), int(slices[0].get("Columns")))
    canonical, canonical_shape = canonical_grid(raw, shape)
    return [h.path.name.removesuffix(".dcm") for h in slices], raw, canonical, canonical_shape


__all__ = ["box_voxels", "canonical_grid", "file_ranks", "series_geometry", "slice_points"]
