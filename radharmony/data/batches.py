"""Batched reads from the image cache, and the pack that is built without being asked for.

One reader serves ``dataset.__getitems__`` (so ``DataLoader(ds, batch_size=B)`` reads a batch
at once) and :class:`~radharmony.data.loader.CachedLoader`. A batch whose rows all sit in one
pack is converted to the output dtype straight out of the memory map, image by image, into a
reused buffer (inside a DataLoader worker, a shared-memory slot: :mod:`radharmony.data.handoff`);
records not yet checked by this process are checked first. Any other batch is gathered --
pack rows with one ``numpy.take`` per pack, the rest one by one from loose entries or decoded
-- and then converted in one pass. Both the decoding of loose rows and the conversion out of a
pack run over the process's threads (:mod:`radharmony.threads`: ``torch.get_num_threads()``,
1 inside DataLoader workers). Outputs of the table rows (``cls``, ``cls_mask``) are
computed for the whole batch (``ds.batch_outputs``).

**The automatic pack.** Each process counts the rows it served from loose entries. When the
count reaches its share of the dataset (``len / (DataLoader workers x distributed ranks)``,
less one batch), it checks that every row of the dataset has a cache entry (one ``stat`` per
row not seen cached yet) and, if so, consolidates them into a pack. Only the holder of an
exclusive lock file (``images/packs/.lock-<params>``, created with ``O_EXCL``) packs; every
other process and rank keeps reading the loose entries meanwhile, and once the pack is
renamed into place (and the loose entries it holds removed), each process notices the packs
folder changed (one ``stat`` per batch, only while it still reads loose entries) and reads
from the one shared, memory-mapped pack. A lock left by a killed process is taken over once
that process is gone (same host) or after :data:`STALE_LOCK_SECONDS`. When the last two
readers finish together and neither sees the other's final entries, the check is repeated
(after as many further loose reads as rows were missing, per reader), early in the next
epoch.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .. import threads
from ..errors import ImageReadError, PathSafetyError
from ..imaging.ahead import levels_ahead
from ..imaging.geometry import Letterbox
from ..imaging.packs import warn_bad_record
from ..imaging.pipeline import STORAGE
from . import handoff
from .filetable import LOOSE, UNKNOWN
from .locks import STALE_LOCK_SECONDS, exclusive, lock_path  # noqa: F401 (re-exported)
from .sampling import stream_hint, wants_letterbox


# -- reading ---------------------------------------------------------------------------------
def _packs_mtime(cache) -> int | None:
    try:
        return os.stat(cache.images / "packs").st_mtime_ns
    except OSError:
        return None


def _packs_changed(files, cache) -> None:
    """Mark rows believed loose for a new lookup when the packs folder changed."""
    mtime = _packs_mtime(cache)
    if mtime != files.packs_mtime:
        files.packs_mtime = mtime
        files.pack[files.pack == LOOSE] = UNKNOWN


def _locate(files, cache, rows: np.ndarray) -> None:
    """Look up the pack record of table rows ``rows`` (whose keys are known)."""
    packs, pack_of, row_of = cache.locate(list(files.key[rows]))
    index = {}
    for p, pack in enumerate(packs):
        name = pack.path.name
        if name not in files.pack_names:
            files.pack_names.append(name)
        index[p] = files.pack_names.index(name)
    files.pack[rows] = [index[p] if p >= 0 else LOOSE for p in pack_of]
    files.row[rows] = row_of


def _pack(cache, name: str):
    pack = cache.opened_packs.get(name)
    if pack is None:
        cache.packs(rescan=True)
        pack = cache.opened_packs.get(name)
    return pack


def _key_of(ds):
    """The :class:`~radharmony.data.filetable.FileTable` key function of ``ds``'s cache (no
    cache: every key ``""``; the file's identity is read all the same, for the watch)."""
    cache = ds.image_cache
    return (lambda path, st: "") if cache is None else \
        (lambda path, st: cache.key(path, resolved=True, st=st))


def identify(ds, index: int) -> tuple[str, str]:
    """``(resolved file, cache key)`` of sample ``index`` (one ``lstat``)."""
    return ds._file_table().identify(int(ds._file_rows[index]), _key_of(ds))


