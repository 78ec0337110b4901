"""Writing files safely: every cache and saved file goes to a temporary name and is renamed."""

from __future__ import annotations

import os
import struct
import tempfile
import time
from pathlib import Path
from typing import Callable

#: the fixed head of radharmony's binary files: 8-byte magic, length of the JSON header
HEAD = struct.Struct("<8sI")
#: prefix of temporary files; a writer killed mid-write leaves only such a file
TMP_PREFIX = ".tmp-"
#: a temporary file older than this (seconds) belongs to a killed writer: writers finish an
#: entry in milliseconds and the largest pack in minutes
STALE_TMP_SECONDS = 3600


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (True when it exists but is not ours to
    signal): a lock's holder, a worker whose memory is still mapped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep_stale_tmp(folders, *, older_than: float = STALE_TMP_SECONDS) -> int:
    """Remove ``TMP_PREFIX`` files older than ``older_than`` seconds directly inside each of
    ``folders`` (a killed writer's leftovers; a live writer's file is younger). Returns how
    many were removed; unreadable folders and read-only file systems are skipped."""
    limit, removed = time.time() - older_than, 0
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    if not entry.name.startswith(TMP_PREFIX):
                        continue
                    try:
                        if entry.is_file(follow_symlinks=False) and \
                                entry.stat(follow_symlinks=False).st_mtime < limit:
                            os.unlink(entry.path)
                            removed += 1
                    except OSError:
                        pass
        except OSError:
            pass
    return removed


def file_identity(path: str | os.PathLike, st: os.stat_result | None = None) -> list:
    """What identifies a file's current content without reading it: its resolved path, size,
    modification time, and the change time and inode that ``os.utime`` cannot set back (a file
    rewritten in place or replaced by rename, as ``rsync -a`` and ``tar -x`` do, changes them
    even when its size and modification time are restored)."""
    st = os.stat(path) if st is None else st
    return [os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def atomic_write(path: Path, write: Callable) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path`` and rename it into place."""
    for attempt in (0, 1, 2):  # the folder is made when missing (a concurrent pack() may
        try:                   # remove an emptied folder in between)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TMP_PREFIX, suffix=path.suffix)
            break
        except FileNotFoundError:
            if attempt == 2:
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
