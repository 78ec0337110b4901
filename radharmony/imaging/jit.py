"""Loading radharmony's optional compiled kernels (numba: ``pip install radharmony[fast]``).

A kernel is compiled once per process -- from numba's disk cache beside the package when that
folder can be written, else in memory -- and used only after it passed its own exactness check
against the path it replaces. A kernel that fails to compile or differs warns once and is not
used; that path serves instead, with the same results. ``RADHARMONY_JIT=0`` turns every kernel
off. What a caller loaded is kept once per process (:func:`loaded`), for
:mod:`radharmony.imaging.convert` and :mod:`radharmony.imaging.png` alike.
"""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from typing import Callable, Hashable

from .. import threads

_loaded: dict = {}  # key -> the loaded kernel, or None: once per process
_lock = threading.Lock()
threads.unheld_after_fork(globals(), "_lock")


def loaded(key: Hashable, load: Callable):
    """What ``load()`` gave for ``key``, called once per process (one thread loads; the
    others wait for it). A forked child inherits what its parent had loaded."""
    got = _loaded.get(key, False)
    if got is False:
        with _lock:
            got = _loaded.get(key, False)
            if got is False:
                got = _loaded[key] = load()
    return got


def enabled() -> bool:
    """False when ``RADHARMONY_JIT`` is ``0``."""
    return os.environ.get("RADHARMONY_JIT", "1").strip() != "0"


def kernels(module: str):
    """The kernel module ``radharmony.imaging.<module>``, or None when kernels are switched off
    or numba is not installed (or does not import here)."""
    if not enabled():
        return None
    try:
        import numba  # noqa: F401 - the kernel modules need it

        return importlib.import_module(f"{__package__}.{module}")
    except Exception:  # noqa: BLE001 - not installed, or broken here: the fallback serves
        return None


def compile_checked(fn: Callable, check: Callable[[Callable], bool], *, what: str,
                    differs: str, instead: str):
    """``fn`` (a function, or a tuple of them) compiled by numba when ``check(compiled)`` is
    true; else None, with one warning naming ``what`` and what serves ``instead``."""
    import numba

    failure = None
    for cache in (True, False):  # a package folder that cannot be written: no disk cache
        try:
            njit = numba.njit(nogil=True, boundscheck=False, cache=cache)
            compiled = tuple(map(njit, fn)) if isinstance(fn, tuple) else njit(fn)
            if check(compiled):
                return compiled
            failure = differs
            break
        except Exception as exc:  # noqa: BLE001 - any failure falls back
            failure = f"{type(exc).__name__}: {exc}"
    warnings.warn(f"radharmony's compiled {what} is not used ({failure}); {instead}. Set "
                  "RADHARMONY_JIT=0 to skip the kernel.", RuntimeWarning, stacklevel=5)
    return None
