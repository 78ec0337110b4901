"""What a dataset build knows about its image files: resolved paths, file identities, cache keys.

Reading a sample must not pay for path safety and key derivation again and again. A
:class:`FileTable` is made once per dataset build (lazily, row by row, as rows are first read)
and shared by every split, fold and filter of that build:

* **Path safety once per directory.** Each directory of the table is resolved once (one
  ``lstat`` per directory component, remembered for every later row under it, instead of
  ``os.path.realpath`` per file) and checked once to lie inside the image root. The file itself
  is ``lstat``-ed on every read: a symlinked file is resolved and checked through
  :func:`~radharmony.imaging.read.safe_path` each time, so a link pointing outside the root is
  refused. Paths with ``.`` or ``..`` components take the same slow, exact route.
* **Keys once per build.** The cache key of a row is derived once and kept with the file's
  ``(size, mtime, ctime, device, inode)``. Every read costs one ``lstat`` of the resolved
  file; when any of them changed, the key is derived again, so a rewritten image never reads
  a stale cache entry.
* **One file under two patients.** Each row's file identity (device and inode), as it is
  first read or changes, goes to the build's
  :class:`~radharmony.data.shared.SharedImageWatch`, which warns once when rows of two
  patients reach one file (a hard link or an in-root symlink); no extra ``stat``.
* **Pack locations** of every row (which pack, which record), found with one lookup per batch
  and kept until the packs folder changes.

Directories are resolved as they are at the first read of a row under them in each process
(a directory later replaced by a symlink is not noticed; a file replaced by one is).
"""

from __future__ import annotations

import os
import stat as _stat
import threading
from pathlib import Path

import numpy as np

from .shared import SharedImageWatch, file_id
from ..errors import PathSafetyError
from ..imaging.read import safe_path

#: ``pack`` value of a row whose pack location has not been looked up yet
UNKNOWN = -2
#: ``pack`` value of a row that is in no pack (a loose entry, or not cached)
LOOSE = -1


#: deeper paths are resolved by :func:`safe_path` directly (no per-directory memo)
MAX_DEPTH = 64

