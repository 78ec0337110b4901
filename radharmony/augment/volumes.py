"""Spatial augmentations of volume samples: flips, 90-degree turns, small rotations and random
crops, applied after the cache (a dataset's ``train_transform``) to the image, its mask, boxes,
points, slice labels and affine together.

A volume sample (:class:`~radharmony.data.volumes.VolumeDataset`): ``img`` ``(C, D, H, W)``
with its LPS ``affine`` (``(d, h, w)`` index -> mm) and ``spacing``; optionally ``mask``
``(1, D, H, W)``, ``bbox3d`` ``(N, 6)`` (``x0, y0, z0, x1, y1, z1`` in voxels, x along W, z
along D) with ``bbox3d_mm`` and ``bbox3d_labels``, ``points`` ``(N, 3)`` with ``points_mm``
and ``point_labels``, ``slice_labels``. RadFM's "CHWD" layout is not a volume sample here.

Each augmentation draws one voxel map ``T`` (returned ``(d, h, w)`` index -> input index, 4x4)
and the returned shape; :func:`warp_volume` applies it to everything at once:

- ``img``: flips, turns and crops exactly (indexing, no resampling); a rotation trilinearly,
  voxels brought in from outside the volume taking ``fill`` (default: the image's minimum);
- ``mask``: exactly, or by the nearest label (0 outside): never blended;
- ``bbox3d``: the 8 corners through ``T``'s inverse, their envelope, clipped to the returned
  volume; a box with nothing left inside is dropped with its label and ``bbox3d_mm`` row;
  ``bbox3d_mm`` is the LPS envelope of the returned box through the returned affine (the same
  mm under flips, turns and crops; a rotation makes both envelopes larger, as in 2-D);
- ``points``: exact through ``T``'s inverse, dropped with their label when outside;
  ``points_mm`` does not move (the anatomy is where it was; the affine follows the voxels);
- ``slice_labels``: along the returned slice axis, the nearest input slice's label
  (:func:`radharmony.volumes.placement.carry_slices`);
- ``affine`` becomes ``affine @ T`` and ``spacing`` its column norms: every returned voxel
  keeps its true world position.

Randomness is torch's (or the ``generator`` given), a fixed number of draws per call, as the 2-D
augmentations (:mod:`radharmony.augment`): ``torch.manual_seed`` and the DataLoader's per-worker
seeding make epochs reproducible and different.

Example::

    >>> import torch
    >>> from radharmony.augment import Compose
    >>> from radharmony.augment.volumes import RandomCrop3D, RandomFlip3D
    >>> sample = {"img": torch.arange(4 * 5 * 6, dtype=torch.int16).reshape(1, 4, 5, 6),
    ...           "affine": torch.eye(4, dtype=torch.float64),
    ...           "points": torch.tensor([[3.0, 2.0, 3.0]]), "point_labels": ["tip"]}
    >>> out = Compose([RandomFlip3D(p=1.0, axis=0), RandomCrop3D((4, 4, 4))])(sample)
    >>> tuple(out["img"].shape), len(out["points"])
    ((1, 4, 4, 4), 1)
    >>> z = int(out["points"][0, 2])            # the point's slice: the input's slice 3
    >>> z, int(out["img"][0, z, 0, 0]) // 30
    (0, 3)
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import RadHarmonyError
from ..volumes.placement import (carry_slices, clip_boxes, points_inside, slice_axis,
                                 transform_boxes, transform_points)
from .base import Augmentation
from .checks import _range, _restore

#: per-box and per-point keys that travel with ``bbox3d`` and ``points``
ROWS = {"bbox3d": ("bbox3d_mm", "bbox3d_labels"), "points": ("points_mm", "point_labels")}


# -- the warp -----------------------------------------------------------------------------------
def warp_volume(sample: dict, transform: np.ndarray, shape, *, fill: float | None = None
                ) -> dict:
    """A new sample: ``sample`` on the grid whose ``(d, h, w)`` index maps to the input's by
    ``transform`` (4x4), of ``shape`` ``(D, H, W)`` (see the module docstring)."""
    img, affine = _volume(sample)
    t = np.asarray(transform, np.float64)
    shape = tuple(int(n) for n in shape)
    out = dict(sample)
    exact = _exact(t, img.shape[-3:], shape)
    if exact is not None:
        out["img"] = _take(img, exact)
    else:
        value = float(img.min()) if fill is None else float(fill)
        out["img"] = _restore(_sample(img.float() - value, t, shape, "bilinear") + value, img)
    mask = sample.get("mask")
    if isinstance(mask, torch.Tensor):
        out["mask"] = _take(mask, exact) if exact is not None else \
            _restore(_sample(mask.float(), t, shape, "nearest"), mask)
    new_affine = affine @ t
    out["affine"] = torch.from_numpy(new_affine)
    out["spacing"] = torch.from_numpy(np.linalg.norm(new_affine[:3, :3], axis=0))
    to_out = np.linalg.inv(t)
    if "bbox3d" in sample:
        boxes, keep = clip_boxes(transform_boxes(_rows(sample["bbox3d"], 6), to_out), shape)
        _keep(out, sample, "bbox3d", boxes, keep)
        if "bbox3d_mm" in out:
            out["bbox3d_mm"] = torch.from_numpy(transform_boxes(boxes[keep], new_affine,
                                                                world=True))
    if "points" in sample:
        points = transform_points(_rows(sample["points"], 3), to_out)
        _keep(out, sample, "points", points, points_inside(points, shape))
    if "slice_labels" in sample:
        out["slice_labels"] = torch.from_numpy(carry_slices(
            np.asarray(sample["slice_labels"], np.float32), t, shape, slice_axis(affine),
            slice_axis(new_affine)))
    return out


def _volume(sample: dict) -> tuple[torch.Tensor, np.ndarray]:
    img, affine = sample.get("img"), sample.get("affine")
    if not isinstance(img, torch.Tensor) or img.dim() < 3 or affine is None:
        raise RadHarmonyError(
            "A volume augmentation needs a volume sample",
            expected="'img' (C, D, H, W) and its 4x4 'affine' (a VolumeDataset sample)",
            found=f"img {tuple(img.shape) if isinstance(img, torch.Tensor) else type(img)}, "
                  f"affine {'absent' if affine is None else 'present'}",
            fix="apply it as the volume dataset's train_transform (after the cache, no user "
                "transform)")
    return img, np.asarray(affine, np.float64)


def _rows(value, width: int) -> np.ndarray:
    return np.asarray(value, np.float64).reshape(-1, width)


def _keep(out: dict, sample: dict, key: str, values: np.ndarray, keep: np.ndarray) -> None:
    """``out[key]`` = the kept ``values`` (in the input's dtype), their rows kept in step."""
    like = sample[key]
    dtype = like.dtype if isinstance(like, torch.Tensor) else torch.float32
    out[key] = torch.from_numpy(np.ascontiguousarray(values[keep])).to(dtype)
    for name in ROWS[key]:
        if name in sample:
            value = sample[name]
            out[name] = value[torch.from_numpy(keep)] if isinstance(value, torch.Tensor) \
                else [v for v, k in zip(value, keep) if k]


def _exact(t: np.ndarray, shape_in, shape_out):
    """``[(input axis, sign, offset)]`` per returned axis when ``t`` is a signed permutation
    with whole offsets that stays inside the input (flips, turns, crops), else None."""
    m = t[:3, :3]
    if not (np.allclose(m, np.round(m)) and np.allclose(t[:3, 3], np.round(t[:3, 3])) and
            np.all(np.abs(np.round(m)).sum(axis=0) == 1)):
        return None
    axes = []
    for o in range(3):
        a = int(np.argmax(np.abs(m[:, o])))
        sign, offset = int(round(m[a, o])), int(round(t[a, 3]))
        lo = offset if sign > 0 else offset - shape_out[o] + 1
        if lo < 0 or lo + shape_out[o] > shape_in[a]:
            return None
        axes.append((a, sign, lo, shape_out[o]))
    return axes


def _take(x: torch.Tensor, axes) -> torch.Tensor:
    lead = x.dim() - 3
    index = [slice(None)] * x.dim()
    for a, _, lo, n in axes:
        index[lead + a] = slice(lo, lo + n)
    x = x[tuple(index)]
    flips = [lead + a for a, sign, _, _ in axes if sign < 0]
    if flips:
        x = x.flip(flips)
    order = list(range(lead)) + [lead + a for a, _, _, _ in axes]
    return x.permute(order).contiguous()


def _sample(x: torch.Tensor, t: np.ndarray, shape, mode: str) -> torch.Tensor:
    """``x`` (..., D, H, W) sampled at ``t`` of every returned voxel (0 outside), through one
    ``affine_grid`` (float32, no index arrays): ``t`` between the two grids' normalized
    coordinates (``align_corners=True``), in ``(x, y, z)`` = ``(w, h, d)`` order."""
    size_in = np.asarray(x.shape[-3:], np.float64)
    size_out = np.asarray(shape, np.float64)
    from_out = np.eye(4)                                   # normalized -> returned index
    from_out[:3, :3] = np.diag((size_out - 1) / 2)
    from_out[:3, 3] = (size_out - 1) / 2
    to_in = np.eye(4)                                      # input index -> normalized
    to_in[:3, :3] = np.diag(2 / np.maximum(size_in - 1, 1))
    to_in[:3, 3] = -1.0
    m = (to_in @ t @ from_out)[:3]
    theta = np.concatenate([m[::-1, :3][:, ::-1], m[::-1, 3:]], axis=1)   # (d, h, w) -> xyz
    flat = x.reshape(1, -1, *x.shape[-3:])
    grid = F.affine_grid(torch.from_numpy(theta).float()[None], [1, flat.shape[1], *shape],
                         align_corners=True)
    out = F.grid_sample(flat, grid, mode=mode, padding_mode="zeros", align_corners=True)
    return out.reshape(*x.shape[:-3], *shape)


# -- the augmentations --------------------------------------------------------------------------
def _axis(owner: str, axis) -> int:
    if axis not in (0, 1, 2):
        raise RadHarmonyError(f"{owner}: unknown axis", expected="0 (D), 1 (H) or 2 (W)",
                              found=repr(axis), fix="pass e.g. axis=2 (left-right)")
    return int(axis)


class RandomFlip3D(Augmentation):
    """Mirror the volume along ``axis`` (0: D, 1: H, 2: W of the returned volume) with
    probability ``p``. Exact."""

    def __init__(self, p: float = 0.5, *, axis: int = 2, generator=None):
        super().__init__(p, generator)
        self.axis = _axis(type(self).__name__, axis)

    def apply(self, sample, img, u):
        shape = img.shape[-3:]
        t = np.eye(4)
        t[self.axis, self.axis], t[self.axis, 3] = -1.0, shape[self.axis] - 1
        return warp_volume(sample, t, shape)


class RandomTurn3D(Augmentation):
    """With probability ``p``, turn the volume by 90, 180 or 270 degrees (drawn evenly) in
    ``plane`` (two axes; ``torch.rot90``'s direction). Exact."""

    draws = 2

    def __init__(self, p: float = 0.5, *, plane=(1, 2), generator=None):
        super().__init__(p, generator)
        name = type(self).__name__
        if not (isinstance(plane, (tuple, list)) and len(plane) == 2 and plane[0] != plane[1]):
            raise RadHarmonyError(f"{name}: plane must be two different axes",
                                  expected="e.g. (1, 2): the axial plane", found=repr(plane),
                                  fix="pass plane=(1, 2)")
        self.plane = (_axis(name, plane[0]), _axis(name, plane[1]))

    def apply(self, sample, img, u):
        a, b = self.plane
        shape, t = list(img.shape[-3:]), np.eye(4)
        for _ in range(1 + min(int(float(u[0]) * 3), 2)):
            once = np.eye(4)                    # out[.., i, .., j, ..] = in[.., j, .., n_b-1-i, ..]
            once[a, a], once[b, b], once[a, b] = 0.0, 0.0, 1.0
            once[b, a], once[b, 3] = -1.0, shape[b] - 1
            t = t @ once
            shape[a], shape[b] = shape[b], shape[a]
        return warp_volume(sample, t, shape)


class RandomRotate3D(Augmentation):
    """With probability ``p``, a small rotation about the volume's centre, in mm (so an
    anisotropic volume turns as the body does): an angle about each of D, H and W drawn from
    ``degrees`` (``x`` for ``(-x, x)``, a pair, or a triple of those; None: no turn about that
    axis). Trilinear; ``fill`` for voxels from outside (None: the image's minimum)."""

    draws = 4

    def __init__(self, p: float = 0.5, *, degrees=(10.0, 0.0, 0.0), fill: float | None = None,
                 generator=None):
        super().__init__(p, generator)
        name = type(self).__name__
        per_axis = degrees if isinstance(degrees, (tuple, list)) and len(degrees) == 3 \
            else (degrees,) * 3
        self.degrees = tuple(_range(name, "degrees", d, symmetric=True) for d in per_axis)
        self.fill = None if fill is None else float(fill)

    def matrix(self, u, shape, spacing) -> np.ndarray:
        """The voxel map ``T`` for draws ``u`` (3 values in [0, 1))."""
        r = np.eye(3)
        for axis, (rng, v) in enumerate(zip(self.degrees, u)):
            if rng is None:
                continue
            angle = math.radians(rng[0] + (rng[1] - rng[0]) * float(v))
            a, b = [k for k in range(3) if k != axis]
            turn = np.eye(3)
            turn[a, a] = turn[b, b] = math.cos(angle)
            turn[a, b], turn[b, a] = -math.sin(angle), math.sin(angle)
            r = r @ turn
        s = np.diag(np.asarray(spacing, np.float64))
        m = np.linalg.inv(s) @ r @ s
        centre = (np.asarray(shape, np.float64) - 1) / 2
        t = np.eye(4)
        t[:3, :3], t[:3, 3] = m, centre - m @ centre
        return t

    def apply(self, sample, img, u):
        affine = _volume(sample)[1]
        shape = img.shape[-3:]
        t = self.matrix(u, shape, np.linalg.norm(affine[:3, :3], axis=0))
        return warp_volume(sample, t, shape, fill=self.fill)


class RandomCrop3D(Augmentation):
    """With probability ``p`` (default always), a ``size`` ``(D, H, W)`` crop at a random
    place inside the volume. Exact."""

    draws = 4

    def __init__(self, size, p: float = 1.0, *, generator=None):
        super().__init__(p, generator)
        if not (isinstance(size, (tuple, list)) and len(size) == 3 and
                all(isinstance(n, int) and n > 0 for n in size)):
            raise RadHarmonyError(f"{type(self).__name__}: size must be three positive integers",
                                  expected="(D, H, W) voxels", found=repr(size),
                                  fix="pass e.g. size=(96, 96, 96)")
        self.size = tuple(size)

    def apply(self, sample, img, u):
        shape = img.shape[-3:]
        if any(m > n for m, n in zip(self.size, shape)):
            raise RadHarmonyError(f"{type(self).__name__}: the crop is larger than the volume",
                                  expected=f"size <= {tuple(shape)}", found=repr(self.size),
                                  fix="crop smaller, or pad first with a preset's size")
        t = np.eye(4)
        t[:3, 3] = [min(int(float(v) * (n - m + 1)), n - m)
                    for v, n, m in zip(u, shape, self.size)]
        return warp_volume(sample, t, self.size)


__all__ = ["RandomCrop3D", "RandomFlip3D", "RandomRotate3D", "RandomTurn3D", "warp_volume"]
