"""Compiled intensity map for :mod:`radharmony.volumes.presets` (numba; imported only when
numba is installed): a cached int16 volume to the model's float32 input, ``x * scale +
offset`` then clipped, in one pass over the slices ``[first, stop)`` -- each value read once,
each output written once (NumPy's three steps make three passes). Float32 throughout, no
fused multiply-add: the same bits as :meth:`IntensityMap._numpy_steps`, which the loader
checks on every int16 value before using it.
"""

from __future__ import annotations

import numpy as np


def intensity_map(src, out, scale, offset, lo, hi, clip, first, stop):
    n = src.shape[1] * src.shape[2]
    for k in range(first, stop):
        values = src[k].ravel()
        target = out[k].ravel()
        for i in range(n):
            x = np.float32(values[i]) * scale + offset
            if clip:
                x = min(max(x, lo), hi)
            target[i] = x
