"""The image cache: preprocessed images keyed by file identity and pipeline.

An entry is keyed by the SHA-256 of what identifies the image file and everything that changes
its bytes: the image's resolved path, size, modification time, change time and inode (the last
two cannot be set back with ``os.utime``, so a file rewritten with its size and mtime restored
still gets a new key), the pipeline's parameters (storage dtype included), the radharmony
version, the pipeline version and the digest of the pipeline's installed code
(:func:`radharmony.version.pipeline_digest`: an edited pipeline in an editable install or a
fork misses the cache). These are *identity* keys, not content hashes: a copy of the images at another path
gets new keys. The output dtype is not part of the key: it is applied after the cache, so a
float32 and a bfloat16 dataset share entries, as do every split and fold (keys name files, not
rows).

``key="content"`` keys entries by a hash of the image file's bytes instead (xxHash XXH3-128
when :mod:`xxhash` is installed, else BLAKE2b): immune to anything that preserves size and
timestamps, shared by copies of the images at another path, at the price of reading every
file in full to compute its key (a cached epoch then reads each image file once more).

Entries live in two forms under ``<root>/images/``:

* *loose entries* ``<k[:2]>/<key>.rhc`` -- written by whichever process or DataLoader worker
  decodes the image first: a fixed header, a JSON description, the raw array and a CRC-32,
  written to a temporary file and renamed into place (atomic on POSIX; a writer killed
  mid-write leaves only a ``.tmp-*`` file that is never read). Concurrent writers of one key
  write identical bytes, so the last rename wins harmlessly.
* *packs* ``packs/<params>-<id>.rhp`` (:mod:`radharmony.imaging.packs`) -- many entries
  consolidated into one memory-mapped file that a batch reader slices with one ``numpy.take``
  per batch. Once a pack is in place the loose entries it holds are removed, so each image is
  stored once. A damaged record is bypassed by a rebuilt loose entry; a truncated pack is
  removed.

Every read is checked; an entry that fails is reported with a warning, dropped and rebuilt
from the image. Nothing is unpickled. A cache that cannot be written (read-only ``cache_dir``,
a full disk) degrades to uncached reads with one warning. Opening a cache removes temporary
files older than :data:`radharmony.files.STALE_TMP_SECONDS` (a killed writer's leftovers).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import threading
import warnings
import zlib
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ..errors import check_choice
from ..files import HEAD as _HEAD
from ..files import atomic_write, sweep_stale_tmp
from .packs import Pack, warn_bad_record, write_pack
from .read import check_regular
from ..version import PIPELINE_VERSION, __version__, pipeline_digest

#: how image cache entries are keyed: by file identity (one ``stat``) or by content (a hash of
#: the file's bytes)
KEY_MODES = ("identity", "content")

MAGIC = b"RHCACHE2"
_TAIL = struct.Struct("<I")  # crc32 of JSON + payload
_PACKS_LOCK = threading.Lock()  # opening packs: one thread at a time


class ImageCache:
    """Stores ``(array, info)`` pairs under ``root`` keyed by file identity and ``params``.

    ``info`` is a flat dict of integers (e.g. the fields of
    :class:`~radharmony.imaging.geometry.Letterbox`).
    """

    def __init__(self, root: str | os.PathLike, params: dict, *, key: str = "identity"):
        self.root = Path(root)
        self.key_mode = check_choice("cache_key", key, KEY_MODES)
        self.salt = json.dumps({"params": params, "version": __version__,
                                "pipeline": PIPELINE_VERSION, "code": pipeline_digest(),
                                "key": key}, sort_keys=True)
        self.prefix = hashlib.sha256(self.salt.encode()).hexdigest()[:16]
        self.images = self.root / "images"
        self.opened_packs: dict[str, Pack] = {}
        self._bad_packs: set[str] = set()
        self._scanned = False
        self.writable = True  # False after a write failed (read-only, disk full): uncached
        self.sweep()

    def sweep(self) -> int:
        """Remove stale temporary files (killed writers) under ``images/``; returns how many."""
        try:
            folders = [e.path for e in os.scandir(self.images) if e.is_dir()]
        except OSError:
            return 0
        return sweep_stale_tmp([self.images, *folders])

    def __getstate__(self):  # memory maps are re-opened in each worker process
        return {**self.__dict__, "opened_packs": {}, "_scanned": False, "_bad_packs": set()}

    # -- keys -------------------------------------------------------------------------------
    def key(self, path: str | os.PathLike, *, resolved: bool = False,
            st: os.stat_result | None = None) -> str:
        """The key of the image at ``path`` (``resolved``: already an absolute real path;
        ``st``: its ``os.stat`` result, when the caller has it). Anything but a regular file
        raises :class:`~radharmony.errors.ImageReadError`."""
        st = check_regular(Path(path)) if st is None or not stat.S_ISREG(st.st_mode) else st
        if self.key_mode == "content":
            return self._content_key(path)
        real = os.fspath(path) if resolved else os.path.realpath(path)
        ident = f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}" \
            f"\0{self.salt}"
        return hashlib.sha256(ident.encode()).hexdigest()

    def _content_key(self, path) -> str:
        try:
            import xxhash

            h = xxhash.xxh3_128()
        except ImportError:  # pragma: no cover - xxhash is a dependency
            h = hashlib.blake2b(digest_size=16)
        try:
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
        except OSError:
            check_regular(Path(path))  # the standard error for a file gone meanwhile
            raise
        ident = f"content\0{type(h).__name__}\0{h.hexdigest()}\0{self.salt}"
        return hashlib.sha256(ident.encode()).hexdigest()

    def entry_file(self, key: str) -> Path:
        return self.images / key[:2] / f"{key}.rhc"

    # -- loose entries ------------------------------------------------------------------------
    def load_entry(self, key: str) -> tuple[np.ndarray, dict] | None:
        """The loose entry for ``key`` (no pack lookup), or None when absent or damaged."""
        f = self.entry_file(key)
        try:
            blob = f.read_bytes()
        except FileNotFoundError:
            return None
        try:
            magic, n = _HEAD.unpack_from(blob)
            if magic != MAGIC or len(blob) < _HEAD.size + n + _TAIL.size:
                raise ValueError("bad header or truncated")
            body = memoryview(blob)[_HEAD.size:len(blob) - _TAIL.size]
            if zlib.crc32(body) != _TAIL.unpack_from(blob, len(blob) - _TAIL.size)[0]:
                raise ValueError("checksum mismatch")
            info = json.loads(bytes(body[:n]))
            if info.get("key") != key:
                raise ValueError("entry belongs to another key")
            arr = np.frombuffer(body[n:], dtype=info["dtype"]).reshape(info["shape"])
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            warnings.warn(f"Cache entry {f} failed its check ({exc}); rebuilding it.",
                          RuntimeWarning, stacklevel=3)
            try:
                f.unlink(missing_ok=True)
            except OSError as err:  # read-only cache: the entry stays, and is never served
                self._write_failed(err)
            return None
        return arr, info["info"]

    def store(self, key: str, arr: np.ndarray, info: dict) -> None:
        """Write the loose entry for ``key`` atomically. When the cache cannot be written
        (read-only, disk full), warn once and keep serving uncached; a partial entry is never
        left behind (only a temporary file, removed)."""
        if not self.writable:
            return
        arr = np.ascontiguousarray(arr)
        meta = json.dumps({"key": key, "dtype": arr.dtype.str, "shape": list(arr.shape),
                           "info": info}).encode()
        body = meta + arr.tobytes()
        try:
            atomic_write(self.entry_file(key), lambda fh: fh.write(
                _HEAD.pack(MAGIC, len(meta)) + body + _TAIL.pack(zlib.crc32(body))))
        except OSError as exc:
            self._write_failed(exc)

    def _write_failed(self, exc: OSError) -> None:
        if self.writable:
            self.writable = False
            warnings.warn(f"Image cache {self.images} cannot be written ({type(exc).__name__}: "
                          f"{exc}); images are served uncached (decoded on every read) by this "
                          "process. Free disk space or pass a writable cache_dir.",
                          RuntimeWarning, stacklevel=4)

    # -- packs --------------------------------------------------------------------------------
    def packs(self, *, rescan: bool = False) -> list[Pack]:
        """The packs for these parameters (opened once per process; ``rescan`` finds new ones)."""
        with _PACKS_LOCK:  # a batch's images may be read in several threads
            return self._packs(rescan)

    def _packs(self, rescan: bool) -> list[Pack]:
        if rescan or not self._scanned:
            self._scanned = True
            for f in sorted((self.images / "packs").glob(f"{self.prefix}-*.rhp")):
                if f.name in self.opened_packs or f.name in self._bad_packs:
                    continue
                try:
                    self.opened_packs[f.name] = Pack(f, self.salt)
                except (ValueError, KeyError, TypeError, IndexError, OSError,
                        struct.error) as exc:
                    warnings.warn(f"Cache pack {f} failed its check ({exc}); removing it, its "
                                  "images will be rebuilt.", RuntimeWarning, stacklevel=2)
                    self._bad_packs.add(f.name)
                    try:
                        f.unlink(missing_ok=True)
                    except OSError as err:  # read-only: skipped, never read
                        self._write_failed(err)
        return list(self.opened_packs.values())

    def packs_stamp(self) -> int | None:
        """The packs folder's modification time (ns; None when absent): it changes when a
        pack is added or removed, so a reader lists the folder again only then."""
        try:
            return os.stat(self.images / "packs").st_mtime_ns
        except OSError:
            return None

    def locate(self, keys: Sequence[str], *, rescan: bool = True
               ) -> tuple[list[Pack], np.ndarray, np.ndarray]:
        """``(packs, pack_of, row_of)`` for ``keys``: index into ``packs`` and row, -1 if absent
        (``rescan``: list the packs folder again first, for packs written since)."""
        digests = np.array([bytes.fromhex(k) for k in keys], dtype="S32")
        pack_of = np.full(len(keys), -1, np.int64)
        row_of = np.full(len(keys), -1, np.int64)
        packs = self.packs(rescan=rescan)
        for p, pack in enumerate(packs):
            todo = np.flatnonzero(pack_of < 0)
            if not len(todo):
                break
            rows = pack.rows(digests[todo])
            hit = rows >= 0
            pack_of[todo[hit]], row_of[todo[hit]] = p, rows[hit]
        return packs, pack_of, row_of

    def _load_packed(self, key: str) -> tuple[np.ndarray, dict] | None:
        digest = np.array([bytes.fromhex(key)], dtype="S32")
        for rescan in (False, True):
            for pack in self.packs(rescan=rescan):
                row = int(pack.rows(digest)[0])
                if row >= 0:
                    arr, ok = pack.read(np.array([row]))
                    if ok[0]:
                        return arr[0], pack.info_dict(row)
                    warn_bad_record(pack, row)
                    return None
            if self.entry_file(key).exists():
                return None
        return None

    def load(self, key: str) -> tuple[np.ndarray, dict] | None:
        """The entry for ``key`` (a sound pack record first, then a loose entry), or None when
        absent or damaged (the caller rebuilds and stores it as a loose entry)."""
        return self._load_packed(key) or self.load_entry(key)

    def has(self, key: str) -> bool:
        return self.entry_file(key).exists()

    def pack(self, keys: Iterable[str], build: Callable[[str], tuple[np.ndarray, dict]], *,
             progress: Callable[[Iterable], Iterable] = iter) -> Pack | None:
        """Consolidate the entries of ``keys`` not yet in a pack into one new pack (see
        :func:`radharmony.imaging.packs.write_pack`). A cache that cannot be written warns
        once and returns None (reads stay per image)."""
        if not self.writable:
            return None
        try:
            return write_pack(self, keys, build, progress=progress)
        except OSError as exc:
            self._write_failed(exc)
            return None