def _sig(st) -> tuple[int, int, int, int, int]:
    """What a row's key is kept with: size, mtime, ctime and the file's identity (device,
    inode: :func:`~radharmony.data.shared.file_id`)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, *file_id(st))


class FileTable:
    """Per-row file facts of one dataset build (see the module docstring).

    Args:
        roots: the image root of every row (strings).
        rels: every row's ``image_path`` relative to its root.
        watch: told each row's file identity as it is first read or changes (None: nobody).
    """

    def __init__(self, roots: np.ndarray, rels: np.ndarray,
                 watch: SharedImageWatch | None = None):
        n = len(rels)
        self.roots, self.rels = roots, rels
        self.real = np.full(n, None, object)  # resolved file path (str), None until first read
        self.linked = np.zeros(n, bool)  # the file itself is a symlink: resolved on every read
        self.sig = np.zeros((n, 5), np.int64)  # size, mtime_ns, ctime_ns, device, inode
        self.key = np.full(n, None, object)  # cache key (hex), None until first derived
        self.pack = np.full(n, UNKNOWN, np.int64)  # index into pack_names, LOOSE or UNKNOWN
        self.row = np.zeros(n, np.int64)  # record within that pack
        self.confirmed = np.zeros(n, bool)  # known to be cached (loose or packed)
        self.pack_names: list[str] = []
        self.packs_mtime: int | None = None
        self._dirs: dict[tuple[str, str], str | None] = {}  # (root, reldir) -> real dir
        self._bases: dict[str, str] = {}
        self.watch = watch
        self.lock = threading.Lock()

    def __getstate__(self):
        return {**self.__dict__, "lock": None}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.rels)

    # -- path safety --------------------------------------------------------------------------
    def _base(self, root: str) -> str:
        base = self._bases.get(root)
        if base is None:
            base = self._bases[root] = os.path.realpath(root)
        return base

    def _dir(self, root: str, d: str) -> str | None:
        """The real path of directory ``d`` (relative to ``root``), None when outside it."""
        hit = self._dirs.get((root, d), False)
        if hit is not False:
            return hit
        base = self._base(root)
        if not d:
            real: str | None = base
        else:
            parent, name = os.path.split(d)
            preal = self._dir(root, parent)
            if preal is None:
                real = None
            else:
                cand = os.path.join(preal, name)
                try:
                    linked = _stat.S_ISLNK(os.lstat(cand).st_mode)
                except OSError:
                    linked = False  # absent: the file read reports it
                real = os.path.realpath(cand) if linked else cand
                if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):
                    real = None
        self._dirs[root, d] = real
        return real

    def resolve(self, i: int) -> str:
        """Row ``i``'s resolved file path (refusing paths outside its root)."""
        real = self.real[i]
        if real is not None:
            return real
        root, rel = str(self.roots[i]), self.rels[i]
        d, name = os.path.split(rel) if isinstance(rel, str) else ("", "")
        parts = d.split("/") if d else []
        if not isinstance(rel, str) or not name or "\x00" in rel or os.path.isabs(rel) or \
                name in (".", "..") or "." in parts or ".." in parts or "" in parts or \
                len(parts) > MAX_DEPTH or os.sep != "/" and os.sep in rel:
            real = str(safe_path(root, rel))  # refuses, or resolves exactly
        else:
            rdir = self._dir(root, d)
            real = str(safe_path(root, rel)) if rdir is None else os.path.join(rdir, name)
        self.real[i] = real
        return real

    # -- identity and keys --------------------------------------------------------------------
    def identify(self, i: int, key_of) -> tuple[str, str]:
        """``(resolved path, cache key)`` of row ``i`` after one ``lstat``; ``key_of(path, st)``
        derives a key, called only when the file's identity changed since the last read.
        Raises FileNotFoundError for an absent file and PathSafetyError for an unsafe one."""
        real = self.resolve(i)
        st = os.lstat(real)
        if _stat.S_ISLNK(st.st_mode) or self.linked[i]:
            self.linked[i] = True
            target = str(safe_path(self.roots[i], self.rels[i]))  # resolved and checked
            st = os.stat(target)
        else:
            target = real
        sig = _sig(st)
        key = self.key[i]
        if key is None or self.linked[i] or tuple(self.sig[i]) != sig:
            if self.watch is not None and (key is None or tuple(self.sig[i, 3:]) != sig[3:]):
                if key is not None:
                    self.watch.forget(i, tuple(map(int, self.sig[i, 3:])))
                self.watch.note(i, sig[3:], target)
            new = key_of(target, st)
            if new != key:
                self.key[i], self.pack[i], self.confirmed[i] = new, UNKNOWN, False
            self.sig[i] = sig
            key = new
        return target, key

    def identify_many(self, rows: np.ndarray, key_of) -> list[str]:
        """The resolved path of each of ``rows``, as :meth:`identify` gives it, for a batch:
        one ``lstat`` per row and one comparison of the file identities for all of them; only
        rows whose file changed (a file replaced by a symlink has another inode), is a symlink
        or has no key yet go through :meth:`identify`. Raises as :meth:`identify` does (to
        learn which row, call that per row)."""
        reals = [self.resolve(i) for i in rows.tolist()]
        sts = [os.lstat(p) for p in reals]
        sig = np.array([_sig(st) for st in sts], np.int64).reshape(-1, 5)
        redo = (self.sig[rows] != sig).any(1) | self.linked[rows] | \
            np.equal(self.key[rows], None)
        for j in np.flatnonzero(redo).tolist():
            reals[j] = self.identify(int(rows[j]), key_of)[0]
        return reals

    def file(self, i: int) -> Path:
        """Row ``i``'s file as :func:`~radharmony.imaging.read.safe_path` gives it."""
        real = self.resolve(i)
        if self.linked[i] or os.path.islink(real):
            self.linked[i] = True
            return safe_path(self.roots[i], self.rels[i])
        return Path(real)


__all__ = ["FileTable", "LOOSE", "UNKNOWN", "PathSafetyError"]
