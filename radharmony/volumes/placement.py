"""Annotations on a returned volume's grid: boxes, points, masks and slice labels carried from
the source volume's canonical voxels by geometry alone.

A dataset gives its annotations in the **source** volume's canonical voxel coordinates
(``(D, H, W)`` toward S, P, L, as read, before any preset): continuous, voxel ``k``'s centre at
``k``; a point is ``(x, y, z)`` (x along W, y along H, z along D), a box
``(x0, y0, z0, x1, y1, z1)`` (a box covering voxels ``i..j`` spans ``i - 0.5 .. j + 0.5``). The
returned volume (a preset's output, an augmentation's) has its own LPS affine. Every annotation
goes source voxel -> world (the source affine) -> returned voxel (the inverse of the returned
affine): one 4x4 map, :attr:`VolumeGrid.to_output`, never a preset's own arithmetic.

- points map exactly; a point outside the returned volume (a crop) is dropped with its label;
- boxes: the 8 corners are mapped and their envelope taken (exact under flips, axis turns,
  resampling and crops; a rotation makes the envelope larger, as in 2-D), clipped to the
  returned volume; a box with no volume left inside is dropped with its label;
- world boxes (``bbox3d_mm``): the LPS envelope of the returned box's corners (the source
  box's, exactly, for every preset);
- masks: each returned voxel takes the label of the nearest source voxel
  (:func:`radharmony.volumes.masks.on_grid`), never blended; 0 outside the source;
- slice labels: along the returned axis that runs nearest the source's D axis, each returned
  slice takes the label of the source slice nearest its centre; a slice beyond the source's
  ends (padding) is NaN, a slice cropped away is not there.

Bad input -- a point or box outside the **source** volume, a box with its ends swapped, a mask
of another shape than the source volume -- is never placed: it is dropped (a mask of the wrong
shape gives an all-0 mask), counted in :attr:`Placed.faults`, and the dataset warns naming the
file and row.

Example (a source of 2 mm slices resampled to 1 mm; canonical axes: D toward S)::

    >>> def canonical(d_mm):
    ...     return np.array([[0, 0, 1, 0], [0, 1, 0, 0], [d_mm, 0, 0, 0], [0, 0, 0, 1.0]])
    >>> grid = VolumeGrid(canonical(2.0), (4, 8, 8), canonical(1.0), (8, 8, 8))
    >>> grid.points(np.array([[3.0, 4.0, 1.0]])).tolist()            # x, y kept; z 1 -> 2
    [[3.0, 4.0, 2.0]]
    >>> grid.slices(np.array([0, 1, 0, 1], np.float32)).tolist()
    [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, nan]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: what :attr:`Placed.faults` counts
FAULTS = ("point outside the volume", "box outside the volume", "box with swapped ends",
          "mask of another shape")


def transform_points(points: np.ndarray, matrix: np.ndarray, *, world: bool = False
                     ) -> np.ndarray:
    """``(N, 3)`` voxel points ``(x, y, z)`` through a 4x4 ``matrix`` acting on ``(d, h, w)``
    indices: to voxels ``(x, y, z)`` of another grid, or with ``world=True`` to the world
    coordinates the matrix gives (an affine: LPS ``(x, y, z)`` mm)."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    m = np.asarray(matrix, np.float64)
    out = points[:, ::-1] @ m[:3, :3].T + m[:3, 3]
    return out if world else out[:, ::-1]


def transform_boxes(boxes: np.ndarray, matrix: np.ndarray, *, world: bool = False
                    ) -> np.ndarray:
    """``(N, 6)`` boxes through ``matrix`` (as :func:`transform_points`): the envelope of each
    box's 8 mapped corners, ``(x0, y0, z0, x1, y1, z1)``."""
    return _envelope(boxes, lambda corners: transform_points(corners, matrix, world=world))


