"""Content-keyed caches: preprocessed images and harmonized tables.

**Images.** An entry is keyed by the SHA-256 of everything that changes its bytes: the image's
resolved path, size and modification time, the transform's parameters (storage dtype
included) and the radharmony version. The output dtype is not part of the key: it is applied
after the cache, so a float32 and a bfloat16 dataset share entries, as do every split and fold
(keys name content, not rows). Entries live in two forms under ``<root>/images/``:

* *loose entries* ``<k[:2]>/<key>.rhc`` -- written by whichever process or DataLoader worker
  decodes the image first: a fixed header, a JSON description, the raw array and a CRC-32,
  written to a temporary file and renamed into place (atomic on POSIX; a writer killed
  mid-write leaves only a ``.tmp-*`` file that is never read). Concurrent writers of one key
  write identical bytes, so the last rename wins harmlessly.
* *packs* ``packs/<params>-<id>.rhp`` -- many entries consolidated into one memory-mapped file
  (fixed-size records, a sorted key index, a checksum per record) that a batch reader slices
  with one ``numpy.take`` per batch. A pack is written beside its final name and renamed;
  once it is in place the loose entries it holds are removed, so each image is stored once.
  A damaged record is bypassed by a rebuilt loose entry; a truncated pack is removed.

Every read is checked (CRC-32 for loose entries, a 64-bit word sum per pack record); an entry
that fails is reported with a warning, dropped and rebuilt from the image. Nothing is unpickled.

**Tables.** :class:`TableCache` stores a harmonized table as a zstd-compressed Arrow IPC file
under ``<root>/tables/``, keyed by the harmonizer class and arguments, the resolved path, size
and modification time of the metadata file and its sibling files, and the radharmony version.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import warnings
import zlib
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from . import __version__

MAGIC = b"RHCACHE2"
PACK_MAGIC = b"RHPACK01"
_HEAD = struct.Struct("<8sI")  # magic, JSON length
_TAIL = struct.Struct("<I")  # crc32 of JSON + payload
_ALIGN = 4096


def _atomic_write(path: Path, write: Callable) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path`` and rename it into place."""
    for attempt in (0, 1):  # a concurrent pack() may remove an emptied folder in between
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
            break
        except FileNotFoundError:
            if attempt:
                raise
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _word_sums(records: np.ndarray) -> np.ndarray:
    """Per-record checksum: the sum of the record's little-endian 64-bit words (mod 2**64),
    plus its trailing bytes (weighted by position) when its length is not a multiple of 8."""
    flat = np.ascontiguousarray(records).reshape(len(records), -1).view(np.uint8)
    whole = flat.shape[1] // 8 * 8
    sums = flat[:, :whole].view("<u8").sum(axis=1, dtype=np.uint64)
    if whole < flat.shape[1]:
        tail = flat[:, whole:].astype(np.uint64) * np.arange(1, flat.shape[1] - whole + 1,
                                                              dtype=np.uint64)
        sums += tail.sum(axis=1, dtype=np.uint64)
    return sums


