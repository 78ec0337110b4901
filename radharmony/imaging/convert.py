"""Quantized cache arrays -> image tensors in [-1, 1].

Not part of the stored array (so not of the pipeline version: see :mod:`radharmony.version`):
a change here never invalidates cached images. ``q * 2 / levels - 1`` in float32, then cast to
the dataset's dtype; uint8 goes through a 256-entry table holding exactly those values.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np
import torch

from .. import threads


def to_tensor(q: np.ndarray, dtype: torch.dtype, *, out: torch.Tensor | None = None,
              rows: np.ndarray | None = None) -> torch.Tensor:
    """Quantized ``(..., H, W)`` uint8/uint16 -> ``(..., 1, H, W)`` in [-1, 1] as ``dtype``.

    Element-wise (``q * 2 / levels - 1`` in float32, then cast), so a batch converted at
    once equals its samples converted one by one. uint8 goes through a 256-entry table
    holding exactly those values (one ``cv2.LUT`` pass, ~2x faster). ``out``: a contiguous
    ``(..., 1, H, W)`` tensor of ``dtype`` to write into (e.g. in shared memory).
    ``rows``: convert ``q[rows]`` of a ``(N, H, W)`` stack (e.g. a memory-mapped pack),
    image by image straight from ``q``, with no gathered copy in between, split over
    ``torch.get_num_threads()`` threads (torch's intra-op knob: 1 inside DataLoader workers;
    ``cv2.LUT`` releases the GIL). Results do not depend on the thread count.
    """
    lut = _lut(dtype) if q.dtype == np.uint8 else None
    into = out is not None and out.is_contiguous() and out.dtype == dtype
    if rows is not None:
        if lut is None or not into:
            return to_tensor(np.take(q, rows, axis=0), dtype, out=out)
        dst = out.view(_VIEW[out.element_size()]).numpy().reshape(len(rows), *q.shape[1:])
        pixels = len(rows) * (q[0].size if len(q) else 0)
        threads.split(lambda a, b: [_lut_into(q[r], lut, d) for d, r in zip(dst[a:b], rows[a:b])],
                      len(rows), pixels // MIN_PIXELS_PER_THREAD)
        return out
    if lut is not None and q.size:
        src = np.ascontiguousarray(q).reshape(-1, q.shape[-1])
        if into:
            _lut_into(src, lut, out.view(_VIEW[out.element_size()]).numpy().reshape(src.shape))
            return out
        res = cv2.LUT(src, lut)
        res = torch.from_numpy(res.reshape(q.shape)).view(dtype).unsqueeze(-3)
    else:
        res = _scale(torch.from_numpy(q.astype(np.float32)), float(np.iinfo(q.dtype).max)) \
            .unsqueeze(-3).to(dtype)
    return res if out is None else out.copy_(res)


def _lut_into(src: np.ndarray, lut: np.ndarray, dst: np.ndarray) -> None:
    if cv2.LUT(src, lut, dst=dst) is not dst:  # OpenCV allocated its own
        dst[...] = cv2.LUT(src, lut)


#: fewer pixels than this per thread are converted in the calling thread (a hand-off costs
#: ~20 us, a 224 x 224 image ~15 us)
MIN_PIXELS_PER_THREAD = 1 << 19


def _scale(t: torch.Tensor, levels: float) -> torch.Tensor:
    return t.mul_(2.0 / levels).sub_(1.0)


@functools.lru_cache(maxsize=None)
def _lut(dtype: torch.dtype) -> np.ndarray | None:
    """The 256 uint8 levels as ``dtype``, viewed as a numpy type ``cv2.LUT`` accepts."""
    if not dtype.is_floating_point:
        return None
    values = _scale(torch.arange(256, dtype=torch.float32), 255.0).to(dtype)
    view = _VIEW.get(values.element_size())
    return None if view is None else values.view(view).numpy()


#: numpy-compatible views of 2-, 4- and 8-byte tensors for ``cv2.LUT``
_VIEW = {2: torch.int16, 4: torch.float32, 8: torch.float64}