def load_one(ds, index: int, path: str, key: str, *, packed: bool = True
             ) -> tuple[np.ndarray, Letterbox]:
    """Sample ``index``'s quantized image through the cache (decoded and stored on a miss).
    ``packed=False``: the batch's pack lookup, as of the packs folder's current state, found
    no record for it, so only its loose entry is looked for."""
    cache = ds.image_cache
    files = ds._file_table()
    if packed:
        before = _packs_mtime(cache)
        hit = cache.load(key)
    else:
        before = files.packs_mtime
        hit = cache.load_entry(key)
    if hit is None and _packs_mtime(cache) != before:
        cache.packs(rescan=True)  # a pack may have just replaced the loose entry
        hit = cache.load(key)
    if hit is not None:
        arr, box = hit[0], Letterbox(**hit[1])
    else:
        arr, box = ds.pipeline.encode(path)
        cache.store(key, arr, box.as_dict())
    files.confirmed[ds._file_rows[index]] = True
    return arr, box


def _identify_batch(ds, indices: np.ndarray) -> list[str]:
    """The resolved file of each of ``indices`` (one ``lstat`` each, keys derived again only
    where a file changed); an absent or unsafe file raises the standard error naming it."""
    files, key_of = ds._file_table(), _key_of(ds)
    try:
        return files.identify_many(ds._file_rows[indices], key_of)
    except (OSError, ImageReadError, PathSafetyError):
        pass
    for i in indices:  # find the sample at fault
        try:
            identify(ds, int(i))
        except (OSError, ImageReadError, PathSafetyError):
            ds[int(i)]  # raises the standard error naming the sample
            raise  # pragma: no cover - the file came back in between
    return files.identify_many(ds._file_rows[indices], key_of)  # pragma: no cover


def _find(ds, indices: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``(table rows, resolved files, pack index or LOOSE per row)`` of a batch."""
    files, cache = ds._file_table(), ds.image_cache
    rows = ds._file_rows[indices]
    paths = _identify_batch(ds, indices)
    if (files.pack[rows] < 0).any():  # loose marks hold as of files.packs_mtime
        _packs_changed(files, cache)
    unknown = rows[files.pack[rows] == UNKNOWN]
    if len(unknown):
        _locate(files, cache, np.unique(unknown))
    return rows, paths, files.pack[rows]


def _boxes(ds, pack, records) -> list:
    return [Letterbox(**d) for d in pack.info_dicts(records)] if wants_letterbox(ds) \
        else [None] * len(records)


def _gather(ds, indices, found, out: np.ndarray | None) -> tuple[np.ndarray, list]:
    files, cache = ds._file_table(), ds.image_cache
    rows, paths, where = found
    size = ds.pipeline.size
    shape, dtype = (len(indices), size, size), STORAGE[ds.pipeline.bits]
    buf = out[:len(indices)] if out is not None and out.shape[1:] == shape[1:] and \
        len(out) >= len(indices) and out.dtype == dtype else np.empty(shape, dtype)
    boxes: list = [None] * len(indices)
    loose = list(np.flatnonzero(where < 0))
    unpacked = set(loose)  # no pack record as of the lookup just made
    for p in np.unique(where[where >= 0]):
        sel = np.flatnonzero(where == p)
        pack = _pack(cache, files.pack_names[p])
        if pack is None:  # removed since: read these rows one by one
            files.pack[rows[sel]] = UNKNOWN
            loose += list(sel)
            continue
        records = files.row[rows[sel]]
        if len(sel) == len(indices):
            ok = pack.read(records, out=buf)[1]
        else:
            buf[sel], ok = pack.read(records)
        for j in sel[~ok]:  # a damaged record: rebuilt as a loose entry
            warn_bad_record(pack, int(files.row[rows[j]]))
            files.pack[rows[j]] = LOOSE
            loose.append(j)
        for j, box in zip(sel, _boxes(ds, pack, records)):
            boxes[j] = box
        files.confirmed[rows[sel[ok]]] = True
    loose = sorted(loose)  # decoded over the process's threads (radharmony.threads)
    got = threads.each(lambda j: load_one(ds, int(indices[j]), paths[j], files.key[rows[j]],
                                          packed=j not in unpacked), loose)
    for j, value in zip(loose, got):
        exc = threads.raised(value)
        if isinstance(exc, (ImageReadError, PathSafetyError)):
            ds[int(indices[j])]  # raises the standard error naming the sample
        if exc is not None:
            raise exc
        buf[j], boxes[j] = value
    if loose:
        note_loose(ds, len(loose), len(indices))
    return buf, boxes


def read_quantized(ds, indices, *, out: np.ndarray | None = None
                   ) -> tuple[np.ndarray, list[Letterbox]]:
    """Samples ``indices``'s quantized images ``(B, size, size)`` and their Letterboxes
    (written into the first rows of ``out`` when it has room, that image shape and dtype)."""
    indices = np.asarray(indices, dtype=np.int64)
    return _gather(ds, indices, _find(ds, indices), out)


def _one_pack(ds, found):
    """``(pack, records)`` when every row of the batch sits intact in one pack."""
    rows, _, where = found
    if where[0] < 0 or not (where == where[0]).all():
        return None
    files = ds._file_table()
    pack = _pack(ds.image_cache, files.pack_names[where[0]])
    if pack is None:
        return None
    records = files.row[rows]
    if not pack.check(records).all():
        return None  # the gather warns and rebuilds the damaged records
    files.confirmed[rows] = True
    return pack, records


#: per thread, the quantized gather buffer of the previous batch (reused by the next)
_scratch = threading.local()

def _batch_out(ds, shape: tuple) -> torch.Tensor | None:
    """This process's next reused batch buffer (inside a DataLoader worker, one of its
    shared-memory slots: see :mod:`radharmony.data.handoff`); None: a new tensor."""
    if torch.utils.data.get_worker_info() is None:
        return handoff.own_batch(shape, ds.dtype)
    return handoff.worker_batch(shape, ds.dtype)


def to_batch_tensor(ds, quantized: np.ndarray) -> torch.Tensor:
    """``(B, 1, H, W)`` in ``ds.dtype``, in one of this process's reused buffers."""
    out = _batch_out(ds, (len(quantized), 1, *quantized.shape[1:]))  # None: a new tensor
    return ds.pipeline.to_tensor(quantized, ds.dtype, out=out, stream=stream_hint(ds))


