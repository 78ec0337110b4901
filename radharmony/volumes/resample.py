"""Resampling a canonical volume for a model: spacing, size, crop/pad, orientation.

Every function takes a 3-D array and returns a 3-D array; images are interpolated linearly
(trilinear, as a product of three 1-D linear passes: the same values as a trilinear grid
sample), masks (``mode="nearest"``) take the nearest source voxel and are never blended. Two
grid conventions exist in the models' own code and both are kept exactly:

* ``"grid"`` -- MONAI's ``Spacing``: the first voxel's centre stays where it is, output voxel
  ``i`` samples source position ``i * target / spacing``, the output has
  ``round((n - 1) * spacing / target) + 1`` voxels, positions past the last voxel take the
  border value (Merlin).
* ``"zoom"`` -- ``torch.nn.functional.interpolate(..., align_corners=False)`` to
  ``int(n * spacing / target)`` voxels (CT-CLIP's resize to a spacing) and MONAI's
  ``Resize``: output voxel ``i`` samples ``(i + 0.5) * n / m - 0.5``, clamped to the volume.

:func:`crop_or_pad` follows MONAI's ``SpatialPad`` (symmetric, the odd voxel after) and
``CenterSpatialCrop`` (start ``n // 2 - size // 2``). :func:`orient`
(:mod:`radharmony.volumes.geometry`) reorders a canonical array toward any three axis codes by
flips and transposes only.

Example::

    >>> import numpy as np
    >>> a = np.arange(10, dtype=np.int16).reshape(10, 1, 1)
    >>> resample_spacing(a, (1.0, 1, 1), (1.5, 1, 1))[:, 0, 0].tolist()
    [0.0, 1.5, 3.0, 4.5, 6.0, 7.5, 9.0]
    >>> crop_or_pad(np.ones((2, 1, 1)), (4, 1, 1), value=-1)[:, 0, 0].tolist()
    [-1.0, 1.0, 1.0, -1.0]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import RadHarmonyError, check_choice
from .geometry import orient

MODES = ("linear", "nearest")
CONVENTIONS = ("grid", "zoom")


def _along(array: np.ndarray, axis: int, src: np.ndarray, mode: str) -> np.ndarray:
    """``array`` sampled at fractional positions ``src`` along ``axis`` (clamped to it)."""
    n = array.shape[axis]
    src = np.clip(src, 0, n - 1)
    if mode == "nearest":
        return np.take(array, np.floor(src + 0.5).astype(np.intp), axis=axis)
    lo = np.floor(src).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    w = (src - lo).astype(np.float32)
    shape = [1] * array.ndim
    shape[axis] = len(src)
    w = w.reshape(shape)
    a = np.take(array, lo, axis=axis).astype(np.float32, copy=False)
    b = np.take(array, hi, axis=axis).astype(np.float32, copy=False)
    return a + (b - a) * w


def _resample(array: np.ndarray, sources: Sequence[np.ndarray | None], mode: str) -> np.ndarray:
    check_choice("mode", mode, MODES)
    # work in the array's memory order: a transposed or flipped view (an oriented volume)
    # resamples ~10x slower; a flipped axis samples the mirrored positions instead
    flips = [array.strides[k] < 0 for k in range(3)]
    memory = sorted(range(3), key=lambda k: -abs(array.strides[k]))
    out = array[tuple(slice(None, None, -1) if f else slice(None) for f in flips)]
    out = out.transpose(memory)
    # a flipped axis left as it is must be flipped back (no mirrored positions flip it)
    unflip = tuple(slice(None, None, -1) if flips[k] and sources[k] is None else slice(None)
                   for k in memory)
    sources = [None if sources[k] is None else
               (array.shape[k] - 1) - sources[k] if flips[k] else sources[k] for k in memory]
    # the axis that shrinks most first, so the later passes work on less
    for axis in sorted(range(3), key=lambda k: len(sources[k]) / out.shape[k]
                       if sources[k] is not None else 2.0):
        if sources[axis] is not None:
            out = _along(out, axis, sources[axis], mode)
    out = out[unflip].transpose(np.argsort(memory))
    return out if mode == "nearest" else out.astype(np.float32, copy=False)


def grid_size(n: int, spacing: float, target: float, convention: str) -> int:
    """Voxels along an axis of ``n`` voxels of ``spacing`` mm resampled to ``target`` mm."""
    check_choice("convention", convention, CONVENTIONS)
    if convention == "grid":
        return int(np.round((n - 1) * spacing / target)) + 1
    return max(1, int(n * spacing / target))


def resample_spacing(array: np.ndarray, spacing: Sequence[float], target: Sequence[float], *,
                     mode: str = "linear", convention: str = "grid") -> np.ndarray:
    """``array`` (D, H, W) of voxel ``spacing`` (mm, same order) resampled to ``target`` mm
    per voxel (see the module docstring for the two conventions). Linear gives float32."""
    _check3("spacing", spacing)
    _check3("target", target)
    if convention == "zoom":
        size = [grid_size(n, s, t, "zoom") for n, s, t in zip(array.shape, spacing, target)]
        return resize(array, size, mode=mode)
    sources = []
    for n, s, t in zip(array.shape, spacing, target):
        m = grid_size(n, s, t, "grid")
        sources.append(None if m == n and s == t else np.arange(m) * (t / s))
    return _resample(array, sources, mode)


def resize(array: np.ndarray, size: Sequence[int], *, mode: str = "linear") -> np.ndarray:
    """``array`` resized to ``size`` voxels (align_corners=False, as MONAI ``Resize`` and
    ``torch.nn.functional.interpolate``; nearest picks ``floor(i * n / m)`` as they do)."""
    _check3("size", size)
    sources = []
    for n, m in zip(array.shape, size):
        if m == n:
            sources.append(None)
        elif mode == "nearest":
            sources.append(np.floor(np.arange(m) * (n / m)))
        else:
            sources.append((np.arange(m) + 0.5) * (n / m) - 0.5)
    return _resample(array, sources, mode)


def crop_or_pad(array: np.ndarray, size: Sequence[int], *, value: float = 0) -> np.ndarray:
    """``array`` padded with ``value`` where it is smaller than ``size`` (symmetric, the odd
    voxel after) and centre-cropped where larger (start ``n // 2 - size // 2``)."""
    return array[crop_or_pad_slices(array.shape, size)[0]] if all(
        n >= m for n, m in zip(array.shape, size)) else _pad_then_crop(array, size, value)


def crop_or_pad_slices(shape: Sequence[int], size: Sequence[int]):
    """``(crop, pad)``: the slices of the centre crop and the ``(before, after)`` pad of each
    axis that :func:`crop_or_pad` applies (pad first); the first output voxel then sits at
    source index ``crop[k].start - pad[k][0]``."""
    _check3("size", size)
    pad = [((m - n) // 2, m - n - (m - n) // 2) if m > n else (0, 0)
           for n, m in zip(shape, size)]
    padded = [n + b + a for n, (b, a) in zip(shape, pad)]
    crop = tuple(slice(p // 2 - m // 2, p // 2 - m // 2 + m) for p, m in zip(padded, size))
    return crop, pad


def _pad_then_crop(array, size, value):
    crop, pad = crop_or_pad_slices(array.shape, size)
    out = np.pad(array, pad, mode="constant", constant_values=value)
    return out[crop]


def _check3(name, value) -> None:
    if len(value) != 3 or any(not np.isfinite(v) or v <= 0 for v in value):
        raise RadHarmonyError(f"{name} must be three positive numbers", expected="(d, h, w)",
                              found=repr(tuple(value)), fix=f"pass {name} as three numbers "
                              "in the canonical (d, h, w) order")


__all__ = ["CONVENTIONS", "MODES", "crop_or_pad", "crop_or_pad_slices", "grid_size", "orient",
           "resample_spacing", "resize"]
