"""The lock file that lets one process at a time build a pack (:mod:`radharmony.data.batches`):
created with ``O_EXCL``, holding ``host pid``; a lock left by a killed process is taken over
once that process is gone (same host) or after :data:`STALE_LOCK_SECONDS`."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path

from ..files import process_alive

#: a pack lock older than this is taken over even when its holder cannot be checked
STALE_LOCK_SECONDS = 3600.0


def _stale(path: Path, max_age: float) -> bool:
    try:
        host, pid = path.read_text().split()[:2]
        age = time.time() - path.stat().st_mtime
    except (OSError, ValueError):
        return False  # being written or just removed: not ours to judge
    if host == socket.gethostname() and pid.isdigit() and not process_alive(int(pid)):
        return True
    return age > max_age


@contextlib.contextmanager
def exclusive(path: Path, *, max_age: float = STALE_LOCK_SECONDS):
    """Yield True while holding the lock file ``path`` (created with ``O_EXCL``), or False
    at once when another live process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = None
    for attempt in (0, 1):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            if attempt or not _stale(path, max_age):
                break
            path.unlink(missing_ok=True)
    if fd is None:
        yield False
        return
    try:
        os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
        os.close(fd)
        yield True
    finally:
        path.unlink(missing_ok=True)


def lock_path(cache) -> Path:
    return cache.images / "packs" / f".lock-{cache.prefix}"
