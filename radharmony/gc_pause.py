"""The cyclic garbage collector paused for a step that makes millions of objects.

Building a table (a metadata file's rows, a cached table's nested cells, a folder's listing)
or a mixture's records (millions of small lists and strings that die with their chunk) makes
objects that hold no reference cycles; their allocation would otherwise set off full
collections, each walking every live object (seconds per table or chunk in all).
:func:`paused_gc` keeps it off for one step and restores what it found (a caller that has
paused it already keeps it paused).

:func:`release_memory` hands what such a step freed back to the system: a process that
drops a large table (a mixture build's source, once its records' units are made) otherwise
keeps its pages -- Arrow's allocator and the C heap keep freed pages for reuse -- and a
build's processes would each hold their largest step's memory to the end.
"""

from __future__ import annotations

import ctypes
import gc
from contextlib import contextmanager
from functools import lru_cache


@contextmanager
def paused_gc():
    """The garbage collector off inside the block, as it was after it."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def release_memory() -> None:
    """Collect once (the collector may be paused: :func:`paused_gc`), then return the
    freed memory to the system: the unused pages of Arrow's default memory pool and the
    C heap's free pages (glibc's ``malloc_trim``; nothing where the C library has none)."""
    gc.collect()
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim`` (None off glibc: musl, macOS, Windows)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


__all__ = ["paused_gc", "release_memory"]
