"""Volume fingerprints and the duplicate pairs they find, across volume datasets.

A radiograph is one picture; a volume re-saved, cropped by a few slices or resampled to
another spacing is the same scan with other voxels. Each volume is read once (its canonical
array, through the dataset's volume cache when it has one) and gets:

* an **exact** digest: xxHash3-128 of its canonical voxels, shape and affine (rounded to
  1e-4 mm): the same scan re-saved in another file or format (``.nii`` <-> ``.nii.gz``, a
  header edit, DICOM -> NIfTI without resampling) has the same digest;
* a **near** fingerprint in world space: the volume is sampled every ``SLAB_MM`` of world
  height at fixed heights (slab ``n``'s centre, ``(n + 0.5) * SLAB_MM`` in LPS mm, so two
  volumes of one scan share slab numbers whatever their grid): the axial plane there,
  interpolated between the two nearest slices, is area-resized to 64 x 64 over the volume's
  in-plane field of view and given the radiographs' 256-bit perceptual hash
  (:func:`radharmony.audit.hashing.phash`). Cropping a few slices drops an end slab;
  resampling changes every slice but hardly the plane at a given height.

Two volumes are near duplicates when they share at least :data:`MIN_COMMON` slab heights and
at least :data:`MIN_SHARE` of their common slabs hash within ``max_distance`` bits; the pair's
distance is the median over the common slabs. Candidate slabs are found with
:func:`~radharmony.audit.hashing.near_pairs` (banded, not all pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xxhash

from .hashing import MAX_DISTANCE, hamming, near_pairs, phash, small_image

#: the slab thickness of the fingerprint (mm of world height)
SLAB_MM = 10.0
#: slab heights two volumes must share to be compared
MIN_COMMON = 3
#: share of the common slabs whose hashes must agree
MIN_SHARE = 0.75


@dataclass
class VolumePrint:
    """One volume's fingerprint: ``digest`` (exact), ``slabs`` (slab numbers, ascending),
    ``hashes`` (``(len(slabs), 32)`` uint8), ``shape`` ``(D, H, W)``."""

    digest: str
    slabs: np.ndarray
    hashes: np.ndarray
    shape: tuple


def voxel_digest(array: np.ndarray, affine: np.ndarray) -> str:
    """xxHash3-128 of the voxels, the shape, the dtype and the affine (1e-4 mm)."""
    h = xxhash.xxh3_128()
    h.update(repr((tuple(array.shape), str(array.dtype),
                   np.round(np.asarray(affine, np.float64), 4).tolist())).encode())
    h.update(np.ascontiguousarray(array).data)
    return h.hexdigest()


def fingerprint(array: np.ndarray, affine) -> VolumePrint:
    """The :class:`VolumePrint` of a canonical ``(D, H, W)`` volume with its LPS ``affine``."""
    affine = np.asarray(affine, np.float64)
    depth, height, width = array.shape
    centre = np.array([0.0, (height - 1) / 2, (width - 1) / 2, 1.0])
    z0, step = affine[2] @ centre, affine[2, 0]  # world height of slice 0, and per slice
    if depth < 2 or abs(step) < 1e-6:
        slabs = np.zeros(0, np.int64)
    else:
        top, bottom = sorted((z0, z0 + step * (depth - 1)))
        slabs = np.arange(np.ceil(top / SLAB_MM - 0.5), np.floor(bottom / SLAB_MM - 0.5) + 1,
                          dtype=np.int64)
    hashes = np.zeros((len(slabs), 32), np.uint8)
    for k, s in enumerate(slabs):  # the axial plane at the slab's centre height, interpolated
        at = min(max(((s + 0.5) * SLAB_MM - z0) / step, 0.0), depth - 1.0)
        lo = min(int(np.floor(at)), depth - 2)
        t = np.float32(at - lo)
        plane = array[lo].astype(np.float32) * (1 - t) + array[lo + 1].astype(np.float32) * t
        hashes[k] = phash(small_image(plane))
    return VolumePrint(voxel_digest(array, affine), slabs, hashes,
                       tuple(int(n) for n in array.shape))


def near_volume_pairs(prints: list[VolumePrint | None], *, max_distance: int = MAX_DISTANCE,
                      min_common: int = MIN_COMMON, min_share: float = MIN_SHARE
                      ) -> list[tuple[int, int, int]]:
    """``[(i, j, distance)]``, ``i < j``, of near-duplicate volumes among ``prints`` (None:
    unreadable, skipped); see the module docs."""
    owner = np.concatenate([np.full(len(p.slabs), k) for k, p in enumerate(prints)
                            if p is not None] or [np.zeros(0, np.int64)]).astype(np.int64)
    if len(owner) < 2:
        return []
    slabs = np.concatenate([p.slabs for p in prints if p is not None])
    hashes = np.concatenate([p.hashes for p in prints if p is not None])
    a, b, _ = near_pairs(hashes, max_distance=max_distance)
    keep = (slabs[a] == slabs[b]) & (owner[a] != owner[b])
    candidates = sorted({(int(min(x, y)), int(max(x, y)))
                         for x, y in zip(owner[a][keep], owner[b][keep])})
    out = []
    for i, j in candidates:
        pi, pj = prints[i], prints[j]
        common, ki, kj = np.intersect1d(pi.slabs, pj.slabs, return_indices=True)
        if len(common) < min_common:
            continue
        d = hamming(pi.hashes[ki], pj.hashes[kj])
        if (d <= max_distance).mean() >= min_share:
            out.append((i, j, int(np.median(d))))
    return out


def read_print(dataset, index: int) -> VolumePrint:
    """The fingerprint of row ``index`` of a volume dataset: its canonical volume, through
    the dataset's volume cache when it has one."""
    inputs, load, params = dataset.job(index)
    cache = getattr(dataset, "volume_cache", None)
    volume = cache.get(inputs, params, load) if cache is not None else load()
    return fingerprint(volume.array, volume.in_space("LPS").affine)


__all__ = ["MIN_COMMON", "MIN_SHARE", "SLAB_MM", "VolumePrint", "fingerprint",
           "near_volume_pairs", "read_print", "voxel_digest"]
