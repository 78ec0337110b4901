"""Segmentation masks: run-length decoding and the ``mask`` sample output.

A dataset whose spec lists ``"mask"`` in ``outputs`` implements ``source_mask(index)``: the
image's 2-D uint8 label mask at the resolution its annotation is defined on (normally the
source image). :meth:`BaseRadiologicalDataset.add_outputs` passes it through :func:`mask_output`,
which maps it with the image's :class:`~radharmony.imaging.geometry.Letterbox` (nearest
neighbour, zero padding), so mask and image stay aligned pixel for pixel.
"""

from __future__ import annotations

import numpy as np

from ..errors import MetadataError


def rle_decode(rle: str, *, height: int, width: int, relative: bool = False,
               order: str = "C", where: str = "RLE") -> np.ndarray:
    """A run-length string ``"start length start length ..."`` -> uint8 (height, width) mask.

    Args:
        relative: starts count from the end of the previous run (SIIM-ACR), else they are
            absolute 0-based pixel offsets.
        order: ``"C"`` when offsets run along rows, ``"F"`` when they run down columns.
        where: names the row in errors, e.g. ``"train-rle.csv, ImageId 1.2.3"``.
    """
    n = height * width
    try:
        nums = np.asarray(str(rle).split(), dtype=np.int64)
    except ValueError:
        nums = None
    if nums is None or nums.size % 2 or (nums.size and (nums[1::2] < 0).any()) or \
            (nums.size and (nums[0::2] < 0).any()):
        raise MetadataError(f"{where}: malformed run-length encoding",
                            expected="pairs of non-negative integers 'start length ...'",
                            found=repr(str(rle)[:60]), fix="re-download the metadata file")
    starts, lengths = nums[0::2], nums[1::2]
    if relative:
        starts = np.cumsum(starts) + np.concatenate(([0], np.cumsum(lengths)[:-1]))
    ends = starts + lengths
    if ends.size and ends.max() > n:
        raise MetadataError(f"{where}: run-length encoding runs past the image",
                            expected=f"runs inside {height}x{width} = {n} pixels",
                            found=f"a run ending at pixel {int(ends.max())}",
                            fix="check the mask size, or re-download the metadata file")
    edges = np.zeros(n + 1, np.int32)
    np.add.at(edges, starts, 1)
    np.add.at(edges, ends, -1)
    flat = (np.cumsum(edges[:-1]) > 0).astype(np.uint8)
    return flat.reshape((height, width), order=order)


def rle_encode(mask: np.ndarray, *, relative: bool = False, order: str = "C") -> str:
    """The inverse of :func:`rle_decode` (used by fake writers and tests); ``"-1"`` if empty."""
    flat = np.asarray(mask).ravel(order=order) > 0
    padded = np.concatenate(([False], flat, [False]))
    change = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = change[0::2], change[1::2]
    if not starts.size:
        return "-1"
    lengths = ends - starts
    if relative:
        starts = starts - np.concatenate(([0], ends[:-1]))
    return " ".join(f"{s} {n}" for s, n in zip(starts, lengths))


def rle_is_monotone(rle: str) -> bool | None:
    """Whether a code's starts read as *absolute* offsets: each start at or past the previous
    run's end. None for a code of fewer than two runs (or not pairs of integers), which any
    convention reads alike."""
    try:
        nums = np.asarray(str(rle).split(), dtype=np.int64)
    except ValueError:
        return None
    if nums.size < 4 or nums.size % 2:
        return None
    starts, lengths = nums[0::2], nums[1::2]
    return bool((starts[1:] >= starts[:-1] + lengths[:-1]).all())


def detect_rle_relative(codes) -> bool | None:
    """The start convention of a file's run-length codes, from the codes alone.

    Absolute codes (CheXmask, most Kaggle kernels) always have increasing starts; relative codes
    (SIIM-ACR: each start counts from the previous run's end) of a real region repeat about one
    column's (or row's) gap per run, so starts fall back below the previous run's end. Returns
    True (relative) when any multi-run code is not monotone, False (absolute) when every
    multi-run code is, None when no code has two runs (undecidable: the conventions agree).
    """
    seen = False
    for code in codes:
        mono = rle_is_monotone(code)
        if mono is False:
            return True
        seen = seen or mono is True
    return False if seen else None


def merge_masks(masks, *, shape: tuple[int, int]) -> np.ndarray:
    """The union (pixel-wise OR) of several uint8 masks; zeros of ``shape`` when none."""
    out = np.zeros(shape, np.uint8)
    for m in masks:
        np.maximum(out, m, out=out)
    return out


def mask_output(mask: np.ndarray, box) -> "torch.Tensor":  # noqa: F821
    """The sample's ``mask``: uint8 ``(1, size, size)`` through ``box`` (a Letterbox), or at
    source resolution ``(1, H, W)`` when ``box`` is None (a user transform takes over)."""
    import torch  # here, not above: the harmonizers import this module and stay torch-free

    mask = np.asarray(mask, dtype=np.uint8)
    if box is not None:
        mask = box.mask(mask)
    return torch.from_numpy(np.ascontiguousarray(mask)).unsqueeze(0)


def channels_output(masks: np.ndarray, box) -> "torch.Tensor":  # noqa: F821
    """A sample's ``masks``: ``(height, width, C)`` uint8 source masks, one channel per
    structure, as ``(C, size, size)`` through ``box`` (``(C, H, W)`` when ``box`` is None)."""
    import torch

    masks = np.asarray(masks, dtype=np.uint8)
    if box is not None:
        masks = box.mask(masks)
    return torch.from_numpy(np.ascontiguousarray(masks.transpose(2, 0, 1)))
