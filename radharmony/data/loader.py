"""Cached epochs at memory speed: whole batches gathered from the cache's packs.

A ``DataLoader`` over a map-style dataset pays Python per sample (``__getitem__``, one file
read, one tensor, collation). :class:`CachedLoader` pays it per batch: the batch's records are
copied out of the memory-mapped pack with one ``numpy.take``, checked with one vectorized
checksum, converted to ``dtype`` in one tensor operation, and only the requested extra outputs
(reports, labels, boxes) are looked up per sample. Its batches equal those of
``DataLoader(dataset, batch_size, collate_fn=radharmony.collate)`` with the same order, also
when image files change while it runs: each batch ``stat``s its files (:class:`FileStamps`)
and a sample whose file changed since the loader was built is read through the dataset's
per-item path (fresh key, rebuilt entry) instead of its pack record.

    ds = ReXGradientTrainDataset(base_image_dir, cache_dir="./cache")
    loader = CachedLoader(ds, batch_size=64, shuffle=True, num_workers=2)  # pre-caches once
    for epoch in range(10):
        for batch in loader:  # batch["img"]: (64, 1, 224, 224)
            ...
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import numpy as np
import torch

from .precache import pre_cache, require_cache
from .sampling import assemble_batch
from ..errors import RadHarmonyError
from ..imaging.geometry import Letterbox
from ..imaging.packs import Pack, warn_bad_record


def _stamp(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class FileStamps:
    """What each sample's image file looked like when a batched reader was built (size,
    modification and change time, inode -- what its cache key depends on), so that a reader
    can tell, with one ``stat`` per sample, which pack records no longer match their file.

    ``FileStamps.of(dataset)`` takes them; ``changed(indices)`` is a boolean mask of the
    samples whose file differs now (or is gone, or could not be resolved).
    """

    def __init__(self, paths: list, stamps: list):
        self.paths, self.stamps = paths, stamps

    @classmethod
    def of(cls, dataset) -> "FileStamps":
        paths: list = []
        for i in range(len(dataset)):
            try:
                paths.append(str(dataset.image_file(i)))
            except RadHarmonyError:
                paths.append(None)  # unsafe: always "changed", the per-item path raises
        return cls(paths, [None if p is None else _stamp(p) for p in paths])

    def changed(self, indices) -> np.ndarray:
        paths, stamps = self.paths, self.stamps
        return np.fromiter(((paths[i] is None or stamps[i] is None or
                             _stamp(paths[i]) != stamps[i]) for i in indices.tolist()),
                           bool, len(indices))


class _BatchReader:
    """Reads batches of sample indices of ``dataset`` from packs (opened lazily per process);
    samples without a sound, current pack record go through ``dataset.load_image``."""

    def __init__(self, dataset, pack_paths: list, pack_of: np.ndarray, row_of: np.ndarray,
                 stamps: FileStamps | None = None):
        self.dataset, self.pack_paths = dataset, pack_paths
        self.pack_of, self.row_of = pack_of, row_of
        self.stamps = stamps
        self._packs: list[Pack] | None = None

    def __getstate__(self):
        return {**self.__dict__, "_packs": None}

    def packs(self) -> list[Pack]:
        if self._packs is None:
            self._packs = [Pack(p) for p in self.pack_paths]
        return self._packs

    def __call__(self, indices: np.ndarray) -> dict:
        ds, packs = self.dataset, self.packs()
        which, rows = self.pack_of[indices].copy(), self.row_of[indices]
        if self.stamps is not None:  # a file changed since the packs were located: re-read
            which[self.stamps.changed(indices)] = -1
        if packs:
            buf = np.empty((len(indices), *packs[0].shape), packs[0].dtype)
        else:
            size = ds.pipeline.size
            buf = np.empty((len(indices), size, size), ds.pipeline.params()["storage"])
        ok = which >= 0
        for p in np.unique(which[ok]):
            sel = np.flatnonzero(which == p)
            if len(sel) == len(indices):  # the common case: one pack, one gather
                ok = packs[p].read(rows, out=buf)[1]
            else:
                buf[sel], ok[sel] = packs[p].read(rows[sel])
        boxes: list = [None] * len(indices)
        for j in np.flatnonzero(~ok):  # damaged, stale or unpacked: the per-item path
            if which[j] >= 0:
                warn_bad_record(packs[which[j]], int(rows[j]))
            buf[j], boxes[j] = ds.load_image(int(indices[j]))
        if ds.outputs:  # boxes and masks follow the letterbox
            boxes = [box if box is not None else Letterbox(**packs[p].info_dict(int(r)))
                     for box, p, r in zip(boxes, which, rows)]
        else:
            boxes = [None] * len(indices)
        return assemble_batch(ds, indices, buf, boxes)


class CachedLoader:
    """Batches of a radharmony dataset read from its image cache, a batch per call.

    Args:
        dataset: a dataset (or split/fold of one) with ``cache_dir`` and the built-in
            transform. Images not cached yet are cached first (``dataset.pre_cache``).
        batch_size, shuffle, drop_last: as for ``DataLoader``. With ``shuffle`` the order
            depends only on ``seed`` and the epoch (:meth:`set_epoch`, which each full pass
            advances by one).
        num_workers: threads reading batches ahead of the consumer (gather, checksum and
            conversion release the GIL; worker processes would add a copy of every batch
            through shared memory, which costs more than the read itself). Decoding during
            the first caching uses this many processes.
        prefetch_factor: batches read ahead per thread (default 2).
        pin_memory: pin ``img`` in page-locked memory (when CUDA is available).
        progress: show progress bars while caching.
    """

    def __init__(self, dataset, batch_size: int = 64, *, shuffle: bool = False,
                 drop_last: bool = False, num_workers: int = 0, seed: int = 0,
                 pin_memory: bool = False, prefetch_factor: int | None = None,
                 progress: bool = True):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise RadHarmonyError("CachedLoader batch_size must be a positive integer",
                                  expected="e.g. batch_size=64", found=repr(batch_size),
                                  fix="pass batch_size=64")
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle
        self.drop_last, self.num_workers, self.seed = drop_last, num_workers, seed
        self.pin_memory, self.prefetch_factor = pin_memory, prefetch_factor
        self.epoch = 0
        stamps = FileStamps.of(dataset)  # before the keys: a later change reads as "changed"
        keys = pre_cache(dataset, num_workers=num_workers, progress=progress).keys
        packs, pack_of, row_of = require_cache(dataset).locate(keys)
        # images not packed (a cache that cannot be written) are read per item
        self._reader = _BatchReader(dataset, [p.path for p in packs], pack_of, row_of, stamps)
        self._reader.packs()  # opened here, before any reading thread starts

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def batches(self) -> list[np.ndarray]:
        """The sample indices of each batch of the current epoch."""
        n = len(self.dataset)
        order = np.random.default_rng([self.seed, self.epoch]).permutation(n) \
            if self.shuffle else np.arange(n)
        return [order[i:i + self.batch_size] for i in range(0, len(self) * self.batch_size,
                                                            self.batch_size)]

    def _read(self, indices: np.ndarray) -> dict:
        batch = self._reader(indices)
        if self.pin_memory and torch.cuda.is_available():
            batch["img"] = batch["img"].pin_memory()
        return batch

    def __iter__(self):
        batches = self.batches()
        self.epoch += 1
        if self.num_workers == 0:
            for b in batches:
                yield self._read(b)
            return
        pool = ThreadPoolExecutor(self.num_workers, thread_name_prefix="radharmony-loader")
        try:
            todo = iter(batches)
            ahead = deque(pool.submit(self._read, b) for b in
                          islice(todo, self.num_workers * (self.prefetch_factor or 2)))
            while ahead:
                done = ahead.popleft()
                nxt = next(todo, None)
                if nxt is not None:
                    ahead.append(pool.submit(self._read, nxt))
                yield done.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