def cached_rows(ds, indices: np.ndarray, *, boxes: bool = True,
                scratch: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None, list]:
    """The cached images of rows ``indices`` as ``(source, records, letterboxes)``: the
    pack's memory map and the rows' records in it when the batch lies intact in one pack
    (to be converted straight out of it), else the gathered ``(B, S, S)`` array (into
    ``scratch`` when it has room) and None. ``boxes=False``: no Letterboxes of a packed
    batch (an empty list)."""
    found = _find(ds, indices)
    direct = _one_pack(ds, found)
    if direct is not None:
        pack, records = direct
        return pack.data, records, _boxes(ds, pack, records) if boxes else []
    quantized, letterboxes = _gather(ds, indices, found, scratch)
    return quantized, None, letterboxes


def _checked_records(ds, indices: np.ndarray) -> tuple | None:
    """``(pack data, records)`` of rows ``indices`` as this process last found them: all
    checked, in one pack; else None."""
    files = ds._file_table()
    rows = ds._file_rows[indices]
    where = files.pack[rows]
    if not len(rows) or where[0] < 0 or not (where == where[0]).all() or \
            not files.confirmed[rows].all():
        return None
    pack = _pack(ds.image_cache, files.pack_names[where[0]])
    return None if pack is None else (pack.data, files.row[rows])


def cached_rows_ahead(ds, indices: np.ndarray, out, *, stream: bool | None,
                      slots: np.ndarray | None = None, meanwhile: Callable | None = None,
                      **kw) -> tuple:
    """:func:`cached_rows` (``kw``: its options), with the conversion of the batch into
    ``out`` (a tensor, or a callable giving one) started on a helper thread meanwhile when
    this process checked the rows' records before (one pack). ``slots``: the output rows as
    positions in ``indices``, -1 for padding (default: one output row per index, in order).
    ``meanwhile()``: the caller's own work that does not read the pixels (the samples'
    dicts), run after the checks while the conversion is still going (not run when none was
    started). Returns ``cached_rows``' ``(source, records, boxes)`` and the converted output
    tensor when the checks found the same pack and records, else None (convert it then)."""
    found = _checked_records(ds, indices)
    target = join = None
    if found is not None:
        target = out() if callable(out) else out
        rows = found[1] if slots is None else \
            np.where(slots >= 0, found[1][np.maximum(slots, 0)], -1)
        join = None if target is None else levels_ahead(found[0], ds.dtype, rows, target,
                                                        stream)
    try:
        source, records, boxes = cached_rows(ds, indices, **kw)
        if join is not None and meanwhile is not None:
            meanwhile()
    finally:
        if join is not None:
            join()  # the helper is done with the buffer, whatever happened
    kept = join is not None and records is not None and source is found[0] and \
        np.array_equal(records, found[1])
    return source, records, boxes, target if kept else None


