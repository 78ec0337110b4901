"""The process's helper threads, for work that releases the GIL (OpenCV, file reads).

How many: ``torch.get_num_threads()``, torch's intra-op knob. Inside DataLoader workers
PyTorch sets it to 1, so a worker works on its own core alone; ``torch.set_num_threads(1)``
gives the same in the main process. A process that has not imported torch (``radharmony
harmonize`` reading image headers) has set no knob: it gets what torch would start with,
``OMP_NUM_THREADS`` or the machine's cores. A forked child makes its own threads (its parent's
are gone).
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

#: threads named so run the work they are handed in place (:func:`wanted` is 1 in them): these
#: helpers, and read-ahead threads that already are the parallelism (``CachedLoader``'s)
PREFIX = "radharmony-helper"
_pool: tuple[int, ThreadPoolExecutor] | None = None
_lock = threading.Lock()


def unheld_after_fork(namespace: dict, *names: str) -> None:
    """Give a forked child new, unheld locks under ``names`` in ``namespace`` (a module's
    ``globals()``): a thread of the parent may have held one when it forked."""
    def renew() -> None:
        for name in names:
            namespace[name] = threading.Lock()

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=renew)


unheld_after_fork(globals(), "_lock")


def wanted(n: int) -> int:
    """How many threads ``n`` independent pieces of work get (at least 1; 1 inside one of
    these threads, whose work never waits on the others)."""
    if threading.current_thread().name.startswith(PREFIX):
        return 1
    return max(1, min(_knob(), n))


def _knob() -> int:
    """torch's intra-op thread count; without torch imported, the count it would start with."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.get_num_threads()
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return int(omp) if omp.isdigit() and int(omp) > 0 else (os.cpu_count() or 1)


def pool(n: int) -> ThreadPoolExecutor:
    """This process's executor, with at least ``n`` threads."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1]._max_workers < n:
            if _pool is not None and _pool[0] == os.getpid():
                _pool[1].shutdown(wait=False)
            _pool = (os.getpid(), ThreadPoolExecutor(n, thread_name_prefix=PREFIX))
        return _pool[1]


def split(work: Callable[[int, int], None], n: int, parts: int) -> None:
    """``work(a, b)`` over ``[0, n)`` in up to ``parts`` contiguous ranges (no more than
    :func:`wanted` gives), the first in the calling thread; raises what a range raised (the
    first range's first)."""
    parts = max(1, min(parts, n, wanted(n)))
    if parts == 1:
        work(0, n)
        return
    bounds = [n * k // parts for k in range(parts + 1)]
    futures = [pool(parts - 1).submit(work, a, b) for a, b in zip(bounds[1:-1], bounds[2:])]
    try:
        work(bounds[0], bounds[1])
    finally:
        for f in futures:
            f.exception()  # wait for all, whatever happened
    for f in futures:
        f.result()


def each(fn: Callable, items: Sequence) -> list:
    """``fn(item)`` for every item, over :func:`wanted` threads (one at a time each, so
    uneven work balances), in order: each result, or the exception it raised."""
    out: list = [None] * len(items)

    def one(k: int) -> None:
        try:
            out[k] = fn(items[k])
        except Exception as exc:  # handed back to the caller, which decides
            out[k] = _Raised(exc)

    n = wanted(len(items))
    if n == 1:
        for k in range(len(items)):
            one(k)
    else:
        list(pool(n).map(one, range(len(items))))
    return out


class _Raised:
    __slots__ = ("exc",)

    def __init__(self, exc: Exception):
        self.exc = exc


def raised(value) -> Exception | None:
    """The exception :func:`each` got for an item, or None for a result."""
    return value.exc if isinstance(value, _Raised) else None
