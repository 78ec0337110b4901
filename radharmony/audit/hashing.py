"""Image fingerprints and the pairs they find.

* :func:`file_digest`: xxHash3-128 of a file's bytes (exact duplicates, any format).
* :func:`phash`: a 256-bit DCT perceptual hash of a decoded image -- the image is area-resized
  to 64 x 64 (whatever its size and aspect), the 16 x 16 lowest 2-D DCT frequencies are kept,
  and each AC coefficient is one bit: above the median of them or not. Resizing, re-encoding
  and gain / offset / mild gamma changes move few bits (the low frequencies and their order
  survive); a left-right flip negates every odd horizontal frequency and moves about half.
* :func:`near_pairs`: pairs within ``max_distance`` bits, found without comparing all pairs:
  the 256 bits are dealt into 16 bands of 16 bits, rows sharing a band's value exactly are
  candidates (sorted buckets per band), and only candidates are compared. Two hashes ``d`` bits
  apart share at least ``16 - d`` bands when ``d < 16``, and almost always one for ``d`` up to
  about 30 (the bits that move are spread over the bands).
"""

from __future__ import annotations

import cv2
import numpy as np
import pandas as pd
import xxhash

#: the hash: ``SIDE`` x ``SIDE`` resize, ``LOW`` x ``LOW`` lowest frequencies -> LOW**2 bits
SIDE, LOW = 64, 16
BITS = LOW * LOW
#: candidate bands: ``BANDS`` bands of ``BITS // BANDS`` bits, each band a fixed random draw
#: of the bits (neighbouring frequencies are correlated: contiguous bands bucket twice as many
#: unrelated images together)
BANDS = 16
BAND_ORDER = np.random.default_rng(20261203).permutation(BITS)
#: a band value shared by more rows than this is no evidence (a flat region of hash space);
#: its rows are compared through their other bands only
MAX_BUCKET = 4096
#: default near-duplicate threshold in bits (of 256), from the planted-copy benchmark: planted
#: re-encoded / resized / re-windowed copies stay within 22 bits, unrelated images >= 34
MAX_DISTANCE = 26
CHUNK = 1 << 20


def file_digest(path) -> str:
    """xxHash3-128 of the file's bytes, hex (streamed in 1 MiB chunks)."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                return h.hexdigest()
            h.update(block)


def small_image(arr: np.ndarray) -> np.ndarray:
    """``arr`` as float32 ``SIDE`` x ``SIDE`` (area filter): what the hash and checks read."""
    a = arr if arr.dtype in (np.uint8, np.float32) else arr.astype(np.float32)
    if a.shape != (SIDE, SIDE):
        a = cv2.resize(a, (SIDE, SIDE), interpolation=cv2.INTER_AREA)
    return a.astype(np.float32, copy=False)


def phash(small: np.ndarray) -> np.ndarray:
    """The 256-bit hash of a :func:`small_image`, as 32 uint8."""
    coef = cv2.dct(np.ascontiguousarray(small, dtype=np.float32))[:LOW, :LOW].reshape(-1)
    ac = coef[1:]
    return np.packbits(np.append(ac > np.median(ac), False))


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bit distances between rows of two ``(N, 32)`` uint8 arrays."""
    return np.bitwise_count(np.bitwise_xor(a, b)).sum(axis=-1, dtype=np.int64)


def near_pairs(hashes: np.ndarray, *, max_distance: int = MAX_DISTANCE
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, distance)`` with ``i < j`` for rows of ``hashes`` (``(N, 32)`` uint8; rows of
    NaN-free, valid hashes only) within ``max_distance`` bits; sorted by ``(i, j)``."""
    n = len(hashes)
    if n < 2:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    bits = np.unpackbits(hashes, axis=1)[:, BAND_ORDER].reshape(n, BANDS, BITS // BANDS)
    found: list[np.ndarray] = []
    for b in range(BANDS):
        key = np.ascontiguousarray(np.packbits(bits[:, b, :], axis=1)) \
            .view(f">u{BITS // BANDS // 8}").reshape(n).astype(np.int64)
        order = np.argsort(key, kind="stable")
        sk = key[order]
        starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
        sizes = np.diff(np.r_[starts, n])
        for size in np.unique(sizes[(sizes > 1) & (sizes <= MAX_BUCKET)]):
            groups = order[starts[sizes == size][:, None] + np.arange(size)]  # (G, size)
            a, c = np.triu_indices(size, 1)
            i, j = groups[:, a].reshape(-1), groups[:, c].reshape(-1)
            lo, hi = np.minimum(i, j), np.maximum(i, j)
            found.append(lo * n + hi)
    if not found:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    pairs = np.sort(np.concatenate(found))  # a sort, not np.unique's hash table (4x slower)
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]]
    i, j = pairs // n, pairs % n
    d = np.empty(len(pairs), np.int64)
    for k in range(0, len(pairs), CHUNK):
        d[k:k + CHUNK] = hamming(hashes[i[k:k + CHUNK]], hashes[j[k:k + CHUNK]])
    keep = d <= max_distance
    return i[keep], j[keep], d[keep]


def exact_groups(digests: pd.Series) -> list[np.ndarray]:
    """Row positions sharing a digest (groups of two or more; missing digests skipped)."""
    valid = digests.notna().to_numpy()
    pos = np.flatnonzero(valid)
    codes, _ = pd.factorize(digests[valid].to_numpy(dtype=object))
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]]) if len(sc) else np.zeros(0, int)
    ends = np.r_[starts[1:], len(sc)]
    return [pos[order[a:b]] for a, b in zip(starts, ends) if b - a > 1]


__all__ = ["BITS", "MAX_DISTANCE", "exact_groups", "file_digest", "hamming", "near_pairs",
           "phash", "small_image"]