def read_samples(ds, indices) -> list[dict]:
    """The samples of ``indices``, whose ``img`` (and ``cls``, ``cls_mask``: see
    ``ds.batch_outputs``) are the rows of one batch tensor (the default collate and
    :func:`radharmony.collate` return that tensor as the batch without copying).
    A batch held in one pack is converted straight out of the memory map; when this process
    has checked all its records before, the conversion starts on a helper thread while the
    files are checked, and is kept only if the check finds the same pack records."""
    indices = np.asarray(indices, dtype=np.int64)
    scratch = getattr(_scratch, "buf", None)
    size = ds.pipeline.size
    source, records, boxes, batch = cached_rows_ahead(
        ds, indices, lambda: _batch_out(ds, (len(indices), 1, size, size)),
        stream=stream_hint(ds), scratch=scratch)
    if batch is None and records is not None:  # else converted while the files were checked
        batch = ds.pipeline.to_tensor(source, ds.dtype, rows=records, stream=stream_hint(ds),
                                      out=_batch_out(ds, (len(records), 1, size, size)))
    elif batch is None:
        quantized = source
        batch = to_batch_tensor(ds, quantized)
        start, end = batch.untyped_storage().data_ptr(), quantized.ctypes.data
        if start <= end < start + batch.untyped_storage().nbytes() or \
                end <= start < end + quantized.nbytes:
            _scratch.buf = None  # the batch is a view of it: not to be written again
        elif scratch is None or not np.shares_memory(quantized, scratch):
            _scratch.buf = quantized  # fresh pages are costly: the next batches reuse these
    tensors = {"img": batch, **ds.batch_outputs(indices)}
    rows = {k: v.unbind(0) for k, v in tensors.items()}
    given = {k: v for k, v in rows.items() if k != "img"}
    samples = [ds.finish(ds.assemble(i, img, box, {k: v[j] for k, v in given.items()}))
               for j, (i, img, box) in enumerate(zip(indices.tolist(), rows["img"], boxes))]
    return handoff.mark(samples, tensors, rows)


# -- the automatic pack -------------------------------------------------------------------------
def _readers() -> int:
    """How many processes share one pass over a dataset: DataLoader workers x ranks."""
    info = torch.utils.data.get_worker_info()
    n = info.num_workers if info is not None else 1
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        n *= dist.get_world_size()
    return n


def note_loose(ds, n: int, batch: int) -> None:
    """Count ``n`` rows served from loose entries; check and pack once this process's share
    of the dataset is done."""
    state = ds.__dict__.setdefault("_autopack", {"count": 0, "next": None})
    readers = _readers()
    if state["next"] is None:
        state["next"] = max(1, int(len(ds) / readers) - batch)
    state["count"] += n
    if state["count"] < state["next"]:
        return
    missing = try_pack(ds)
    if missing:  # check again once this process could have read its part of the rest
        state["next"] = state["count"] + max(1, missing // readers)


def try_pack(ds) -> int:
    """Pack every row of ``ds`` when each has a cache entry. Returns how many rows have none
    yet (0: all packed now, or being packed by the current lock holder)."""
    files, cache = ds._file_table(), ds.image_cache
    rows = ds._file_rows
    with files.lock:
        pending = np.unique(rows[~files.confirmed[rows]])
        for r in pending:
            try:
                key = files.identify(int(r), _key_of(ds))[1]
            except (OSError, PathSafetyError):
                return len(pending)  # an absent or unsafe image: nothing to pack until fixed
            if cache.has(key):
                files.confirmed[r] = True
        unknown = pending[~files.confirmed[pending]]
        if len(unknown):
            _locate(files, cache, unknown)
            files.confirmed[unknown[files.pack[unknown] >= 0]] = True
            if not files.confirmed[unknown].all():
                return int((~files.confirmed[unknown]).sum())
        todo = np.unique(rows[files.pack[rows] < 0])
        if not len(todo):
            return 0
        with exclusive(lock_path(cache)) as held:
            if not held:
                return 0  # another process packs them
            keys = list(files.key[todo])
            by_key = dict(zip(keys, todo))

            def build(key):
                arr, box = ds.pipeline.encode(files.file(int(by_key[key])))
                return arr, box.as_dict()

            cache.pack(keys, build)
        files.pack[todo] = UNKNOWN
        return 0
