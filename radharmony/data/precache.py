"""Filling the image cache ahead of training, and consolidating it into packs.

Works on any dataset that offers ``len``, ``image_file(i)``, ``load_image(i)`` (decode through
the cache), ``image_cache`` (an :class:`~radharmony.imaging.cache.ImageCache`), ``pipeline`` and
``sample_ids``; it never imports the dataset class. Decoding runs in DataLoader worker
processes; failures are collected with their ``sample_id`` (``keep_going=True``) or raised
naming the sample. Once every image is cached the entries are packed, so that batched reads
(:class:`~radharmony.data.loader.CachedLoader`) gather a batch with one copy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .shared import SharedImageWatch, file_id
from ..errors import ImageReadError, PathSafetyError, RadHarmonyError, check_choice
from ..imaging.read import check_regular

#: how many failures a report lists
FIRST_N = 10


@dataclass
class PreCacheReport:
    """What :func:`pre_cache` did: counts, the first failures and the keys of every sample."""

    images: int
    cached: int
    failed: int
    seconds: float
    first_failures: list[dict] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def as_dict(self) -> dict:
        return {"images": self.images, "cached": self.cached, "failed": self.failed,
                "first_failures": self.first_failures, "seconds": round(self.seconds, 3),
                "images_per_second": round(self.images / self.seconds, 1)
                if self.seconds > 0 else None}


def require_cache(ds):
    """``ds.image_cache``, or an error saying how to build the dataset with one."""
    if getattr(ds, "image_cache", None) is None:
        raise RadHarmonyError(f"{type(ds).__name__} has no image cache",
                              expected="a dataset built with cache_dir and the built-in "
                              "transform", found="cache_dir=None or a user transform",
                              fix="build it with cache_dir='./cache' and transform=None "
                              "(or a DefaultTransform)")
    return ds.image_cache


def cache_keys(ds, *, failures: list | None = None) -> list[str | None]:
    """The cache key of every sample's image (one ``stat`` each). A missing or unsafe file
    raises the standard error naming the sample, or, when a ``failures`` list is given, gives
    None and appends ``(index, message)`` to it. One image file reached from rows of two
    patients warns once (:mod:`radharmony.data.shared`: a dataset build's file table tells its
    watch as it derives the keys; for any other dataset the identities read here do)."""
    cache = require_cache(ds)
    own = getattr(ds, "cache_key", None)  # a dataset build's: keys kept in its file table
    watch = None if own is not None else SharedImageWatch.of(ds)
    keys: list[str | None] = []
    for i in range(len(ds)):
        try:
            if own is not None:
                keys.append(own(i))
                continue
            path = ds.image_file(i)
            st = check_regular(path)
            if watch is not None:
                watch.note(i, file_id(st), path)
            keys.append(cache.key(path, resolved=True, st=st))
        except (OSError, ImageReadError, PathSafetyError) as exc:
            try:
                ds[i]  # raises the standard error naming the sample and file
            except RadHarmonyError as named:
                exc = named
            if failures is None:
                raise exc from None
            keys.append(None)
            failures.append((i, str(exc)))
    return keys


class _Encoder(torch.utils.data.Dataset):
    """Decodes and caches samples ``indices`` of ``ds`` in chunks; yields the failures."""

    chunk = 8

    def __init__(self, ds, indices: list[int], keep_going: bool):
        self.ds, self.indices, self.keep_going = ds, indices, keep_going

    def __len__(self) -> int:
        return -(-len(self.indices) // self.chunk)

    def __getitem__(self, i: int) -> tuple[int, list[tuple[int, str]]]:
        todo = self.indices[i * self.chunk:(i + 1) * self.chunk]
        failed = []
        for index in todo:
            try:
                self.ds.load_image(index)  # decodes and caches; no other outputs
            except RadHarmonyError as exc:
                if not self.keep_going:
                    if isinstance(exc, (ImageReadError, PathSafetyError)):
                        self.ds[index]  # raises the standard error naming the sample
                    raise
                failed.append((index, str(exc)))
        return len(todo), failed


def pre_cache(ds, *, num_workers: int = 0, progress: bool = True, keep_going: bool = False,
              engine: str = "local", address: str | None = None,
              **ray_options) -> PreCacheReport:
    """Decode and cache every image of ``ds`` not cached yet, then pack the entries.

    Safe to run from several processes at once and to interrupt (finished images are kept).
    With ``keep_going`` a failing image is recorded (its ``sample_id`` and the error) instead of
    stopping the run, and nothing is packed until every image succeeded. ``engine="ray"``
    decodes on a Ray cluster (``address``, or a local one with ``num_workers`` CPUs) and writes
    the same entries and pack; ``ray_options`` go to
    :func:`radharmony.data.precache_ray.decode_on_ray` (``batch_size``, ``shared_fs``).
    """
    from tqdm.auto import tqdm

    own = getattr(ds, "pre_cache_volumes", None)  # a volume dataset fills its volume cache
    if own is not None:
        return own(num_workers=num_workers, progress=progress, keep_going=keep_going,
                   engine=engine, address=address, **ray_options)
    check_choice("engine", engine, ("local", "ray"))
    if engine == "local" and (address is not None or ray_options):
        raise RadHarmonyError("address and Ray options need engine='ray'", expected="engine="
                              "'ray' with them", found=f"engine='local' with "
                              f"{sorted(ray_options) + (['address'] if address else [])}",
                              fix="pass engine='ray', or drop those arguments")
    start = time.perf_counter()
    cache = require_cache(ds)
    failures: list[tuple[int, str]] = []
    keys = cache_keys(ds, failures=failures if keep_going else None)
    known = [i for i, k in enumerate(keys) if k is not None]
    _, pack_of, _ = cache.locate([keys[i] for i in known])
    todo = [known[j] for j in np.flatnonzero(pack_of < 0) if not cache.has(keys[known[j]])]
    if todo and engine == "ray":
        from .precache_ray import decode_on_ray

        failures += decode_on_ray(ds, todo, keys, keep_going=keep_going, progress=progress,
                                  num_workers=num_workers, address=address, **ray_options)
    elif todo:
        loader = torch.utils.data.DataLoader(_Encoder(ds, todo, keep_going), batch_size=None,
                                             num_workers=num_workers)
        with tqdm(total=len(todo), desc=f"caching {type(ds).__name__}", unit="img",
                  disable=not progress) as bar:
            for n, failed in loader:
                failures += [(int(i), str(d)) for i, d in failed]
                bar.update(int(n))
    if not failures:
        index = {k: i for i, k in enumerate(keys)}

        def build(key):
            arr, box = ds.pipeline.encode(ds.image_file(index[key]))
            return arr, box.as_dict()

        cache.pack(keys, build, progress=lambda it: tqdm(
            it, desc="packing cache", unit="img", disable=not progress))
    failures.sort()
    ids = ds.sample_ids
    first = [{"sample_id": ids[i], "detail": d} for i, d in failures[:FIRST_N]]
    return PreCacheReport(images=len(ds), cached=len(ds) - len(failures), failed=len(failures),
                          seconds=time.perf_counter() - start, first_failures=first, keys=keys)
