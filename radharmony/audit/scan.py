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
               progress: bool, skip=None) -> Scanned:
    """Scan ``paths`` (``views[k]``: the canonical view of file ``k``, for the checks) but
    those ``skip`` marks (left empty: no digest, not decoded, no flags)."""
    todo = [k for k in range(len(paths)) if skip is None or not skip[k]]
    n = len(paths)
    workers = max(1, workers if workers else (os.cpu_count() or 1))
    out = Scanned(np.full(n, None, dtype=object), np.zeros((n, 32), np.uint8),
                  np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, np.int64),
                  [[] for _ in range(n)])

    def batch(start: int) -> int:
        for k in todo[start:start + BATCH]:
            digest, h, (height, width), flags = _one(paths[k], views[k], limits)
            out.digest[k], out.height[k], out.width[k], out.flags[k] = digest, height, width, \
                flags
            if h is not None:
                out.hashes[k], out.ok[k] = h, True
        return len(todo[start:start + BATCH])

    from tqdm.auto import tqdm

    with tqdm(total=len(todo), desc="auditing images", unit="img",
              disable=not progress or not todo) as bar:
        if workers == 1:
            for start in range(0, len(todo), BATCH):
                bar.update(batch(start))
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="radharmony-audit") as pool:
                for done in pool.map(batch, range(0, len(todo), BATCH)):
                    bar.update(done)
    return out


def scan_volume_files(out: Scanned, rows: list, *, max_distance: int, progress: bool) -> list:
    """Fingerprint every volume file (``rows[k]``: ``(dataset, index)`` of a row naming file
    ``k``, None for an image) into ``out`` (its voxel digest, ``height`` / ``width``; an
    unreadable volume is flagged), one at a time (a volume is large); returns the near-
    duplicate volume pairs ``[(file a, file b, distance)]``
    (:func:`radharmony.audit.volumes.near_volume_pairs`)."""
    from tqdm.auto import tqdm

    from .volumes import near_volume_pairs, read_print

    prints = [None] * len(rows)
    todo = [k for k, r in enumerate(rows) if r is not None]
    for k in tqdm(todo, desc="auditing volumes", unit="vol", disable=not progress or not todo):
        ds, index = rows[k]
        try:
            prints[k] = read_print(ds, index)
        except (RadHarmonyError, OSError, ValueError) as exc:
            what = exc.what if isinstance(exc, RadHarmonyError) else \
                f"{type(exc).__name__}: {exc}"
            out.flags[k] = [("unreadable", shorten(what, 200))]
            continue
        out.digest[k] = prints[k].digest
        out.height[k], out.width[k] = prints[k].shape[1:]
    return near_volume_pairs(prints, max_distance=max_distance)


__all__ = ["Scanned", "scan_files", "scan_volume_files"]
