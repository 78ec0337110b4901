"""The garbage collector paused while a mixture's records are made.

A build holds the tables of its sources (millions of objects) while it makes millions of
small lists and strings that hold no reference cycles and die with their chunk; each full
collection the allocations set off walks every live object, seconds per chunk in all.
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
