"""Quantized cache arrays -> image tensors in [-1, 1].

Not part of the stored array (so not of the pipeline version: see :mod:`radharmony.version`):
a change here never invalidates cached images. ``q * 2 / levels - 1`` in float32, then cast to
the dataset's dtype; uint8 goes through a 256-entry table holding exactly those values, or a
compiled kernel (:mod:`radharmony.imaging._jit`, when numba is installed) that computes them.
"""

from __future__ import annotations

import functools
import itertools
import math

import cv2
import numpy as np
import torch

from .. import threads
from . import jit


def to_tensor(q: np.ndarray, dtype: torch.dtype, *, out: torch.Tensor | None = None,
              rows: np.ndarray | None = None, stream: bool | None = None) -> torch.Tensor:
    """Quantized ``(..., H, W)`` uint8/uint16 -> ``(..., 1, H, W)`` in [-1, 1] as ``dtype``.

    Element-wise (``q * 2 / levels - 1`` in float32, then cast), so a batch converted at
    once equals its samples converted one by one. uint8 goes through a 256-entry table
    holding exactly those values (one ``cv2.LUT`` pass, ~2x faster than the arithmetic), or,
    for large batches in bfloat16 or float32 when numba is installed, a compiled kernel that
    computes the same values another ~3x faster (see :func:`accelerated`). ``out``: a
    contiguous ``(..., 1, H, W)`` tensor of ``dtype`` to write into (e.g. in shared memory).
    ``rows``: convert ``q[rows]`` of a ``(N, H, W)`` stack (e.g. a memory-mapped pack),
    image by image straight from ``q``, with no gathered copy in between; a negative row is a
    padding image, -1 throughout (level 0), written in the same pass (a batch of studies'
    image slots: :mod:`radharmony.data.studies`). Either way the work
    is split over ``torch.get_num_threads()`` threads (torch's intra-op knob: 1 inside
    DataLoader workers; ``cv2.LUT`` and the kernels release the GIL). Results do not depend
    on the thread count or the path. ``stream``: whether the kernels may write the output
    past the caches (see :mod:`radharmony.imaging._jit`): None for outputs of at least
    :data:`STREAM_MIN_BYTES`; pass False when the output is read again at once (a per-sample
    transform on the CPU), which then finds it in the caches.
    """
    lut = _lut(dtype) if q.dtype == np.uint8 else None
    if lut is None:  # uint16 storage, or a dtype without a table: the arithmetic itself
        src = q if rows is None else _take(q, rows)
        res = _scale(torch.from_numpy(src.astype(np.float32)), float(np.iinfo(q.dtype).max)) \
            .unsqueeze(-3).to(dtype)
        return res if out is None else out.copy_(res)
    lead = q.shape[:-2] if rows is None else (len(rows),)
    shape = (*lead, 1, *q.shape[-2:])
    into = fits(out, dtype, shape)
    res = out if into else torch.empty(shape, dtype=dtype)
    stack = np.ascontiguousarray(q).reshape(-1, *q.shape[-2:]) if rows is None else q
    index = np.arange(len(stack), dtype=np.int64) if rows is None else \
        np.ascontiguousarray(rows, dtype=np.int64)
    dst = _bytes(res, len(index), q.shape[-2:])
    _levels(stack, index, dtype, lut, dst, stream)
    return res if out is None or into else out.copy_(res)


def _bytes(t: torch.Tensor, n: int, hw: tuple) -> np.ndarray:
    """Contiguous tensor ``t``'s memory as ``(n, H, W)`` of a numpy type of its item size."""
    return t.view(_VIEW[t.element_size()]).numpy().reshape(n, *hw)


def fits(out: torch.Tensor | None, dtype: torch.dtype, shape: tuple) -> bool:
    """Whether the conversion can write straight into ``out``: contiguous, ``dtype``, as
    many values as ``shape``."""
    return out is not None and out.is_contiguous() and out.dtype == dtype and \
        out.numel() == math.prod(shape)


def kernel_target(dtype: torch.dtype, dst: np.ndarray, stream: bool | None) -> tuple | None:
    """``(kernel, out, stream)``: the compiled kernel for ``dtype``, output bytes ``dst`` as
    its ``out``, and whether it writes them past the caches (as ``stream`` says, by size,
    :data:`STREAM_MIN_BYTES`, when None); None when no kernel serves (not installed, or a
    batch too small for one)."""
    kernel = _kernel(dtype) if dst.size >= MIN_KERNEL_PIXELS else None
    if kernel is None:
        return None
    fn, view = kernel
    return fn, dst.view(view), dst.nbytes >= STREAM_MIN_BYTES if stream is None else bool(stream)


def _kernel_work(stack: np.ndarray, rows: np.ndarray, dtype: torch.dtype, dst: np.ndarray,
                 stream: bool | None):
    """``work(a, b)``: the compiled kernel writing levels ``stack[rows[a:b]]`` into
    ``dst[a:b]`` (see :func:`kernel_target`); None when no kernel serves."""
    target = kernel_target(dtype, dst, stream)
    if target is None:
        return None
    fn, out, stream = target
    return lambda a, b: fn(stack, rows[a:b], out[a:b], SCALE, stream)


