"""Equal, disjoint portions of an export for every rank and DataLoader worker.

A distributed job stalls (or silently drops a rank's last step) when its ranks see different
numbers of samples. :func:`rank_shards` plans one epoch for one *consumer* (a rank, or one
DataLoader worker of a rank) from the manifest's per-shard counts alone:

1. the shards are put in an order drawn from ``(seed, epoch)`` (or kept in export order);
2. their samples, in that order, form the epoch's sequence of ``T`` samples;
3. the sequence is made a multiple of ``C = world_size * num_workers``: ``pad=True`` repeats
   it from its start (every sample is seen, a few twice), ``pad=False`` drops its tail (no
   sample twice, up to ``C - 1`` left out this epoch; the order changes each epoch, so
   different ones);
4. consumer ``c = rank * num_workers + worker`` takes the ``c``-th of ``C`` equal contiguous
   blocks, so it reads few shards, each sequentially.

Every consumer therefore gets exactly ``ceil(T / C)`` (pad) or ``floor(T / C)`` (drop) samples;
without padding the blocks are disjoint and cover all but the dropped tail.

Resuming: ``start`` is how many samples the *rank* has consumed this epoch. With several
DataLoader workers the loader takes batches from them in turn, so a worker has consumed
``batch_size`` samples for each of its turns among the first ``start // batch_size`` batches.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .codec import ExportError, decode_sample
from .manifest import read_manifest, shard_keys


@dataclass(frozen=True)
class Segment:
    """Consecutive samples of one shard: its URL and the keys to take, in tar order."""

    url: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class ShardPlan:
    """One consumer's samples for one epoch.

    Attributes:
        segments: what to read, in order.
        per_consumer: samples every consumer gets this epoch (before ``start`` is skipped).
        skipped: samples of this consumer skipped for resumption.
        total: samples in the export (``T``).
    """

    segments: tuple[Segment, ...]
    per_consumer: int
    skipped: int
    total: int

    def __len__(self) -> int:
        return sum(len(s.keys) for s in self.segments)

    def keys(self) -> list[str]:
        return [k for s in self.segments for k in s.keys]


def _check_int(name: str, value, *, low: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ExportError(f"rank_shards: {name} must be an integer >= {low}",
                          expected=f"an integer >= {low}", found=repr(value), fix=fix)
    return int(value)


def _manifest(source) -> tuple[dict, str]:
    if isinstance(source, dict):
        return source, ""
    path = Path(source)
    return read_manifest(path), str(path if path.is_dir() else path.parent)


def _url(base: str, name: str) -> str:
    if "{name}" in base:
        return base.replace("{name}", name)
    return f"{base.rstrip('/')}/{name}" if base else name


def worker_skip(start: int, *, worker: int, num_workers: int, batch_size: int,
                per_consumer: int) -> int:
    """How many of its samples ``worker`` had yielded when its rank had consumed ``start``."""
    if num_workers == 1:
        return min(start, per_consumer)
    if start % batch_size:
        raise ExportError("rank_shards: start must be a whole number of batches with several "
                          "DataLoader workers", expected=f"a multiple of batch_size="
                          f"{batch_size}", found=f"start={start}",
                          fix="resume from a batch boundary (the count after a whole batch)")
    batches = start // batch_size
    return min(per_consumer, len(range(worker, batches, num_workers)) * batch_size)


def rank_shards(manifest, *, rank: int, world_size: int, worker: int = 0,
                num_workers: int = 1, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                pad: bool = True, start: int = 0, batch_size: int = 1,
                base_url: str | None = None) -> ShardPlan:
    """The samples consumer ``(rank, worker)`` reads in ``epoch`` (see the module notes).

    Args:
        manifest: an export folder, its ``manifest.json``, or the manifest dict.
        rank, world_size: this process's rank and the number of ranks.
        worker, num_workers: this DataLoader worker and the loader's worker count (use
            ``num_workers=1`` for a loader with ``num_workers=0``).
        seed, epoch: the shard order is drawn from ``numpy.random.default_rng([seed,
            epoch])`` (no global RNG); ``shuffle=False`` keeps the export order.
        pad: repeat samples so no sample is left out (True) or drop the tail (False).
        start: samples the rank has already consumed this epoch (resumption).
        batch_size: the DataLoader's batch size (only used to resume with several workers).
        base_url: where the shards are: a folder or URL prefix (default: the manifest's
            folder), or a template with ``{name}``, e.g.
            ``"pipe:aws s3 cp s3://bucket/export/{name} -"``.

    Example:
        >>> plan = rank_shards("export/", rank=1, world_size=3)  # doctest: +SKIP
        >>> len(plan)   # the same on every rank  # doctest: +SKIP
        334
    """
    doc, folder = _manifest(manifest)
    world_size = _check_int("world_size", world_size, low=1, fix="pass world_size=N ranks")
    rank = _check_int("rank", rank, low=0, fix="pass rank=0 .. world_size - 1")
    num_workers = _check_int("num_workers", num_workers, low=1,
                             fix="pass the DataLoader's num_workers, or 1 for 0")
    worker = _check_int("worker", worker, low=0, fix="pass worker=0 .. num_workers - 1")
    start = _check_int("start", start, low=0, fix="pass the number of samples consumed")
    batch_size = _check_int("batch_size", batch_size, low=1, fix="pass the batch size")
    if rank >= world_size or worker >= num_workers:
        raise ExportError("rank_shards: rank or worker out of range",
                          expected=f"rank < world_size ({world_size}) and worker < "
                          f"num_workers ({num_workers})", found=f"rank={rank}, worker={worker}",
                          fix="pass torch.distributed.get_rank() and the worker id")
    base = folder if base_url is None else base_url
    shards = doc["shards"]
    counts = np.array([s["count"] for s in shards], np.int64)
    order = np.random.default_rng([int(seed), int(epoch)]).permutation(len(shards)) \
        if shuffle else np.arange(len(shards))
    total = int(counts.sum())
    consumers = world_size * num_workers
    per = math.ceil(total / consumers) if pad else total // consumers
    me = rank * num_workers + worker
    skip = worker_skip(start, worker=worker, num_workers=num_workers, batch_size=batch_size,
                       per_consumer=per)
    # positions in the epoch's sequence (wrapping around for padding)
    lo, hi = me * per + skip, (me + 1) * per
    offsets = np.concatenate(([0], np.cumsum(counts[order])))
    segments: list[Segment] = []
    pos = lo
    while pos < hi and total:
        cycle, p = divmod(pos, total)
        j = int(np.searchsorted(offsets, p, side="right") - 1)  # index into order
        shard = shards[int(order[j])]
        first = p - int(offsets[j])
        take = min(hi - pos, int(counts[order[j]]) - first)
        keys = shard_keys(shard)[first:first + take]
        segments.append(Segment(_url(base, shard["name"]), tuple(keys)))
        pos += take
    return ShardPlan(tuple(segments), per, skip, total)


def _dist_rank() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class ShardedWebDataset(torch.utils.data.IterableDataset):
    """Reads an export with the ``webdataset`` library, equal samples on every rank and worker.

    Each consumer's :func:`rank_shards` plan is read through ``webdataset.WebDataset`` (one
    per segment, node and worker splitting off: the plan already split) and each sample is
    turned back into the dataset's ``ds[i]`` by :func:`decode_sample`.

    Args:
        source: the export folder, its ``manifest.json`` or the manifest dict.
        rank, world_size: default: from ``torch.distributed`` when initialized, else 0 and 1.
        num_workers: the DataLoader's ``num_workers`` (checked when iterating).
        seed, epoch, shuffle, pad, start, batch_size, base_url: as in :func:`rank_shards`.
        shuffle_buffer: also shuffle samples within a consumer through a buffer of this size
            (deterministic from ``(seed, epoch, rank, worker)``); 0: shard order only.
        dtype: dtype of ``img``. decode: False yields the raw webdataset samples.

    Call :meth:`set_epoch` before each epoch (the DataLoader copies the dataset into its
    workers when an epoch starts, unless ``persistent_workers=True``).

    Example:
        >>> data = ShardedWebDataset("export/", num_workers=2, pad=True)  # doctest: +SKIP
        >>> loader = DataLoader(data, batch_size=32, num_workers=2,
        ...                     collate_fn=radharmony.collate)  # doctest: +SKIP
        >>> for epoch in range(10):
        ...     data.set_epoch(epoch)  # doctest: +SKIP
        ...     for batch in loader: ...  # doctest: +SKIP
    """

    def __init__(self, source, *, rank: int | None = None, world_size: int | None = None,
                 num_workers: int = 0, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                 shuffle_buffer: int = 0, pad: bool = True, start: int = 0, batch_size: int = 1,
                 base_url: str | None = None, dtype: torch.dtype = torch.float32,
                 decode: bool = True):
        super().__init__()
        self.manifest, folder = _manifest(source)
        self.base_url = folder if base_url is None else base_url
        if rank is None or world_size is None:
            r, w = _dist_rank()
            rank, world_size = (r if rank is None else rank), (w if world_size is None
                                                               else world_size)
        self.rank, self.world_size = rank, world_size
        self.num_workers = num_workers
        self.seed, self.epoch, self.shuffle, self.pad = seed, epoch, shuffle, pad
        self.shuffle_buffer = _check_int("shuffle_buffer", shuffle_buffer, low=0,
                                         fix="pass 0 or a buffer size")
        self.start, self.batch_size = start, batch_size
        self.dtype, self.decode = dtype, decode
        self._plan(0)  # checks the arguments now

    def set_epoch(self, epoch: int, *, start: int = 0) -> None:
        """Read ``epoch`` next, resuming after ``start`` samples of this rank."""
        self.epoch, self.start = epoch, start

    def _plan(self, worker: int, start: int | None = None) -> ShardPlan:
        return rank_shards(self.manifest, rank=self.rank, world_size=self.world_size,
                           worker=worker, num_workers=max(1, self.num_workers), seed=self.seed,
                           epoch=self.epoch, shuffle=self.shuffle, pad=self.pad,
                           start=self.start if start is None else start,
                           batch_size=self.batch_size, base_url=self.base_url)

    def __len__(self) -> int:
        """Samples this rank yields this epoch (after ``start``)."""
        return sum(len(self._plan(w)) for w in range(max(1, self.num_workers)))

    def _raw(self, plan: ShardPlan):
        try:
            import webdataset as wds
        except ImportError:  # pragma: no cover - depends on the environment
            raise ExportError("Reading an export needs the webdataset package",
                              expected="webdataset installed", found="ImportError",
                              fix="pip install radharmony[webdataset]") from None
        for seg in plan.segments:
            wanted = set(seg.keys)
            left = len(seg.keys)
            pipe = wds.WebDataset([seg.url], shardshuffle=False, nodesplitter=None,
                                  workersplitter=None, empty_check=False, seed=0)
            for sample in pipe:
                if sample["__key__"] in wanted:
                    yield sample
                    left -= 1
                    if not left:
                        break
                elif sample["__key__"] > seg.keys[-1]:
                    break
            if left:
                raise ExportError(f"Shard {seg.url} ended early", expected=f"keys "
                                  f"{seg.keys[0]} .. {seg.keys[-1]} as the manifest lists",
                                  found=f"{left} of {len(seg.keys)} missing",
                                  fix="export again (shards failing their checksum are "
                                      "rewritten)")

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, n = (0, 0) if info is None else (info.id, info.num_workers)
        if n != self.num_workers:
            raise ExportError("ShardedWebDataset was built for another number of DataLoader "
                              "workers", expected=f"num_workers={self.num_workers}",
                              found=f"a DataLoader with num_workers={n}",
                              fix=f"build it with num_workers={n}, as the DataLoader")
        buffered = self.shuffle_buffer > 0
        plan = self._plan(worker, start=0 if buffered else None)
        stream = self._raw(plan)
        if buffered:
            stream = self._shuffled(stream, worker)
            skip = worker_skip(self.start, worker=worker, num_workers=max(1, self.num_workers),
                               batch_size=self.batch_size, per_consumer=plan.per_consumer)
            for _ in range(skip):  # raw bytes only: nothing is decoded
                next(stream, None)
        for sample in stream:
            yield decode_sample(sample, dtype=self.dtype) if self.decode else sample

    def _shuffled(self, stream, worker: int):
        rng = np.random.default_rng([int(self.seed), int(self.epoch), self.rank, worker])
        buf: list = []
        for sample in stream:
            if len(buf) < self.shuffle_buffer:
                buf.append(sample)
                continue
            j = int(rng.integers(len(buf)))
            buf[j], sample = sample, buf[j]
            yield sample
        rng.shuffle(buf)
        yield from buf


def local_urls(folder: str | os.PathLike) -> list[str]:
    """The shard paths of the export in ``folder``, in export order."""
    doc = read_manifest(folder)
    return [str(Path(folder) / s["name"]) for s in doc["shards"]]


__all__ = ["Segment", "ShardPlan", "ShardedWebDataset", "local_urls", "rank_shards",
           "worker_skip"]
