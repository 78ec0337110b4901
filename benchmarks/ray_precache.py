"""Numbers behind the Ray pre-cache section of ``docs/scaling.md``.

    python -m benchmarks.ray_precache [--images 128] [--side 748] [--batch-size 8] [--json FILE]

On ``images`` synthetic 16-bit PNGs (``radharmony.fake``) of ``side`` pixels, one dataset
(:class:`BaseRadiologicalDataset` over a hand-built table), each pass on a fresh cache folder:

* ``local_w0`` / ``local_w2``: ``pre_cache(ds, num_workers=0 | 2)`` (keys, decode, entries,
  pack), wall seconds and images per second;
* ``ray_init_s``: ``ray.init(num_cpus=2)`` on a fresh local cluster;
* ``ray_cold``: the first ``pre_cache(ds, engine="ray")`` (workers start and import
  radharmony); ``ray_warm_shared`` / ``ray_warm_driver``: later runs with ``shared_fs=True``
  (tasks write entries) and ``False`` (the driver writes them);
* ``tasks_decode`` vs ``data_decode``: decoding alone, as plain Ray tasks
  (:func:`radharmony.data.precache_ray.encode_batch`, results fetched) and as Ray Data
  ``from_items(paths).map_batches(...).materialize()``, at the same batch size; the first
  use of each (``tasks_first_s``, ``data_first_s``) is timed apart.

Wall times (``time.perf_counter``), median of ``repeats`` passes; the machine's load average
is recorded beside them. Returns (and prints) a dict.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def replica(work: Path, *, images: int, side: int):
    """A dataset factory ``make(cache_dir)`` over ``images`` PNGs under ``work``."""
    import pandas as pd
    import torch

    from radharmony.data.dataset import BaseRadiologicalDataset
    from radharmony.fake.images import synthetic_cxr, write_png
    from radharmony.spec import DatasetSpec

    root = work / f"png{side}"
    rels = []
    for i in range(images):  # square and portrait, as the real corpus
        h, w = (side, side) if i % 2 else (side, int(side * 0.82))
        rel = f"p{i % 10}/{i:05d}.png"
        if not (root / rel).exists():
            write_png(root / rel, synthetic_cxr(h, w, rng=np.random.default_rng(i)))
        rels.append(rel)
    df = pd.DataFrame({"patient_id": [f"p{i}" for i in range(images)],
                       "study_id": [f"s{i}" for i in range(images)], "image_path": rels,
                       "view_position": ["PA"] * images, "report": [None] * images})
    spec = DatasetSpec(key="bench", title="benchmark replica")

    def make(cache_dir):
        return BaseRadiologicalDataset(root, harmonized_df=df, spec=spec, cache_dir=cache_dir,
                                       dtype=torch.float32)
    return make


def _timed(fn, repeats: int) -> float:
    times = []
    for r in range(repeats):
        t = time.perf_counter()
        fn(r)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench(*, images: int = 128, side: int = 748, batch_size: int = 8, repeats: int = 2,
          work: str | os.PathLike | None = None) -> dict:
    import cv2

    from radharmony.data.precache import pre_cache

    cv2.setNumThreads(1)
    out = {"images": images, "side": side, "batch_size": batch_size, "repeats": repeats,
           "cpus": os.cpu_count(), "loadavg_1min_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(work) if work is not None else Path(tmp)
        make = replica(base, images=images, side=side)
        runs = iter(range(10_000))

        def fresh():
            return make(base / f"cache{next(runs)}")

        def record(name: str, seconds: float) -> None:
            out[name] = {"s": round(seconds, 3), "images_per_s": round(images / seconds, 1)}

        for w in (0, 2):
            record(f"local_w{w}", _timed(lambda r: pre_cache(fresh(), num_workers=w,
                                                             progress=False), repeats))
        import ray

        t = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        out["ray_init_s"] = round(time.perf_counter() - t, 3)
        try:
            record("ray_cold", _timed(lambda r: pre_cache(fresh(), engine="ray",
                                                          progress=False,
                                                          batch_size=batch_size), 1))
            for name, shared in (("shared", True), ("driver", False)):
                record(f"ray_warm_{name}", _timed(lambda r: pre_cache(
                    fresh(), engine="ray", progress=False, batch_size=batch_size,
                    shared_fs=shared), repeats))
            out.update(decode_only(ray, make(None), batch_size=batch_size, repeats=repeats))
        finally:
            t = time.perf_counter()
            ray.shutdown()
            out["ray_shutdown_s"] = round(time.perf_counter() - t, 3)
    out["loadavg_1min_after"] = os.getloadavg()[0]
    return out


def decode_only(ray, ds, *, batch_size: int, repeats: int) -> dict:
    """Decoding every image as plain tasks vs Ray Data ``map_batches`` (same batch size)."""
    import ray.data

    from radharmony.data.precache_ray import encode_batch

    paths = [str(ds.image_file(i)) for i in range(len(ds))]
    items = [(i, p, "") for i, p in enumerate(paths)]
    batches = [items[s:s + batch_size] for s in range(0, len(items), batch_size)]
    task = ray.remote(num_cpus=1)(encode_batch)
    pipe = ray.put(ds.pipeline)
    pipeline = ds.pipeline

    def tasks(_):
        for done, failed in ray.get([task.remote(pipe, None, b, False) for b in batches]):
            assert not failed

    def encode(batch: dict) -> dict:
        import cv2

        cv2.setNumThreads(1)
        return {"img": np.stack([pipeline.encode(p)[0] for p in batch["path"]])}

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False

    def data(_):
        ds_ = ray.data.from_items([{"path": p} for p in paths], override_num_blocks=len(batches))
        assert ds_.map_batches(encode, batch_size=batch_size,
                               num_cpus=1).materialize().count() == len(paths)

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    first_tasks, first_data = _timed(tasks, 1), _timed(data, 1)  # first use of each path
    n = len(paths)
    t_tasks, t_data = _timed(tasks, repeats), _timed(data, repeats)
    return {"tasks_first_s": round(first_tasks, 3), "data_first_s": round(first_data, 3),
            "tasks_decode": {"s": round(t_tasks, 3), "images_per_s": round(n / t_tasks, 1)},
            "data_decode": {"s": round(t_data, 3), "images_per_s": round(n / t_data, 1)},
            "data_minus_tasks_per_batch_ms": round((t_data - t_tasks) / len(batches) * 1e3, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=128)
    p.add_argument("--side", type=int, default=748)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = p.parse_args(argv)
    res = bench(images=args.images, side=args.side, batch_size=args.batch_size,
                repeats=args.repeats)
    text = json.dumps(res, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
