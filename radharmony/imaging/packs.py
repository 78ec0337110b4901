"""Packs: many cache entries consolidated into one memory-mapped file.

Layout (little-endian): the binary head (``RHPACK01``, JSON length) and a JSON header in a
fixed 1 KiB block (count, record shape and dtype, info field names, section offsets); then the
32-byte keys, a 64-bit checksum per record, the integer info fields of each record, and from a
4 KiB boundary the fixed-size records themselves. A batch reader slices records with one
``numpy.take`` and checks them with one vectorized checksum.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from ..files import HEAD as _HEAD
from ..files import atomic_write

PACK_MAGIC = b"RHPACK01"
_ALIGN = 4096


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
    offsets = {}
    head = {"count": n, "shape": list(shape), "dtype": dtype.str, "info_fields": fields,
            "salt": cache.salt}
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
            arr, inf = (first if i == 0 else (cache.load(todo[i]) or build(todo[i])))
            arr = np.ascontiguousarray(arr, dtype=dtype)
            if arr.shape != shape:
                raise ValueError(f"entry {todo[i]} has shape {arr.shape}, not {shape}")
            sums[i] = _word_sums(arr[None])[0]
            info[i] = [inf[f] for f in fields]
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
