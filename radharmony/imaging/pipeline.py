"""The default image pipeline.

``read -> resize the long side to ``size`` (area filter) -> robust intensity window ->
pad symmetrically to a square -> [-1, 1] in the requested dtype``.

Intensity rule: the ``low_percentile`` and ``high_percentile`` (linear interpolation, as
``numpy.percentile``) of the resized image content (padding excluded) map to -1 and 1 and
values outside are clipped; a flat image becomes -1. Padding is -1.

Storage: the windowed image is quantized to ``bits`` (8 by default: 255 steps of 2/255 over
[-1, 1]; 16 gives 65,535 steps) *in the uncached path too*, so a cached sample equals an
uncached one bit for bit. Against the unquantized float pipeline the 8-bit output differs by
at most half a step, 1/255 = 0.0039 (bfloat16 itself rounds values near 1 to steps of
0.0078). 8 bits was chosen on measurement (docs/loading.md, "What is cached, and why uint8"): half
the disk and page-cache footprint of 16 bits, and cached reads that run at memory speed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import cv2
import numpy as np

from ..errors import RadHarmonyError
from .convert import to_tensor
from .geometry import Letterbox
from .read import read_image

STORAGE = {8: np.uint8, 16: np.uint16}


@dataclass(frozen=True)
class DefaultTransform:
    """The built-in, cacheable pipeline; pass an instance as ``transform=`` to change it."""

    size: int = 224
    low_percentile: float = 0.5
    high_percentile: float = 99.5
    bits: int = 8

    def __post_init__(self):
        if self.bits not in STORAGE:
            raise RadHarmonyError("DefaultTransform bits must be 8 or 16",
                                  expected="bits=8 (uint8 storage) or bits=16 (uint16)",
                                  found=repr(self.bits), fix="pass bits=8 or bits=16")
        if not 0 <= self.low_percentile < self.high_percentile <= 100:
            raise RadHarmonyError("DefaultTransform percentiles are out of order",
                                  expected="0 <= low_percentile < high_percentile <= 100",
                                  found=f"{self.low_percentile}, {self.high_percentile}",
                                  fix="pass e.g. low_percentile=0.5, high_percentile=99.5")

    @property
    def levels(self) -> int:
        return (1 << self.bits) - 1

    def params(self) -> dict:
        """Everything that changes the stored array (the cache key includes it)."""
        return {"name": type(self).__name__, **asdict(self),
                "storage": np.dtype(STORAGE[self.bits]).str}

    def encode(self, path) -> tuple[np.ndarray, Letterbox]:
        """Decode ``path`` into the compact ``(size, size)`` quantized form and its geometry."""
        arr, (h, w) = read_image(path, min_side=self.size)
        box = Letterbox.fit(h, w, self.size)
        content = area_resize(arr if arr.dtype != np.float64 else arr.astype(np.float32), box)
        return box.pad(self.window(content), 0), box

    def window(self, content: np.ndarray) -> np.ndarray:
        """Percentile window of ``content`` quantized to ``bits`` (0 = -1, max = 1)."""
        lo, hi = percentiles(content, (self.low_percentile, self.high_percentile))
        dtype = STORAGE[self.bits]
        if not hi > lo:
            return np.zeros(content.shape, dtype)
        scaled = content.astype(np.float32)
        scaled -= np.float32(lo)
        scaled *= np.float32(self.levels / (hi - lo))
        np.clip(scaled, 0, self.levels, out=scaled)
        return np.rint(scaled, out=scaled).astype(dtype)

    #: quantized -> ``(..., 1, H, W)`` in [-1, 1] (:func:`radharmony.imaging.convert.to_tensor`)
    to_tensor = staticmethod(to_tensor)


def area_resize(arr: np.ndarray, box: Letterbox) -> np.ndarray:
    """``arr`` resized to ``box``'s content size with an area (box) filter.

    While the image is at least twice the target, it is halved with OpenCV's bilinear
    resize at exactly 0.5, which averages each 2 x 2 block (a box filter, several times
    faster than a fractional area resize of the full image); the last, < 2x step is an area
    resize. The result differs from a one-step area resize by block-phase rounding only
    (see tests/imaging/test_speedpaths.py).
    """
    while arr.shape[0] >= 2 * box.new_h and arr.shape[1] >= 2 * box.new_w:
        arr = cv2.resize(arr, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_LINEAR)
    return box.resize(arr)


def percentiles(a: np.ndarray, q: tuple[float, float]) -> tuple[float, float]:
    """``numpy.percentile(a, q)`` (linear interpolation between order statistics).

    Unsigned 8/16-bit images take their order statistics from a histogram (one counting pass,
    ~5x faster than a partial sort); other dtypes use one partial sort.
    """
    flat = a.reshape(-1)
    n = flat.size
    pos = [p / 100 * (n - 1) for p in q]
    ranks = sorted({r for p in pos for r in (int(p), min(int(p) + 1, n - 1))})
    if flat.dtype in (np.uint8, np.uint16):
        counts = np.bincount(flat).cumsum()
        values = np.searchsorted(counts, ranks, side="right")
    else:
        values = np.partition(flat, ranks)[ranks]
    stat = {r: float(v) for r, v in zip(ranks, values)}
    out = []
    for p in pos:
        j = int(p)
        a0, a1 = stat[j], stat[min(j + 1, n - 1)]
        out.append(a0 + (a1 - a0) * (p - j))
    return out[0], out[1]
