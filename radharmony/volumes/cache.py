"""The volume cache: each series' canonical int16 volume stored once, chunked and compressed,
read by memory map; never stale.

An entry is keyed (SHA-256) like the 2-D image cache (:mod:`radharmony.imaging.cache`) keys
an image: the identity of every input file (:func:`radharmony.files.file_identity`: resolved
path, size, modification and change times, inode; a folder counts as every regular file below
it), every parameter of the read (``params``: reader, series, rescale ...), the radharmony
release, this layout's version and the digest of the readers' code
(:func:`radharmony.version.source_digest` of :data:`READER_SOURCES`: any edit to them misses the
cache). The identities are taken again once the loader returned: a file that changed while it
was read is served but not stored, so nothing stale lands in the cache.

Entries are Blosc2 ``.b2nd`` files (the format nnU-Net v2 keeps its preprocessed cases in):
``<root>/volumes/<k[:2]>/<key>.b2nd``, the geometry and provenance in the file's ``vlmeta``;
a preset's output, read whole every epoch, is stored uncompressed beside them (``.raw``,
:mod:`radharmony.volumes.flat_entries`) and read in place.
They are written whole to a temporary file and renamed into place (a killed writer leaves only
a ``.tmp-*`` file, swept after an hour); a file that fails to open or decode is reported,
removed and rebuilt. :data:`CHUNKS`, :data:`BLOCKS`, :data:`CPARAMS` (canonical volumes;
:data:`COMPACT_CPARAMS` with ``compact=True``) were chosen with numbers (``docs/volumes.md``,
``benchmarks/volumes_cache.py``): whole-volume reads and random 128^3 patch reads are both
fast, and a canonical entry is smaller than the source ``.nii.gz``.

``memory_bytes`` adds an in-memory tier: the compressed entries most recently used, up to that
many bytes per process (least recently used dropped first; an entry larger than the budget is
never held). With ``root=None`` the cache lives in memory only.

Example::

    cache = VolumeCache("./cache", memory_bytes=2 << 30)
    volume = cache.get(["ct.nii.gz"], {"reader": "nifti"}, lambda: read_volume("ct.nii.gz"))
    patch = cache.patch(["ct.nii.gz"], {"reader": "nifti"}, load, (10, 40, 40), (128,) * 3)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import RadHarmonyError
from ..files import atomic_write, file_identity, sweep_stale_tmp
from ..version import __version__, source_digest
from . import flat_entries
from .volume import Volume, VolumeSource

EXTRA = "pip install radharmony[volumes]"
#: the entry layout; part of every key
LAYOUT_VERSION = 1
#: the modules whose code decides a canonical volume's voxels and geometry
READER_SOURCES = ("volumes/volume.py", "volumes/geometry.py", "volumes/read.py",
                  "volumes/nifti.py", "volumes/dicom.py", "volumes/npz.py", "volumes/checks.py")
#: chunk and block shapes, (d, h, w), clipped to each volume's shape
CHUNKS = (64, 128, 128)
BLOCKS = (16, 64, 64)
#: canonical volumes (stored once, read whole or by patch): LZ4HC on byte-shuffled int16,
#: about the source .nii.gz's size (0.985x), random 128^3 patches ~2x nnU-Net's reads
CPARAMS = {"codec": "LZ4HC", "clevel": 5, "filter": "SHUFFLE"}
#: canonical volumes with ``compact=True``: bit-shuffled, 0.86x the source .nii.gz (15 % less
#: disk), patch reads ~1.7x slower
COMPACT_CPARAMS = {"codec": "LZ4HC", "clevel": 5, "filter": "BITSHUFFLE"}


class VolumeCacheError(RadHarmonyError, OSError):
    """An input of a cached volume cannot be identified, or a loader broke its contract."""


def require_blosc2():
    """The ``blosc2`` module, or an error naming the extra that installs it."""
    try:
        import blosc2
    except ImportError as exc:
        raise RadHarmonyError("The volume cache needs the 'blosc2' package",
                              expected="blosc2 installed (the radharmony[volumes] extra)",
                              found=f"ImportError: {exc}", fix=EXTRA) from None
    return blosc2


def input_identities(inputs: Sequence[str | os.PathLike]) -> list:
    """The :func:`~radharmony.files.file_identity` of each input; a folder stands for every
    regular file below it, in sorted order. A missing input raises :class:`VolumeCacheError`."""
    out = []
    for path in inputs:
        try:
            if os.path.isdir(path):
                files = sorted(str(p) for p in Path(path).rglob("*") if p.is_file())
                out.append([os.path.realpath(path), [file_identity(f) for f in files]])
            else:
                out.append(file_identity(path))
        except OSError as exc:
            raise VolumeCacheError(f"Input {path} of a cached volume cannot be read",
                                   expected="an existing file or folder",
                                   found=f"{type(exc).__name__}: {exc.strerror or exc}",
                                   fix="check the path (the dataset's root and the table's "
                                       "paths)") from None
    return out


class VolumeCache:
    """Canonical volumes (and preset outputs, :mod:`radharmony.volumes.presets`) under
    ``root`` (None: in memory only), keyed by their inputs' identities and parameters."""

    def __init__(self, root: str | os.PathLike | None = None, *, memory_bytes: int = 0,
                 threads: int = 1, compact: bool = False):
        if root is None and memory_bytes <= 0:
            raise RadHarmonyError("A volume cache needs a folder or a memory budget",
                                  expected="root='./cache' or memory_bytes > 0",
                                  found="root=None, memory_bytes=0",
                                  fix="pass a folder, or memory_bytes=2 << 30 for 2 GiB")
        self.blosc2 = require_blosc2()
        self.root = None if root is None else Path(root)
        self.folder = None if root is None else self.root / "volumes"
        self.memory_bytes, self.threads = int(memory_bytes), int(threads)
        self.cparams = COMPACT_CPARAMS if compact else CPARAMS  # canonical entries
        self._memory: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.writable = self.folder is not None
        if self.folder is not None:
            try:
                folders = [e.path for e in os.scandir(self.folder) if e.is_dir()]
            except OSError:
                folders = []
            sweep_stale_tmp(folders)

    def __getstate__(self):  # workers start with an empty memory tier of their own
        state = {**self.__dict__, "_memory": OrderedDict()}
        del state["_lock"], state["blosc2"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self.blosc2 = require_blosc2()

    # -- keys -------------------------------------------------------------------------------
    def key(self, inputs: Sequence[str | os.PathLike], params: dict, *,
            sources: Sequence[str] = READER_SOURCES) -> str:
        """The key of the volume read from ``inputs`` with ``params`` by the code of
        ``sources`` (paths relative to the package)."""
        return self._key(input_identities(inputs), params, sources)

    def _key(self, identities, params, sources) -> str:
        text = json.dumps({"inputs": identities, "params": params, "version": __version__,
                           "layout": LAYOUT_VERSION, "code": _code_digest(tuple(sources))},
                          sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def entry_file(self, key: str, *, flat: bool = False) -> Path | None:
        suffix = ".raw" if flat else ".b2nd"
        return None if self.folder is None else self.folder / key[:2] / f"{key}{suffix}"

    # -- volumes ----------------------------------------------------------------------------
    def get(self, inputs: Sequence[str | os.PathLike], params: dict,
            load: Callable[[], Volume]) -> Volume:
        """The canonical volume of ``inputs``: from the cache, else ``load()`` (stored)."""
        array, meta = self.fetch(inputs, params, lambda: _volume_entry(load(), inputs))
        return _volume_of(array, meta)

    def patch(self, inputs: Sequence[str | os.PathLike], params: dict,
              load: Callable[[], Volume], start: Sequence[int], size: Sequence[int]
              ) -> np.ndarray:
        """The crop ``[start, start + size)`` (d, h, w) of the cached volume; only the chunks
        it touches are read and decoded."""
        slices = tuple(slice(int(s), int(s) + int(n)) for s, n in zip(start, size))
        return np.ascontiguousarray(self.stored(inputs, params, load)[0][slices])

    def stored(self, inputs: Sequence[str | os.PathLike], params: dict,
               load: Callable[[], Volume]) -> tuple[object, dict]:
        """``(array, meta)`` of the canonical volume of ``inputs`` (``meta``: its ``affine``,
        ``space``, ``source``), stored first when absent. ``array`` is the stored Blosc2 array
        (memory-mapped: indexing it reads and decodes only the chunks the index touches), or
        the volume read whole where nothing could be stored (a read-only cache)."""
        key = self.key(inputs, params)
        stored = self._open(key)
        if stored is None:
            volume = self.get(inputs, params, load)
            stored = self._open(key)
            if stored is None:
                return volume.array, _volume_entry(volume, inputs)[1]
        return stored, dict(stored.vlmeta["radharmony"])["meta"]

    # -- entries ----------------------------------------------------------------------------
    def fetch(self, inputs, params, build: Callable[[], tuple[np.ndarray, dict]], *,
              sources: Sequence[str] = READER_SOURCES, cparams: dict | None = None,
              flat: bool = False) -> tuple[np.ndarray, dict]:
        """``(array, meta)`` of the entry of ``inputs`` and ``params``: from memory, else from
        disk, else ``build()`` -- stored (compressed with ``cparams``, by default the canonical
        entries' codec) unless an input changed while it ran. ``flat``: stored uncompressed
        (:mod:`~radharmony.volumes.flat_entries`) and served as a read-only view of the
        file's pages (or of the memory tier's bytes)."""
        before = input_identities(inputs)
        key = self._key(before, params, sources)
        if flat:
            found = self._open_flat(key)
            if found is not None:
                return found
        else:
            stored = self._open(key)
            if stored is not None:
                try:
                    return stored[...], dict(stored.vlmeta["radharmony"])["meta"]
                except (RuntimeError, ValueError, KeyError) as exc:
                    self._drop(key, exc)
        array, meta = build()
        if input_identities(inputs) == before:
            array = np.ascontiguousarray(array)
            if flat:
                self._store_flat(key, array, meta)
            else:
                self._store(key, array, meta, cparams or self.cparams)
        return array, meta

    def has(self, key: str) -> bool:
        """Whether ``key`` has an entry (compressed or flat) in memory or on disk."""
        return key in self._memory or any(
            f is not None and f.exists() for f in (self.entry_file(key),
                                                   self.entry_file(key, flat=True)))

    def _open(self, key: str):
        """The stored array of ``key`` (a memory-mapped or in-memory Blosc2 array), or None
        when absent or damaged (removed, with a warning)."""
        b2 = self.blosc2
        dparams = {"nthreads": self.threads}
        with self._lock:
            frame = self._memory.get(key)
            if frame is not None:
                self._memory.move_to_end(key)
        f = self.entry_file(key)
        try:
            if frame is not None:
                stored = b2.ndarray_from_cframe(frame)
            elif f is not None and f.exists():
                stored = b2.open(str(f), mode="r", mmap_mode="r", dparams=dparams)
                if self.memory_bytes:
                    self._remember(key, f.read_bytes())
            else:
                return None
            if dict(stored.vlmeta["radharmony"]).get("key") != key:
                raise ValueError("the entry belongs to another key")
        except (RuntimeError, ValueError, KeyError, OSError) as exc:
            self._drop(key, exc)
            return None
        return stored

    def _open_flat(self, key: str) -> tuple[np.ndarray, dict] | None:
        """``(read-only array, meta)`` of the flat entry of ``key``, or None when absent or
        damaged (removed, with a warning)."""
        with self._lock:
            data = self._memory.get(key)
            if data is not None:
                self._memory.move_to_end(key)
        f = self.entry_file(key, flat=True)
        try:
            if data is not None:
                return flat_entries.parse(data, key)
            if f is None or not f.exists():
                return None
            if not self.memory_bytes:
                return flat_entries.open_mapped(f, key)
            data = f.read_bytes()           # read once: parsed, then held in memory
            found = flat_entries.parse(data, key)
            self._remember(key, data)
            return found
        except (ValueError, KeyError, OSError) as exc:
            self._drop(key, exc, flat=True)
            return None

    def _store_flat(self, key: str, array: np.ndarray, meta: dict) -> None:
        head = flat_entries.header(key, meta, array)
        if self.memory_bytes and len(head) + array.nbytes <= self.memory_bytes:
            self._remember(key, head + array.tobytes())
        if self.writable:
            self._write(self.entry_file(key, flat=True),
                        lambda fh: (fh.write(head), fh.write(memoryview(array).cast("B"))))

    def _write(self, path: Path, write: Callable) -> None:
        try:
            atomic_write(path, write)
        except OSError as exc:
            self.writable = False
            warnings.warn(f"Volume cache {self.folder} cannot be written ({type(exc).__name__}: "
                          f"{exc}); volumes are served uncached by this process. Free disk "
                          "space or pass a writable folder.", RuntimeWarning, stacklevel=5)

    def _store(self, key: str, array: np.ndarray, meta: dict, codec: dict) -> None:
        b2 = self.blosc2
        chunks = tuple(min(c, n) for c, n in zip(CHUNKS, array.shape))
        blocks = tuple(min(b, c) for b, c in zip(BLOCKS, chunks))
        cparams = {"codec": getattr(b2.Codec, codec["codec"]), "clevel": codec["clevel"],
                   "filters": [getattr(b2.Filter, codec["filter"])], "nthreads": self.threads}
        stored = b2.asarray(array, chunks=chunks, blocks=blocks, cparams=cparams)
        stored.vlmeta["radharmony"] = {"key": key, "meta": meta}
        frame = stored.to_cframe()
        if self.memory_bytes:
            self._remember(key, frame)
        if self.writable:
            self._write(self.entry_file(key), lambda fh: fh.write(frame))

    def _remember(self, key: str, frame: bytes) -> None:
        if len(frame) > self.memory_bytes:
            return
        with self._lock:
            self._memory[key] = frame
            self._memory.move_to_end(key)
            while sum(map(len, self._memory.values())) > self.memory_bytes:
                self._memory.popitem(last=False)

    @property
    def memory_used(self) -> int:
        """Bytes held by the in-memory tier."""
        return sum(map(len, self._memory.values()))

    def _drop(self, key: str, exc: Exception, *, flat: bool = False) -> None:
        f = self.entry_file(key, flat=flat)
        warnings.warn(f"Volume cache entry {f or key} failed its check ({type(exc).__name__}: "
                      f"{exc}); rebuilding it.", RuntimeWarning, stacklevel=4)
        with self._lock:
            self._memory.pop(key, None)
        try:
            if f is not None:
                f.unlink(missing_ok=True)
        except OSError:
            pass  # read-only: never served, since the key check fails again


@functools.cache
def _code_digest(sources: tuple[str, ...]) -> str:
    """:func:`~radharmony.version.source_digest` of ``sources``, once per process."""
    return source_digest(sources)


def _volume_entry(volume: Volume, inputs) -> tuple[np.ndarray, dict]:
    if not isinstance(volume, Volume):
        raise VolumeCacheError(f"The loader of {list(map(str, inputs))[:3]} returned "
                               f"{type(volume).__name__}", expected="a radharmony Volume",
                               found=type(volume).__name__,
                               fix="return read_volume(...) or Volume.from_array(...)")
    meta = {"affine": volume.affine.tolist(), "space": volume.space,
            "source": dataclasses.asdict(volume.source)}
    return volume.array, meta


def _volume_of(array: np.ndarray, meta: dict) -> Volume:
    source = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["source"].items()}
    return Volume(array, np.asarray(meta["affine"], dtype=np.float64), meta["space"],
                  VolumeSource(**source))


__all__ = ["BLOCKS", "CHUNKS", "CPARAMS", "EXTRA", "LAYOUT_VERSION",
           "COMPACT_CPARAMS", "READER_SOURCES",
           "VolumeCache", "VolumeCacheError", "input_identities", "require_blosc2"]