class Pack:
    """One consolidated, memory-mapped pack file (read-only)."""

    def __init__(self, path: Path):
        self.path = path
        with open(path, "rb") as fh:
            magic, n = _HEAD.unpack(fh.read(_HEAD.size))
            if magic != PACK_MAGIC:
                raise ValueError("not a radharmony pack")
            head = json.loads(fh.read(n))
        self.count, self.shape = head["count"], tuple(head["shape"])
        self.dtype, self.info_fields = np.dtype(head["dtype"]), head["info_fields"]
        offsets = head["offsets"]
        self.data_offset = offsets["data"]
        expected = offsets["data"] + self.count * int(np.prod(self.shape)) * self.dtype.itemsize
        if os.path.getsize(path) != expected:
            raise ValueError(f"size {os.path.getsize(path)} instead of {expected}")
        raw = np.memmap(path, mode="r", dtype=np.uint8)
        self.keys = raw[offsets["keys"]:offsets["keys"] + 32 * self.count].view("S32")
        self.order = np.argsort(self.keys, kind="stable")  # sorted view for lookups
        self.sorted_keys = self.keys[self.order]
        self.sums = raw[offsets["sums"]:offsets["sums"] + 8 * self.count].view("<u8")
        self.info = raw[offsets["info"]:offsets["info"] + 8 * self.count *
                        len(self.info_fields)].view("<i8").reshape(self.count, -1)
        self.data = raw[offsets["data"]:].view(self.dtype).reshape((self.count, *self.shape))

    def rows(self, digests: np.ndarray) -> np.ndarray:
        """Row of each 32-byte digest in this pack, -1 where absent."""
        if not self.count:
            return np.full(len(digests), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.sorted_keys, digests), self.count - 1)
        return np.where(self.sorted_keys[pos] == digests, self.order[pos], -1)

    def read(self, rows: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Records ``rows`` copied into ``out`` and a mask of those whose checksum holds."""
        out = np.take(self.data, rows, axis=0, out=out)
        return out, _word_sums(out) == self.sums[rows]

    def info_dict(self, row: int) -> dict:
        return dict(zip(self.info_fields, (int(v) for v in self.info[row])))


def warn_bad_record(pack: Pack, row: int) -> None:
    warnings.warn(f"Cache pack {pack.path} record {row} failed its checksum; that image is "
                  "rebuilt as a loose entry, which is used from now on.", RuntimeWarning,
                  stacklevel=3)


class ImageCache:
    """Stores ``(array, info)`` pairs under ``root`` keyed by file identity and ``params``.

    ``info`` is a flat dict of integers (e.g. :class:`~radharmony.geometry.Letterbox` fields).
    """

    def __init__(self, root: str | os.PathLike, params: dict):
        self.root = Path(root)
        self._salt = json.dumps({"params": params, "version": __version__}, sort_keys=True)
        self._prefix = hashlib.sha256(self._salt.encode()).hexdigest()[:16]
        self.images = self.root / "images"
        self._packs: dict[str, Pack] = {}
        self._scanned = False

    def __getstate__(self):  # memory maps are re-opened in each worker process
        return {**self.__dict__, "_packs": {}, "_scanned": False}

    # -- keys -------------------------------------------------------------------------------
    def key(self, path: str | os.PathLike, *, resolved: bool = False) -> str:
        """The key of the image at ``path`` (``resolved``: already an absolute real path)."""
        st = os.stat(path)
        real = os.fspath(path) if resolved else os.path.realpath(path)
        ident = f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{self._salt}"
        return hashlib.sha256(ident.encode()).hexdigest()

    def _file(self, key: str) -> Path:
        return self.images / key[:2] / f"{key}.rhc"

    # -- loose entries ------------------------------------------------------------------------
    def _load_entry(self, key: str) -> tuple[np.ndarray, dict] | None:
        f = self._file(key)
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
            f.unlink(missing_ok=True)
            return None
        return arr, info["info"]

    def store(self, key: str, arr: np.ndarray, info: dict) -> None:
        """Write the loose entry for ``key`` atomically."""
        arr = np.ascontiguousarray(arr)
        meta = json.dumps({"key": key, "dtype": arr.dtype.str, "shape": list(arr.shape),
                           "info": info}).encode()
        body = meta + arr.tobytes()
        _atomic_write(self._file(key), lambda fh: fh.write(
            _HEAD.pack(MAGIC, len(meta)) + body + _TAIL.pack(zlib.crc32(body))))

    # -- packs --------------------------------------------------------------------------------
    def packs(self, *, rescan: bool = False) -> list[Pack]:
        """The packs for these parameters (opened once per process; ``rescan`` finds new ones)."""
        if rescan or not self._scanned:
            self._scanned = True
            for f in sorted((self.images / "packs").glob(f"{self._prefix}-*.rhp")):
                if f.name in self._packs:
                    continue
                try:
                    self._packs[f.name] = Pack(f)
                except (ValueError, KeyError, OSError, struct.error) as exc:
                    warnings.warn(f"Cache pack {f} failed its check ({exc}); removing it, its "
                                  "images will be rebuilt.", RuntimeWarning, stacklevel=2)
                    f.unlink(missing_ok=True)
        return list(self._packs.values())

    def locate(self, keys: Sequence[str]) -> tuple[list[Pack], np.ndarray, np.ndarray]:
        """``(packs, pack_of, row_of)`` for ``keys``: index into ``packs`` and row, -1 if absent."""
        digests = np.array([bytes.fromhex(k) for k in keys], dtype="S32")
        pack_of = np.full(len(keys), -1, np.int64)
        row_of = np.full(len(keys), -1, np.int64)
        packs = self.packs(rescan=True)
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
            if self._file(key).exists():
                return None
        return None

    def load(self, key: str) -> tuple[np.ndarray, dict] | None:
        """The entry for ``key`` (a sound pack record first, then a loose entry), or None when
        absent or damaged (the caller rebuilds and stores it as a loose entry)."""
        return self._load_packed(key) or self._load_entry(key)

    def has(self, key: str) -> bool:
        return self._file(key).exists()

    def pack(self, keys: Iterable[str], build: Callable[[str], tuple[np.ndarray, dict]], *,
             progress: Callable[[Iterable], Iterable] = iter) -> Pack | None:
        """Consolidate the entries of ``keys`` not yet in a pack into one new pack.

        ``build(key)`` supplies an entry that is missing or damaged. Loose entries that went
        into the pack are removed once the pack is in place. Returns the new pack, or None
        when every key was already packed.
        """
        keys = list(keys)
        _, pack_of, _ = self.locate(keys)
        todo = sorted({k for k, p in zip(keys, pack_of) if p < 0})
        if not todo:
            return None
        first = self.load(todo[0]) or build(todo[0])
        arr0, info0 = first
        fields = list(info0)
        n, shape, dtype = len(todo), arr0.shape, arr0.dtype
        offsets = {}
        head = {"count": n, "shape": list(shape), "dtype": dtype.str, "info_fields": fields,
                "salt": self._salt}
        # header length depends on the offsets: reserve a fixed-width block for the JSON
        base = _HEAD.size + 1024
        offsets["keys"] = base
        offsets["sums"] = base + 32 * n
        offsets["info"] = offsets["sums"] + 8 * n
        offsets["data"] = -(-(offsets["info"] + 8 * n * len(fields)) // _ALIGN) * _ALIGN
        head["offsets"] = offsets
        meta = json.dumps(head).encode()
        if len(meta) > 1024 - 1:
            raise ValueError("pack header too long")
        digests = np.array([bytes.fromhex(k) for k in todo], dtype="S32")
        sums = np.zeros(n, "<u8")
        info = np.zeros((n, len(fields)), "<i8")

        def write(fh):
            fh.write(_HEAD.pack(PACK_MAGIC, len(meta)) + meta)
            fh.seek(offsets["data"])
            for i in progress(range(n)):
                arr, inf = (first if i == 0 else (self.load(todo[i]) or build(todo[i])))
                arr = np.ascontiguousarray(arr, dtype=dtype)
                if arr.shape != shape:
                    raise ValueError(f"entry {todo[i]} has shape {arr.shape}, not {shape}")
                sums[i] = _word_sums(arr[None])[0]
                info[i] = [inf[f] for f in fields]
                fh.write(arr.tobytes())
            fh.seek(offsets["keys"])
            fh.write(digests.tobytes() + sums.tobytes() + info.tobytes())

        pack_id = hashlib.sha256(digests.tobytes()).hexdigest()[:16]
        path = self.images / "packs" / f"{self._prefix}-{pack_id}.rhp"
        _atomic_write(path, write)
        for k in todo:
            self._file(k).unlink(missing_ok=True)
        for folder in {self._file(k).parent for k in todo}:
            try:
                folder.rmdir()  # only succeeds when empty
            except OSError:
                pass
        return self.packs(rescan=True) and self._packs.get(path.name)


class TableCache:
    """Harmonized tables under ``<root>/tables/``, keyed by their owner and input files.

    A table is a zstd-compressed Arrow IPC file (no pickle); nested values (e.g. ``boxes``)
    travel as JSON text. Reading back gives text columns as ``object`` with ``None`` for
    missing, as :func:`~radharmony.schema.validate` produces them, so the table read back
    equals the table stored.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root) / "tables"

    def path(self, owner: dict, files: Iterable[str | os.PathLike]) -> Path:
        """The entry for ``owner`` (JSON-serializable) built from ``files``: any change to
        a file's resolved path, size or modification time gives another entry."""
        idents = []
        for f in files:
            st = os.stat(f)
            idents.append([os.path.realpath(f), st.st_size, st.st_mtime_ns])
        ident = json.dumps([owner, sorted(idents), __version__], sort_keys=True, default=str)
        return self.root / f"{hashlib.sha256(ident.encode()).hexdigest()[:32]}.arrow"

    def get(self, owner: dict, files: Iterable[str | os.PathLike], build: Callable):
        """The stored table for ``owner`` and ``files``, else ``build()`` stored and returned."""
        path = self.path(owner, files)
        df = self.load(path)
        if df is None:
            df = build()
            self.store(path, df)
        return df

    def load(self, path: Path):
        """The table at ``path``, or None when absent or unreadable (then removed)."""
        if not path.is_file():
            return None
        try:
            return self._read(path)
        except Exception as exc:  # pyarrow raises several types for damaged files
            warnings.warn(f"Table cache {path} is unreadable ({type(exc).__name__}: {exc}); "
                          "harmonizing afresh.", RuntimeWarning, stacklevel=3)
            path.unlink(missing_ok=True)
            return None

    def store(self, path: Path, df) -> None:
        import pyarrow as pa
        import pyarrow.feather as feather

        json_cols = [c for c in df.columns if df[c].dtype == object and
                     df[c].map(lambda v: isinstance(v, (list, dict))).any()]
        if json_cols:
            df = df.assign(**{c: df[c].map(lambda v: None if v is None else json.dumps(v))
                              for c in json_cols})
        table = pa.Table.from_pandas(df, preserve_index=False)
        head = json.dumps({"rows": len(df), "json_columns": json_cols}).encode()
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               b"radharmony_table": head})
        _atomic_write(path, lambda fh: feather.write_feather(table, fh, compression="zstd"))

    @staticmethod
    def _read(path: Path):
        import pandas as pd
        import pyarrow as pa
        import pyarrow.feather as feather

        table = feather.read_table(path)
        head = json.loads(table.schema.metadata[b"radharmony_table"])
        df = table.to_pandas()
        for name, col in zip(table.column_names, table.columns):
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                df[name] = pd.Series(col.to_numpy(zero_copy_only=False), dtype=object)
        for c in head["json_columns"]:
            df[c] = df[c].map(lambda v: None if v is None else json.loads(v)).astype(object)
        if len(df) != head["rows"]:
            raise ValueError(f"{len(df)} rows where its header says {head['rows']}")
        return df
