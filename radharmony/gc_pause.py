"""The cyclic garbage collector paused for a step that makes millions of objects.

Building a table (a metadata file's rows, a cached table's nested cells, a folder's listing)
or a mixture's records (millions of small lists and strings that die with their chunk) makes
objects that hold no reference cycles; their allocation would otherwise set off full
collections, each walking every live object (seconds per table or chunk in all).
:func:`paused_gc` keeps it off for one step and restores what it found (a caller that has
paused it already keeps it paused).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


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


__all__ = ["paused_gc"]
