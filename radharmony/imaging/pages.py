"""A large array's pages mapped ahead of the code that fills it, by a second thread.

On virtual machines a page fault costs about as much as writing the page: populating 236 MB
one fault at a time takes ~0.1 s, a third of inflating a CT volume into it. ``madvise``'s
``MADV_POPULATE_WRITE`` (Linux 5.14+) maps pages writable without writing them; issued a
block at a time from the start by a helper thread, it keeps ahead of a decoder that writes
the array in order, so the decoder finds its pages mapped. Nothing is written: a decoder that
reaches a page first faults it in itself, as without the helper. Elsewhere (another kernel,
another system) the advice is refused and the helper stops.

The helper is one of :mod:`radharmony.threads`' (none where torch's thread count is 1, as in a
DataLoader worker, whose core is its own).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
from concurrent.futures import Future

import numpy as np

from .. import threads

#: bytes mapped per call, from the start (arrays under twice this: no helper)
AHEAD = 8 << 20
#: ``madvise``'s advice to map pages writable without writing them (Linux 5.14+)
POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def map_ahead(array: np.ndarray) -> Future | None:
    """Start mapping the whole pages of C-contiguous ``array``'s memory on a helper thread;
    the future (wait on it before the memory is unmapped, to leave nothing running), or None
    when there is no helper: a small or non-contiguous array, or one thread wanted."""
    if array.nbytes < 2 * AHEAD or not array.flags.c_contiguous or threads.wanted(2) < 2:
        return None
    return threads.pool(1).submit(_map, array.ctypes.data, array.nbytes)


def _map(base: int, size: int) -> None:
    page = mmap.PAGESIZE
    start, stop = -(-base // page) * page, (base + size) // page * page
    for at in range(start, stop, AHEAD):
        if _libc().madvise(at, min(AHEAD, stop - at), POPULATE_WRITE) != 0:
            return


@functools.cache
def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.madvise.restype = ctypes.c_int
    return libc