def world_to_voxels(points_mm: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """``(N, 3)`` LPS points (mm) as continuous ``(x, y, z)`` voxels of the grid of ``affine``
    (e.g. a source volume's canonical one: how a dataset whose annotations are in mm, or in its
    files' own index order through their affine, gives them in the contract's coordinates)."""
    inverse = np.linalg.inv(np.asarray(affine, np.float64))
    points = np.asarray(points_mm, np.float64).reshape(-1, 3)
    return (points @ inverse[:3, :3].T + inverse[:3, 3])[:, ::-1]


def world_boxes_to_voxels(boxes_mm: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """``(N, 6)`` LPS boxes (mm, ``x0, y0, z0, x1, y1, z1``) as voxel boxes of the grid of
    ``affine``: the envelope of their 8 corners (:func:`world_to_voxels`)."""
    return _envelope(boxes_mm, lambda corners: world_to_voxels(corners, affine))


def _envelope(boxes: np.ndarray, mapping) -> np.ndarray:
    """The envelope of each ``(N, 6)`` box's 8 corners through ``mapping`` ((M, 3) -> (M, 3))."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 6)
    corners = np.stack([boxes[:, [i, j, k]] for i in (0, 3) for j in (1, 4) for k in (2, 5)],
                       axis=1)                                     # (N, 8, 3)
    mapped = mapping(corners.reshape(-1, 3)).reshape(-1, 8, 3)
    return np.concatenate([mapped.min(axis=1), mapped.max(axis=1)], axis=1)


def extent(shape) -> np.ndarray:
    """The continuous ``(x, y, z)`` upper bounds of a ``(D, H, W)`` grid (voxel ``n - 1``'s far
    face; the lower bounds are -0.5)."""
    return np.asarray(shape, np.float64)[::-1] - 0.5


def points_inside(points: np.ndarray, shape) -> np.ndarray:
    """Which ``(N, 3)`` points lie in the ``(D, H, W)`` grid (faces included)."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    return np.all((points >= -0.5) & (points <= extent(shape)), axis=1)


def clip_boxes(boxes: np.ndarray, shape) -> tuple[np.ndarray, np.ndarray]:
    """``(clipped, keep)``: ``(N, 6)`` boxes clipped to the ``(D, H, W)`` grid and which keep
    some volume inside it."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 6)
    hi = extent(shape)
    clipped = np.concatenate([np.clip(boxes[:, :3], -0.5, hi), np.clip(boxes[:, 3:], -0.5, hi)],
                             axis=1)
    return clipped, np.all(clipped[:, 3:] > clipped[:, :3], axis=1)


@dataclass
class Placed:
    """Annotations on a returned grid: arrays whose rows stay in step with their labels."""

    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    boxes_mm: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    box_labels: list = field(default_factory=list)
    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    points_mm: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    point_labels: list = field(default_factory=list)


@dataclass(frozen=True)
class VolumeGrid:
    """Where a returned volume lies relative to its source: both LPS affines (``(d, h, w)``
    index -> world mm) and shapes ``(D, H, W)``. ``layout``: the returned array's spatial
    order, "CDHW" or "CHWD" (RadFM; a mask follows it, boxes and points stay ``(x, y, z)``
    with z along the affine's first axis). With no preset both grids are the source's."""

    source_affine: np.ndarray
    source_shape: tuple
    affine: np.ndarray
    shape: tuple
    layout: str = "CDHW"
    #: the source :class:`~radharmony.volumes.Volume` when it is the returned one (no preset)
    volume: object = field(default=None, compare=False, repr=False)
    #: bad input met so far, by kind (:data:`FAULTS`): dropped, never placed
    faults: dict = field(default_factory=dict, compare=False)

    @classmethod
    def same(cls, affine, shape, *, volume=None) -> "VolumeGrid":
        """The grid of a volume returned as read."""
        return cls(np.asarray(affine, np.float64), tuple(shape), np.asarray(affine, np.float64),
                   tuple(shape), volume=volume)

    def _count(self, kind: str, n: int) -> None:
        if n:
            self.faults[kind] = self.faults.get(kind, 0) + int(n)

    @property
    def to_output(self) -> np.ndarray:
        """Source ``(d, h, w)`` index -> returned index (4x4)."""
        return np.linalg.inv(np.asarray(self.affine, np.float64)) @ \
            np.asarray(self.source_affine, np.float64)

    def points(self, points: np.ndarray) -> np.ndarray:
        """Source voxel points ``(N, 3)`` as returned voxels (exact, nothing dropped)."""
        return transform_points(points, self.to_output)

    def place(self, annotations: dict) -> Placed:
        """A dataset's ``annotations`` (the contract's dict, source voxels) on this grid."""
        out = Placed()
        boxes = np.asarray(annotations.get("boxes", np.zeros((0, 6))), np.float64).reshape(-1, 6)
        labels = list(annotations.get("box_labels", [""] * len(boxes)))
        if len(boxes):
            swapped = ~np.all(boxes[:, 3:] >= boxes[:, :3], axis=1)
            outside = ~clip_boxes(boxes, self.source_shape)[1] & ~swapped
            self._count("box with swapped ends", swapped.sum())
            self._count("box outside the volume", outside.sum())
            good = ~swapped & ~outside
            clipped, keep = clip_boxes(transform_boxes(boxes[good], self.to_output), self.shape)
            out.boxes = clipped[keep]
            out.boxes_mm = transform_boxes(out.boxes, self.affine, world=True)
            out.box_labels = [lab for lab, g in zip(labels, good) if g]
            out.box_labels = [lab for lab, k in zip(out.box_labels, keep) if k]
        points = np.asarray(annotations.get("points", np.zeros((0, 3))),
                            np.float64).reshape(-1, 3)
        labels = list(annotations.get("point_labels", [""] * len(points)))
        if len(points):
            good = points_inside(points, self.source_shape)
            self._count("point outside the volume", (~good).sum())
            mapped = self.points(points[good])
            keep = points_inside(mapped, self.shape)
            out.points = mapped[keep]
            out.points_mm = transform_points(points[good][keep], self.source_affine, world=True)
            out.point_labels = [lab for lab, g in zip(labels, good) if g]
            out.point_labels = [lab for lab, k in zip(out.point_labels, keep) if k]
        return out

    def mask(self, labels: np.ndarray) -> np.ndarray:
        """A label map on the source grid carried onto the returned one by the nearest label
        (in the returned array's ``layout``); a map of another shape than the source volume
        gives all 0 (counted in :attr:`faults`)."""
        from .masks import on_grid

        labels = np.asarray(labels)
        if tuple(labels.shape) != tuple(self.source_shape):
            self._count("mask of another shape", 1)
            out = np.zeros(self.shape, labels.dtype)
        elif self.source_shape == self.shape and np.allclose(self.to_output, np.eye(4),
                                                             atol=1e-9):
            out = labels
        else:
            out = on_grid(labels, self.source_affine, self.shape, self.affine)
        return out.transpose(1, 2, 0) if self.layout == "CHWD" else out

    def slices(self, labels: np.ndarray) -> np.ndarray:
        """Per-slice source ``labels`` (along the source's D) along the returned volume's slice
        axis (:func:`slice_axis`), by :func:`carry_slices`."""
        return carry_slices(labels, np.linalg.inv(self.to_output), self.shape,
                            slice_axis(self.source_affine), slice_axis(self.affine))


def slice_axis(affine: np.ndarray) -> int:
    """The array axis (0, 1, 2) that runs nearest the world's S-I axis: the canonical D, and
    whatever axis a preset or an augmentation turned it into."""
    m = np.asarray(affine, np.float64)[:3, :3]
    return int(np.argmax(np.abs(m[2]) / np.linalg.norm(m, axis=0)))


def carry_slices(labels: np.ndarray, to_source: np.ndarray, shape, source_axis: int,
                 axis: int) -> np.ndarray:
    """Per-slice ``labels`` along ``source_axis`` of a source grid, carried to ``axis`` of a
    grid of ``shape`` (``to_source``: its index -> the source's, 4x4): each slice takes the
    label of the source slice nearest its centre (a tie goes to the later one); a slice whose
    centre lies on or beyond the source's outer faces (padding) is NaN."""
    labels = np.asarray(labels, np.float32)
    to_source = np.asarray(to_source, np.float64)
    centre = (np.asarray(shape, np.float64) - 1) / 2
    row = to_source[source_axis]
    k = np.arange(shape[axis], dtype=np.float64)
    others = sum(row[a] * centre[a] for a in range(3) if a != axis)
    position = row[axis] * k + others + row[3]
    inside = (position > -0.5) & (position < len(labels) - 0.5)
    d = np.floor(position + 0.5).astype(np.int64)
    out = np.full((len(k),) + labels.shape[1:], np.nan, np.float32)  # (D,) or (D, labels)
    out[inside] = labels[d[inside]]
    return out


class AnnotationWarning(UserWarning):
    """Annotations that could not be placed (outside the volume, a mask of another shape)
    were dropped: counted and named with the file and row."""


__all__ = ["FAULTS", "AnnotationWarning", "Placed", "VolumeGrid", "carry_slices",
           "clip_boxes", "extent", "points_inside", "slice_axis", "transform_boxes",
           "transform_points", "world_boxes_to_voxels", "world_to_voxels"]
