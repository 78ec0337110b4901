"""Numbers behind ``docs/scaling.md``: per-image pipeline cost, export cost, Ray overheads.

    python -m benchmarks.scaling [--images 24] [--sides 748 1496] [--no-ray] [--json FILE]

Measured in this process, one core:

* ``read``: decoding a 16-bit grayscale PNG of ReXGradient size (``radharmony.imaging.
  read_image``); ``encode``: the built-in pipeline's whole ``DefaultTransform().encode``
  (decode, area resize, percentile window, pad, quantize); ``export``: ``encode`` plus the
  export's own work per sample (224 x 224 PNG, JSON, tar member), from ``to_webdataset``.
  Images are synthetic (``radharmony.fake``) at the sides given: 748 px is 1/4 of a
  2,992-px detector side (the card: PNGs are downsampled to 1/4 of the original dimensions);
  the real corpus mixes sizes from about 440 to 750 px.
* Ray (optional; ``pip install radharmony[ray]``): ``ray.init(num_cpus=2)`` wall time on a
  fresh local cluster, the round trip of one trivial ``@ray.remote`` task, the throughput of
  ``tasks`` trivial tasks submitted at once, and a Ray Data ``map_batches`` over ``items``
  tiny rows (``batch_size=1`` and ``batch_size=64``), then ``ray.shutdown()``.

Each timing is the median of ``repeats`` passes. Results are returned (and printed) as a dict.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _median_per_item(fn, items, repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds per item; CPU time is what a dedicated core would take on a
    machine shared with other work."""
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        for it in items:
            fn(it)
        wall.append((time.perf_counter() - t) / len(items))
        cpu.append((time.process_time() - c) / len(items))
    return statistics.median(wall), statistics.median(cpu)


def pipeline_costs(work: Path, *, images: int, side: int, repeats: int) -> dict:
    """Seconds per image for read / encode / export on ``images`` 16-bit PNGs of ``side``."""
    import torch

    from radharmony.export import to_webdataset
    from radharmony.fake.images import synthetic_cxr, write_png
    from radharmony.fake.xraydar import make_records
    from radharmony.imaging.read import read_image
    from radharmony.imaging.pipeline import DefaultTransform

    folder = work / f"png{side}"
    paths = []
    for i in range(images):  # aspect ratios as the real corpus: square and portrait
        h, w = (side, side) if i % 2 else (side, int(side * 0.82))
        p = folder / f"{i:04d}.png"
        if not p.exists():
            write_png(p, synthetic_cxr(h, w, rng=np.random.default_rng(i)))
        paths.append(p)
    png_bytes = sum(p.stat().st_size for p in paths) / len(paths)
    transform = DefaultTransform()
    out = {"side": side, "images": images, "mean_png_bytes": round(png_bytes)}
    out["read_s"], out["read_cpu_s"] = _median_per_item(
        lambda p: read_image(p, min_side=224), paths, repeats)
    out["encode_s"], out["encode_cpu_s"] = _median_per_item(transform.encode, paths, repeats)

    # the export: an X-Raydar-format replica whose images are these PNGs
    root = work / f"xraydar{side}"
    records = make_records(images, seed=0, sizes=(side, side))
    (root / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for rec, p in zip(records, paths):
        rec.pop("_size")
        target = root / rec["image_file"]
        if not target.exists():
            os.link(p, target) if hasattr(os, "link") else target.write_bytes(p.read_bytes())
        lines.append(json.dumps(rec))
    (root / "annotations.jsonl").write_text("\n".join(lines) + "\n")
    from radharmony.registry import get_dataset_class

    ds = get_dataset_class("xraydar_multimodal")(root, output_cls=True, output_bbox=True,
                                                 output_report=True, cache_dir=None,
                                                 dtype=torch.float32)
    times, cpu = [], []
    for r in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        m = to_webdataset(ds, work / f"export{side}-{r}", shard_size=1000, progress=False)
        times.append((time.perf_counter() - t) / len(ds))
        cpu.append((time.process_time() - c) / len(ds))
    out["export_s"], out["export_cpu_s"] = statistics.median(times), statistics.median(cpu)
    out["export_bytes_per_sample"] = round(sum(s["bytes"] for s in m["shards"]) / len(ds))
    return out


def ray_costs(*, tasks: int = 200, items: int = 300) -> dict:
    """Ray local start-up and per-task overheads (needs ``ray``)."""
    import ray

    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    out = {"ray_version": ray.__version__, "init_s": time.perf_counter() - t}
    try:
        @ray.remote
        def noop(x):
            return x

        t = time.perf_counter()
        ray.get(noop.remote(0))
        out["first_task_s"] = time.perf_counter() - t
        rtts = []
        for i in range(20):
            t = time.perf_counter()
            ray.get(noop.remote(i))
            rtts.append(time.perf_counter() - t)
        out["task_round_trip_s"] = statistics.median(rtts)
        t = time.perf_counter()
        ray.get([noop.remote(i) for i in range(tasks)])
        out["tasks"] = tasks
        out["task_throughput_s_per_task"] = (time.perf_counter() - t) / tasks

        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False

        def ident(batch):
            return batch

        for bs in (1, 64):
            ds = ray.data.range(items)
            t = time.perf_counter()
            n = ds.map_batches(ident, batch_size=bs).count()
            out[f"map_batches_bs{bs}_s"] = time.perf_counter() - t
            out[f"map_batches_bs{bs}_s_per_item"] = out[f"map_batches_bs{bs}_s"] / n
        out["map_batches_items"] = items
    finally:
        t = time.perf_counter()
        ray.shutdown()
        out["shutdown_s"] = time.perf_counter() - t
    return out


def bench(*, images: int = 24, sides=(748, 1496), repeats: int = 3, ray: bool = True,
          work: str | os.PathLike | None = None) -> dict:
    """Every number of ``docs/scaling.md`` in one dict (seconds unless named otherwise)."""
    import platform

    import cv2
    import torch

    cv2.setNumThreads(1)
    torch.set_num_threads(1)
    result = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "torch": torch.__version__, "opencv": cv2.__version__,
                          "loadavg_1min": os.getloadavg()[0]}}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(work) if work is not None else Path(tmp)
        result["pipeline"] = [pipeline_costs(base, images=images, side=s, repeats=repeats)
                              for s in sides]
    if ray:
        result["ray"] = ray_costs()
    result["machine"]["loadavg_1min_after"] = os.getloadavg()[0]
    return result


