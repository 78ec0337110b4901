"""Packs: many cache entries consolidated into one memory-mapped file.

Layout (little-endian): the binary head (``RHPACK03``, JSON length) and a JSON header in a
fixed 1 KiB block (count, record shape and dtype, info field names, section offsets, checksum
algorithm); then the 32-byte keys, a 64-bit checksum per record, the integer info fields of
each record, and from a 4 KiB boundary the fixed-size records themselves. A batch reader
converts records straight out of the map (or slices them with one ``numpy.take``).

A record's checksum covers every byte a read depends on, in order: the header's description
of a record (shape, dtype, info field names, the cache's salt), its key, its info fields (the
letterbox that places boxes and masks) and its pixels -- XXH3-64 (:mod:`xxhash`) seeded with
the hash of layout, key and info, or chained CRC-32 where xxhash is absent. A flipped bit
anywhere in a record, or two records swapped, fails the check.

The header is validated strictly when a pack is opened: types, dtype, every section offset
equal to the one its count implies, the file size, the salt of the cache that opens it; then
the first and last records' checksums, which hold only under the header's true layout and
algorithm. A header that lies in any field -- a reshaped record of the same byte size, info
fields renamed, another checksum algorithm or salt, a moved section -- fails; the pack is
removed with a warning and its images rebuilt from their loose entries or the image files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
import zlib
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from ..files import HEAD as _HEAD
from ..files import atomic_write

PACK_MAGIC = b"RHPACK03"  # 03: checksums cover the layout
_ALIGN = 4096
_HEADER_BLOCK = 1024
#: record dtypes a pack may hold (the pipeline's storage types)
_DTYPES = frozenset({"|u1", "<u2"})

try:
    import xxhash
except ImportError:  # pragma: no cover - xxhash is a dependency; CRC-32 keeps packs usable
    xxhash = None
CHECKSUM = "xxh3_64" if xxhash is not None else "crc32"


def layout_bytes(shape, dtype, info_fields, salt) -> bytes:
    """What a pack's header says a record is: the prefix of every record's checksum."""
    return json.dumps([list(shape), np.dtype(dtype).str, list(info_fields), salt]).encode()


def record_checksums(keys: np.ndarray, info: np.ndarray, records: np.ndarray,
                     algorithm: str = CHECKSUM, layout: bytes = b"") -> np.ndarray:
    """Per-record 64-bit checksum of the pack's ``layout`` (:func:`layout_bytes`), key (32
    bytes), info fields (int64) and pixels, in that order (``algorithm`` ``"xxh3_64"`` or
    ``"crc32"``)."""
    n = len(records)
    flat = np.ascontiguousarray(records).reshape(n, -1)
    info = np.ascontiguousarray(info, dtype="<i8").reshape(n, -1)
    keys = np.ascontiguousarray(keys, dtype="S32")
    out = np.empty(n, "<u8")
    if algorithm == "xxh3_64":
        h64 = xxhash.xxh3_64_intdigest
        for i in range(n):
            out[i] = h64(flat[i], seed=h64(layout + keys[i].tobytes() + info[i].tobytes()))
    else:
        for i in range(n):
            out[i] = zlib.crc32(flat[i], zlib.crc32(layout + keys[i].tobytes() +
                                                    info[i].tobytes()))
    return out


def _int(value, what: str, lo: int = 0, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or \
            (hi is not None and value > hi):
        raise ValueError(f"header field {what} is {value!r}, not an integer in "
                         f"[{lo}, {hi if hi is not None else 'inf'}]")
    return value


def _offsets(count: int, n_fields: int) -> dict[str, int]:
    """The section offsets of a pack of ``count`` records with ``n_fields`` info fields."""
    keys = _HEAD.size + _HEADER_BLOCK
    sums = keys + 32 * count
    info = sums + 8 * count
    return {"keys": keys, "sums": sums, "info": info,
            "data": -(-(info + 8 * count * n_fields) // _ALIGN) * _ALIGN}


def parse_header(head: object, size: int) -> dict:
    """The validated fields of a pack header for a file of ``size`` bytes; ValueError if any
    field has the wrong type, a section offset is not the one the count implies, or the size
    does not fit."""
    if not isinstance(head, dict):
        raise ValueError(f"header is a {type(head).__name__}, not an object")
    count = _int(head.get("count"), "count", 0, size)
    shape = head.get("shape")
    if not isinstance(shape, list) or not 1 <= len(shape) <= 4:
        raise ValueError(f"header field shape is {shape!r}")
    shape = tuple(_int(d, "shape", 1, 1 << 16) for d in shape)
    if not isinstance(head.get("dtype"), str) or head["dtype"] not in _DTYPES:
        raise ValueError(f"header field dtype is {head.get('dtype')!r}")
    dtype = np.dtype(head["dtype"])
    fields = head.get("info_fields")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields) or \
            len(set(fields)) != len(fields) or len(fields) > 64:
        raise ValueError(f"header field info_fields is {fields!r}")
    if head.get("checksum") not in ("xxh3_64", "crc32"):
        raise ValueError(f"header field checksum is {head.get('checksum')!r}")
    if head["checksum"] == "xxh3_64" and xxhash is None:
        raise ValueError("the pack is checked with xxh3_64 and xxhash is not installed")
    offsets = head.get("offsets")
    if not isinstance(offsets, dict):
        raise ValueError(f"header field offsets is {offsets!r}")
    want = _offsets(count, len(fields))
    if offsets != want:
        raise ValueError(f"section offsets {offsets} instead of {want} for {count} records")
    record = math.prod(shape) * dtype.itemsize
    if size != want["data"] + count * record:
        raise ValueError(f"size {size} instead of {want['data'] + count * record}")
    salt = head.get("salt")
    if not isinstance(salt, str):
        raise ValueError(f"header field salt is {salt!r}")
    return {"count": count, "shape": shape, "dtype": dtype, "info_fields": fields,
            "checksum": head["checksum"], "salt": salt, **want}


class Pack:
    """One consolidated, memory-mapped pack file (read-only). ``salt``: the salt of the cache
    that opens it, which the header must name. Any damage to the header raises ValueError."""

    def __init__(self, path: Path, salt: str | None = None):
        self.path = path
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            block = fh.read(_HEAD.size + _HEADER_BLOCK)
        if len(block) < _HEAD.size:
            raise ValueError("truncated before its header")
        magic, n = _HEAD.unpack_from(block)
        if magic != PACK_MAGIC:
            raise ValueError("not a radharmony pack of this version")
        if not 0 < n < _HEADER_BLOCK or len(block) < _HEAD.size + n:
            raise ValueError(f"header length {n} outside the {_HEADER_BLOCK}-byte header block")
        try:
            head = json.loads(block[_HEAD.size:_HEAD.size + n])
        except (ValueError, RecursionError) as exc:  # RecursionError: nested a thousand deep
            raise ValueError(f"header is not JSON ({type(exc).__name__}: {exc})") from None
        head = parse_header(head, size)
        if salt is not None and head["salt"] != salt:
            raise ValueError("header names another cache salt (other pipeline parameters)")
        self.layout = layout_bytes(head["shape"], head["dtype"], head["info_fields"],
                                   head["salt"])
        self.count, self.shape = head["count"], head["shape"]
        self.dtype, self.info_fields = head["dtype"], head["info_fields"]
        self.checksum = head["checksum"]
        self.data_offset = head["data"]
        # a plain ndarray over the map: slicing a numpy.memmap costs ~2 us per record
        raw = np.memmap(path, mode="r", dtype=np.uint8).view(np.ndarray) if size \
            else np.zeros(0, np.uint8)
        self.keys = raw[head["keys"]:head["keys"] + 32 * self.count].view("S32")
        self.order = np.argsort(self.keys, kind="stable")  # sorted view for lookups
        self.sorted_keys = self.keys[self.order]
        self.sums = raw[head["sums"]:head["sums"] + 8 * self.count].view("<u8")
        self.info = raw[head["info"]:head["info"] + 8 * self.count *
                        len(self.info_fields)].view("<i8").reshape(self.count, -1)
        self.data = raw[head["data"]:].view(self.dtype).reshape((self.count, *self.shape))
        self.verified = np.zeros(self.count, bool)  # records whose checksum held once
        # a header that lies about the layout or the algorithm fails every record; one damaged
        # record fails only itself (and is rebuilt alone)
        ends = np.unique([0, self.count - 1]) if self.count else np.zeros(0, np.int64)
        if len(ends) and not self.check(ends).any():
            raise ValueError(f"records {ends.tolist()} fail their checksums: the header does "
                             "not describe its records")

    def rows(self, digests: np.ndarray) -> np.ndarray:
        """Row of each 32-byte digest in this pack, -1 where absent."""
        if not self.count:
            return np.full(len(digests), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.sorted_keys, digests), self.count - 1)
        return np.where(self.sorted_keys[pos] == digests, self.order[pos], -1)

    def check(self, rows: np.ndarray) -> np.ndarray:
        """Mask of records ``rows`` whose checksum (key, info fields and pixels) holds, read
        in place. A record is checked the first time this object sees it: a pack is never
        written once it is in place, and its checksums take about a tenth of a cached
        batch's time."""
        rows = np.asarray(rows)
        ok = self.verified[rows]
        todo = np.flatnonzero(~ok)
        if len(todo):
            r = rows[todo]
            good = record_checksums(self.keys[r], self.info[r], self.data[r],
                                    self.checksum, self.layout) == self.sums[r]
            ok[todo] = good
            self.verified[r[good]] = True
        return ok

    def read(self, rows: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Records ``rows`` copied into ``out`` and the mask of :meth:`check`."""
        rows = np.asarray(rows)
        ok = self.check(rows)
        return np.take(self.data, rows, axis=0, out=out), ok

    def info_dict(self, row: int) -> dict:
        return self.info_dicts(np.array([row]))[0]

    def info_dicts(self, rows: np.ndarray) -> list[dict]:
        """:meth:`info_dict` of each of ``rows``, at once."""
        fields = self.info_fields
        return [dict(zip(fields, values)) for values in self.info[rows].tolist()]


def warn_bad_record(pack: Pack, row: int) -> None:
    warnings.warn(f"Cache pack {pack.path} record {row} failed its checksum; that image is "
                  "rebuilt as a loose entry, which is used from now on.", RuntimeWarning,
                  stacklevel=3)


def write_pack(cache, keys: Iterable[str], build: Callable[[str], tuple[np.ndarray, dict]], *,
               progress: Callable[[Iterable], Iterable] = iter) -> Pack | None:
    """Consolidate the entries of ``keys`` not yet in a pack into one new pack.

    ``build(key)`` supplies an entry that is missing or damaged. Loose entries that went
    into the pack are removed once the pack is in place. Returns the new pack, or None
    when every key was already packed.
    """
    keys = list(keys)
    _, pack_of, _ = cache.locate(keys)
    todo = sorted({k for k, p in zip(keys, pack_of) if p < 0})
    if not todo:
        return None
    first = cache.load(todo[0]) or build(todo[0])
    arr0, info0 = first
    fields = list(info0)
    n, shape, dtype = len(todo), arr0.shape, arr0.dtype
    # header length depends on the offsets: reserve a fixed-width block for the JSON
    offsets = _offsets(n, len(fields))
    head = {"count": n, "shape": list(shape), "dtype": dtype.str, "info_fields": fields,
            "checksum": CHECKSUM, "salt": cache.salt, "offsets": offsets}
    layout = layout_bytes(shape, dtype, fields, cache.salt)
    meta = json.dumps(head).encode()
    if len(meta) > _HEADER_BLOCK - 1:
        raise ValueError("pack header too long")
    digests = np.array([bytes.fromhex(k) for k in todo], dtype="S32")
    sums = np.zeros(n, "<u8")
    info = np.zeros((n, len(fields)), "<i8")

    def write(fh):
        fh.write(_HEAD.pack(PACK_MAGIC, len(meta)) + meta)
        fh.seek(offsets["data"])
        for i in progress(range(n)):
            arr, inf = (first if i == 0 else (cache.load(todo[i]) or build(todo[i])))
            arr = np.ascontiguousarray(arr, dtype=dtype)
            if arr.shape != shape:
                raise ValueError(f"entry {todo[i]} has shape {arr.shape}, not {shape}")
            info[i] = [inf[f] for f in fields]
            sums[i] = record_checksums(digests[i:i + 1], info[i:i + 1], arr[None],
                                       layout=layout)[0]
            fh.write(arr.tobytes())
        fh.seek(offsets["keys"])
        fh.write(digests.tobytes() + sums.tobytes() + info.tobytes())

    pack_id = hashlib.sha256(digests.tobytes()).hexdigest()[:16]
    path = cache.images / "packs" / f"{cache.prefix}-{pack_id}.rhp"
    atomic_write(path, write)
    for k in todo:
        cache.entry_file(k).unlink(missing_ok=True)
    for folder in {cache.entry_file(k).parent for k in todo}:
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            pass
    return cache.packs(rescan=True) and cache.opened_packs.get(path.name)
