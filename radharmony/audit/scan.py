"""Reading every image of an audit once: bytes digest, perceptual hash, sanity flags.

Each distinct file is read once (rows of several datasets naming one file share it), on
``workers`` threads (file reads, xxHash and OpenCV's decoders and DCT release the GIL), with a
progress bar.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import RadHarmonyError, shorten
from ..imaging.read import read_image
from .hashing import SIDE, file_digest, phash, small_image
from .sanity import SanityLimits, check

#: files handed to a thread at a time (the progress bar moves per batch)
BATCH = 64


@dataclass
class Scanned:
    """Per distinct file: ``digest`` (hex or None), ``hashes`` ``(F, 32)`` uint8 (zeros where
    unreadable), ``ok`` (decoded), ``height`` / ``width`` (source pixels, 0 when unreadable),
    ``flags`` (per file, ``[(flag, detail), ...]``)."""

    digest: np.ndarray
    hashes: np.ndarray
    ok: np.ndarray
    height: np.ndarray
    width: np.ndarray
    flags: list


def _one(path: str, view, limits: SanityLimits):
    try:
        digest = file_digest(path)
    except OSError as exc:
        return None, None, (0, 0), [("unreadable", shorten(f"{type(exc).__name__}: {exc}", 200))]
    try:
        arr, src = read_image(path, min_side=2 * SIDE)
    except (RadHarmonyError, OSError, ValueError) as exc:
        what = exc.what if isinstance(exc, RadHarmonyError) else f"{type(exc).__name__}: {exc}"
        return digest, None, (0, 0), [("unreadable", shorten(what, 200))]
    small = small_image(arr)
    return digest, phash(small), src, check(small, src, view, limits)


def scan_files(paths: list[str], views: list, *, limits: SanityLimits, workers: int | None,
               progress: bool) -> Scanned:
    """Scan ``paths`` (``views[k]``: the canonical view of file ``k``, for the checks)."""
    n = len(paths)
    workers = max(1, workers if workers else (os.cpu_count() or 1))
    out = Scanned(np.full(n, None, dtype=object), np.zeros((n, 32), np.uint8),
                  np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, np.int64),
                  [[] for _ in range(n)])

    def batch(start: int) -> int:
        for k in range(start, min(start + BATCH, n)):
            digest, h, (height, width), flags = _one(paths[k], views[k], limits)
            out.digest[k], out.height[k], out.width[k], out.flags[k] = digest, height, width, \
                flags
            if h is not None:
                out.hashes[k], out.ok[k] = h, True
        return min(start + BATCH, n) - start

    from tqdm.auto import tqdm

    with tqdm(total=n, desc="auditing images", unit="img", disable=not progress) as bar:
        if workers == 1:
            for start in range(0, n, BATCH):
                bar.update(batch(start))
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="radharmony-audit") as pool:
                for done in pool.map(batch, range(0, n, BATCH)):
                    bar.update(done)
    return out


__all__ = ["Scanned", "scan_files"]
