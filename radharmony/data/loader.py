"""A thin loader over the datasets' batched reads, for threads instead of worker processes.

``DataLoader(dataset, batch_size=B)`` already reads a whole batch at once (the dataset's
``__getitems__``: one gather from the memory-mapped pack, one vectorized checksum, one dtype
conversion; see :mod:`radharmony.data.batches`). :class:`CachedLoader` drives the same reader
with read-ahead *threads* (the gather, checksum and conversion release the GIL), pre-caches
and packs the dataset up front, and shuffles by ``seed`` and epoch. Its batches equal those of
``DataLoader(dataset, batch_size, collate_fn=radharmony.collate)`` with the same order.

    ds = ReXGradientTrainDataset(base_image_dir, cache_dir="./cache")
    loader = CachedLoader(ds, batch_size=64, shuffle=True, num_workers=2)  # pre-caches once
    for epoch in range(10):
        for batch in loader:  # batch["img"]: (64, 1, 224, 224)
            ...
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import numpy as np
import torch

from .collate import collate
from .precache import pre_cache, require_cache
from .studies import StudyDataset
from .. import threads
from ..errors import RadHarmonyError


class CachedLoader:
    """Batches of a radharmony dataset read from its image cache, a batch per call.

    Args:
        dataset: a dataset (or split/fold of one) with ``cache_dir`` and the built-in
            transform, at image or study level (``level="study"``, padded or packed: its
            image-level dataset's cache). Images not cached yet are cached first
            (``pre_cache``).
        batch_size, shuffle, drop_last: as for ``DataLoader``. With ``shuffle`` the order
            depends only on ``seed`` and the epoch (:meth:`set_epoch`, which each full pass
            advances by one).
        num_workers: threads reading batches ahead of the consumer (gather, checksum and
            conversion release the GIL, and a thread's batch needs no copy into the main
            process, which a DataLoader worker's does). Decoding during the first caching uses
            this many processes.
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
        images = dataset.images if isinstance(dataset, StudyDataset) else dataset  # its cache
        keys = pre_cache(images, num_workers=num_workers, progress=progress).keys
        packs, pack_of, row_of = require_cache(images).locate(keys)
        # images left unpacked (a cache that cannot be written) are read one by one
        images._file_table()  # made here, before any reading thread starts

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
        batch = collate(self.dataset.__getitems__([int(i) for i in indices]))
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
        pool = ThreadPoolExecutor(self.num_workers,  # each reads a batch in place:
                                  thread_name_prefix=threads.PREFIX + "-loader")
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
