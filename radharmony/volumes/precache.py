"""Filling the volume cache ahead of training, in local processes or on a Ray cluster.

A job is one series: its input files (what the cache keys on), the read's parameters and a
loader returning its :class:`~radharmony.volumes.Volume` (a picklable callable, e.g.
``functools.partial(read_volume, path)``). :func:`pre_cache_volumes` stores each job's
canonical volume and, for each of ``presets``, the preset's cached geometry, skipping what is
cached already (an interrupted run resumes where it stopped). Failures are collected with the
job's first input (``keep_going=True``) or stop the run.

``engine="ray"`` runs one Ray task per job on the cluster at ``address`` (or on a local one of
``num_workers`` CPUs); the tasks write the entries themselves, so the cache folder must be one
folder every node mounts at the same path (CT-RATE decoded is ~8 TB: entries are not shipped
through the driver). The driver checks every entry is visible to it afterwards.

Example::

    from functools import partial
    jobs = [VolumeJob([p], partial(read_volume, p), {"reader": "nifti"}) for p in paths]
    report = pre_cache_volumes(VolumeCache("./cache"), jobs, presets=["merlin"],
                               num_workers=8)
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

from ..errors import RadHarmonyError, check_choice
from ..optional import require_ray
from .cache import VolumeCache
from .presets import PRESET_SOURCES, get_preset, preset_array
from .volume import Volume

#: how many failures a report lists
FIRST_N = 10


class VolumeJob(NamedTuple):
    """One series to cache: ``inputs`` (keyed), ``load`` (returns the Volume), ``params``."""
    inputs: Sequence[str]
    load: Callable[[], Volume]
    params: dict = {}


@dataclass
class VolumePreCacheReport:
    """What :func:`pre_cache_volumes` did: counts and the first failures."""
    volumes: int
    cached: int
    skipped: int
    failed: int
    seconds: float
    first_failures: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failed == 0


def _keys(cache: VolumeCache, job: VolumeJob, presets) -> list[str]:
    keys = [cache.key(job.inputs, job.params)]
    for preset in presets:
        keys.append(cache.key(job.inputs, {"volume": job.params, "preset": preset.record()},
                              sources=PRESET_SOURCES))
    return keys


def run_job(cache: VolumeCache, job: VolumeJob, presets) -> tuple[list[str], str | None]:
    """Cache ``job``'s volume and its ``presets``; returns ``(keys, error or None)``."""
    try:
        cache.get(job.inputs, job.params, job.load)
        for preset in presets:
            preset_array(cache, preset, job.inputs, job.params, job.load)
        return _keys(cache, job, presets), None
    except RadHarmonyError as exc:
        return [], f"{type(exc).__name__}: {exc}"


def pre_cache_volumes(cache: VolumeCache, jobs: Sequence[VolumeJob | tuple], *,
                      presets: Sequence = (), num_workers: int = 0, engine: str = "local",
                      address: str | None = None, keep_going: bool = False
                      ) -> VolumePreCacheReport:
    """Cache every job's volume (and ``presets``' outputs) not cached yet; see the module
    docstring. ``num_workers``: processes (local; 0 runs here) or the local Ray cluster's
    CPUs."""
    check_choice("engine", engine, ("local", "ray"))
    if cache.folder is None:
        raise RadHarmonyError("Pre-caching needs a cache on disk",
                              expected="VolumeCache('./cache')", found="a memory-only cache",
                              fix="pass a folder: memory entries end with the process")
    start = time.perf_counter()
    jobs = [VolumeJob(*job) for job in jobs]
    presets = [get_preset(p) for p in presets]
    todo = [i for i, job in enumerate(jobs)
            if not all(cache.has(k) for k in _keys(cache, job, presets))]
    if engine == "ray":
        results = _on_ray(cache, [jobs[i] for i in todo], presets, num_workers, address)
    elif num_workers > 0:
        with ProcessPoolExecutor(num_workers) as pool:
            results = list(pool.map(run_job, [cache] * len(todo), [jobs[i] for i in todo],
                                    [presets] * len(todo)))
    else:
        results = [run_job(cache, jobs[i], presets) for i in todo]
    failures = []
    for i, (keys, error) in zip(todo, results):
        if error is not None:
            if not keep_going:
                raise RadHarmonyError(f"Volume {jobs[i].inputs[0]} could not be cached",
                                      expected="a volume its loader reads", found=error,
                                      fix="repair or remove it, or pass keep_going=True to "
                                          "collect every failure")
            failures.append({"inputs": [str(p) for p in jobs[i].inputs], "detail": error})
        elif engine == "ray" and not all(cache.has(k) for k in keys):
            raise RadHarmonyError(f"An entry a Ray worker wrote is not in {cache.folder} as "
                                  "the driver sees it", expected="the cache folder on a "
                                  "filesystem every node mounts at the same path",
                                  found=f"no entry for {jobs[i].inputs[0]}",
                                  fix="put the cache folder on a shared filesystem")
    return VolumePreCacheReport(volumes=len(jobs), cached=len(jobs) - len(failures),
                                skipped=len(jobs) - len(todo), failed=len(failures),
                                seconds=time.perf_counter() - start,
                                first_failures=failures[:FIRST_N])


def _on_ray(cache, jobs, presets, num_workers, address):
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, num_cpus=None if address else (num_workers or None),
                 include_dashboard=False, logging_level="ERROR")
    try:
        task = ray.remote(num_cpus=1)(run_job)
        cache_ref = ray.put(cache)
        refs = [task.remote(cache_ref, job, presets) for job in jobs]
        out = []
        for ref in refs:
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayError as exc:  # the task itself failed
                out.append(([], f"Ray task failed: {str(exc).strip().splitlines()[-1][:300]}"))
        return out
    finally:
        if started:
            ray.shutdown()


__all__ = ["VolumeJob", "VolumePreCacheReport", "pre_cache_volumes", "run_job"]