REXGRADIENT_IMAGES = 273_004  # train 238,968 + valid 17,007 + test 17,029 (dataset card)
REXGRADIENT_GB = 145.0  # extracted 16-bit PNGs


def project(result: dict, *, nodes=(1, 8, 64), cores_per_node: int = 32,
            price_per_core_hour: float = 0.04, provision_s: float = 300.0,
            node_gbps: float = 1.25, shared_fs_gbps: float | None = 2.0, batch_size: int = 64,
            images: int = REXGRADIENT_IMAGES, corpus_gb: float = REXGRADIENT_GB,
            side: int = 748, stage: str = "export") -> list[dict]:
    """Projected wall time and cost of one pass (``stage`` "encode": pre-cache, or
    "export") over ``images`` on each node count.

    wall = provision_s + Ray start-up + max(compute, read), where compute = images x (CPU
    seconds per image + Ray's per-batch overhead / batch_size) / (nodes x cores_per_node)
    and read = corpus_gb / min(nodes x node_gbps, shared_fs_gbps) (``None``: object storage,
    no shared ceiling). cost = nodes x cores_per_node x wall / 3600 x price_per_core_hour.
    """
    row = next(r for r in result["pipeline"] if r["side"] == side)
    per_image = row[f"{stage}_cpu_s"]
    ray = result.get("ray") or {}
    per_batch = 0.0
    if "map_batches_bs1_s" in ray:  # the bs=1 run pays the per-batch overhead once per item
        n = ray["map_batches_items"]
        per_batch = max(0.0, (ray["map_batches_bs1_s"] - ray["map_batches_bs64_s"]) /
                        (n - -(-n // 64)))
    init = ray.get("init_s", 0.0)
    rows = []
    for k in nodes:
        cores = k * cores_per_node
        compute = images * (per_image + per_batch / batch_size) / cores
        bandwidth = k * node_gbps if shared_fs_gbps is None else min(k * node_gbps,
                                                                       shared_fs_gbps)
        read = corpus_gb / bandwidth
        wall = provision_s + init + max(compute, read)
        rows.append({"nodes": k, "cores": cores, "compute_s": compute, "read_s": read,
                     "wall_s": wall, "core_hours": cores * wall / 3600,
                     "cost": cores * wall / 3600 * price_per_core_hour,
                     "bound": "read" if read > compute else "compute"})
    return rows


def projection_table(result: dict, **kw) -> str:
    """``project`` as a markdown table (object storage and a shared filesystem)."""
    lines = ["| nodes | cores | compute | read (object store) | read (shared FS) | wall "
             "(object store) | core-hours | cost |", "|---|---|---|---|---|---|---|---|"]
    obj = project(result, shared_fs_gbps=None, **kw)
    fs = project(result, **kw)
    for o, f in zip(obj, fs):
        lines.append(f"| {o['nodes']} | {o['cores']} | {o['compute_s']:.0f} s | "
                     f"{o['read_s']:.0f} s | {f['read_s']:.0f} s | {o['wall_s'] / 60:.1f} min "
                     f"| {o['core_hours']:.1f} | {o['cost']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=24)
    p.add_argument("--sides", type=int, nargs="+", default=[748, 1496])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-ray", action="store_true")
    p.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = p.parse_args(argv)
    res = bench(images=args.images, sides=tuple(args.sides), repeats=args.repeats,
                ray=not args.no_ray)
    text = json.dumps(res, indent=2)
    print(text)
    for stage in ("encode", "export"):
        print(f"\n{stage}, per 748-px image {res['pipeline'][0][f'{stage}_cpu_s'] * 1e3:.1f} "
              "ms CPU; 32 cores/node, 0.04 per core-hour, 300 s provisioning:")
        print(projection_table(res, stage=stage, side=res["pipeline"][0]["side"]))
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
