"""A volume sample's annotation outputs: ``bbox3d`` and ``points`` (with their world
coordinates and labels) from a dataset's source-voxel annotations, and ``slice_labels`` from
its per-slice labels, placed on the returned volume by its
:class:`~radharmony.volumes.placement.VolumeGrid`, and the warning that names the file and row
of annotations dropped as bad input."""

from __future__ import annotations

import warnings

import numpy as np
import torch

#: each annotation output and the sample keys it adds
KEYS = {"bbox3d": ("bbox3d", "bbox3d_mm", "bbox3d_labels"),
        "points": ("points", "points_mm", "point_labels")}


def annotation_outputs(annotations: dict, grid, sample: dict, outputs) -> None:
    """Add the requested ``outputs`` among ``bbox3d`` / ``points`` of ``annotations`` (the
    contract's dict, source voxels) on ``grid`` to ``sample``; ``grid`` None (a user
    transform): kept on the source's voxels as given, without ``_mm``."""
    if grid is None:
        placed = {"bbox3d": np.asarray(annotations.get("boxes", np.zeros((0, 6))),
                                       np.float32).reshape(-1, 6),
                  "points": np.asarray(annotations.get("points", np.zeros((0, 3))),
                                       np.float32).reshape(-1, 3),
                  "bbox3d_labels": list(annotations.get("box_labels", [])),
                  "point_labels": list(annotations.get("point_labels", []))}
    else:
        p = grid.place(annotations)
        placed = {"bbox3d": p.boxes.astype(np.float32), "bbox3d_mm": p.boxes_mm,
                  "bbox3d_labels": p.box_labels, "points": p.points.astype(np.float32),
                  "points_mm": p.points_mm, "point_labels": p.point_labels}
    for output, names in KEYS.items():
        if output not in outputs:
            continue
        for name in names:
            if name in placed:
                value = placed[name]
                sample[name] = torch.from_numpy(np.ascontiguousarray(value)) \
                    if isinstance(value, np.ndarray) else value


def slice_label_output(ds, index: int, grid, sample: dict) -> None:
    """``sample["slice_labels"]``: ``ds.slice_labels(index, volume)`` (float32, one row per
    slice of the source's D axis in world z order, NaN where the source lists none) along the
    returned volume's slice axis (``grid`` None, a user transform: the source's)."""
    labels = ds.slice_labels(index, getattr(grid, "volume", None))
    if grid is not None:
        labels = grid.slices(labels)
    sample["slice_labels"] = torch.from_numpy(np.ascontiguousarray(labels, np.float32))


def warn_faults(ds, index: int, faults: dict) -> None:
    """Count ``faults`` (kind -> number dropped) in ``ds.annotation_faults`` and warn once for
    the sample, naming its row, id and file."""
    from ..volumes.placement import AnnotationWarning

    ds.annotation_faults.update(faults)
    what = ", ".join(f"{n} {kind}" for kind, n in sorted(faults.items()))
    warnings.warn(f"{type(ds).__name__} row {index} ({ds.rows.ids[index]}, "
                  f"{ds.image_file(index)}): dropped {what}: never placed",
                  AnnotationWarning, stacklevel=4)