def _levels(stack: np.ndarray, rows: np.ndarray, dtype: torch.dtype, lut: np.ndarray,
            dst: np.ndarray, stream: bool | None = None) -> None:
    """``dst[j]`` = the values of levels ``stack[rows[j]]`` (``dst``: the output's bytes as
    ``lut``'s numpy type), by the kernel for large batches when there is one, else the table;
    split over the process's threads."""
    work = _kernel_work(stack, rows, dtype, dst, stream)
    if work is None:
        work = lambda a, b: [_lut_into(stack, r, lut, d)  # noqa: E731
                             for d, r in zip(dst[a:b], rows[a:b].tolist())]
    threads.split(work, len(rows), dst.size // MIN_PIXELS_PER_THREAD)


def _lut_into(stack: np.ndarray, row: int, lut: np.ndarray, dst: np.ndarray) -> None:
    if row < 0:  # a padding image: level 0
        dst.fill(lut[0])
    elif cv2.LUT(stack[row], lut, dst=dst) is not dst:  # OpenCV allocated its own
        dst[...] = cv2.LUT(stack[row], lut)


def _take(q: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``q[rows]``, level 0 where a row is negative (padding)."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(q) == 0:
        return np.zeros((len(rows), *q.shape[1:]), q.dtype)
    out = np.take(q, np.maximum(rows, 0), axis=0)
    out[rows < 0] = 0
    return out


#: fewer pixels than this per thread are converted in the calling thread (a hand-off costs
#: ~20 us, a 224 x 224 image ~15 us)
MIN_PIXELS_PER_THREAD = 1 << 19
#: conversions of fewer pixels use the table (a single image never loads numba)
MIN_KERNEL_PIXELS = 1 << 18
#: outputs of at least this many bytes are written with non-temporal stores by the kernels
#: (:mod:`radharmony.imaging._jit`): a batch this large does not stay in the caches, and
#: storing past them spares reading every line before it is overwritten (a batch of 64
#: bfloat16 images: from 256 x 256 up)
STREAM_MIN_BYTES = 8 << 20
#: the uint8 step: level q is q * SCALE - 1 (float32), as :func:`_scale` computes it
SCALE = np.float32(2.0 / 255.0)


# -- the compiled kernels (numba, optional) -----------------------------------------------------
def accelerated(dtype: torch.dtype = torch.bfloat16) -> bool:
    """Whether large uint8 batches convert to ``dtype`` through a compiled kernel: numba is
    installed (``pip install radharmony[fast]``), the kernel for ``dtype`` (bfloat16 or
    float32) compiled and gave every one of the 256 levels exactly as the table does, and
    ``RADHARMONY_JIT`` is not ``0``. Otherwise the table converts them (same values). The
    first call per process loads the kernel (~0.6 s; compiling it the first time ~1 s); a
    dataset with a cache directory (and 8-bit storage) makes that call when it is built, so
    forked DataLoader workers inherit the loaded kernel."""
    return _kernel(dtype) is not None


def _kernel(dtype: torch.dtype):
    name = str(dtype).removeprefix("torch.")
    return jit.loaded(("convert", name), lambda: _load_kernel(name, _lut(dtype)))


def _load_kernel(name: str, lut: np.ndarray | None):
    module = jit.kernels("_jit") if lut is not None else None
    if module is None or name not in module.KERNELS:
        return None
    fn, view = module.KERNELS[name]
    compiled = jit.compile_checked(
        fn, lambda kernel: _exact(kernel, view, lut), what=f"{name} conversion kernel",
        differs="its values differ from the table's",
        instead="images are converted through OpenCV's table instead: the same values, about "
                "a third of the speed")
    return None if compiled is None else (compiled, view)


def _exact(kernel, view, lut: np.ndarray) -> bool:
    """Whether ``kernel`` gives each of the 256 levels exactly as ``lut`` holds it, from a
    writable and from a read-only stack (packs are read-only maps: both variants compile),
    with ordinary and with non-temporal stores (into rows on a 64-byte boundary, as the
    latter need)."""
    for writable, stream in itertools.product((True, False), (False, True)):
        src = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
        src.flags.writeable = writable
        got = _aligned((2, 16, 16), view)
        kernel(src, np.array([0, -1], np.int64), got, SCALE, stream)  # a level, a padding
        if not gives_table(got, lut):
            return False
    return True


def gives_table(got: np.ndarray, lut: np.ndarray) -> bool:
    """Whether ``got`` (two 16 x 16 outputs) holds the 256 levels as ``lut`` does, then a
    padding image (level 0 throughout): what an exactness check converted."""
    return np.array_equal(got[0].reshape(-1).view(lut.dtype), lut) and \
        bool((got[1].reshape(-1).view(lut.dtype) == lut[0]).all())


def _aligned(shape: tuple, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array starting on a 64-byte boundary."""
    n = math.prod(shape) * np.dtype(dtype).itemsize
    raw = np.empty(n + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + n].view(dtype).reshape(shape)


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
