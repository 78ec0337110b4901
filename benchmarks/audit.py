"""The duplicate audit on a replica with planted copies: recall, false pairs and time.

    python -m benchmarks.audit [--images 10000] [--size 512] [--workers 2] [--hashes 100000]

Two measurements:

1. **Whole audit** (``radharmony.audit`` on a dataset): ``--images`` PNGs (8-bit, long side
   ``--size``) of :func:`radharmony.fake.duplicates.varied_cxr` (synthetic radiographs with
   patient-to-patient variety) written once under ``bench-data/audit-<images>-<size>/``, of
   which 2 % are overwritten by an altered copy of another (resized to 40-90 %, re-windowed,
   re-encoded: :func:`~radharmony.fake.duplicates.altered_copy`) and 0.5 % by a byte copy.
   Reported: recall of the planted pairs, pairs found that were not planted (as a share of the
   images), and the wall time on ``--workers`` threads, split into reading/hashing and pairing.
2. **Pairing at scale**: hashes of ``--hashes`` distinct varied images (128 px) plus 2 %
   altered copies, through :func:`radharmony.audit.hashing.near_pairs` (the banded
   candidate search): its time, recall and false pairs at 100,000 images without writing
   100,000 files.

The whole-audit time of 100,000 images is extrapolated linearly from the first measurement
(reading and hashing are per image; pairing is measured at 100,000 by the second).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
COPY_SHARE, EXACT_SHARE = 0.02, 0.005


def _write_chunk(args) -> None:
    folder, start, stop, size, seed = args
    from radharmony.fake.duplicates import varied_cxr

    rng = np.random.default_rng(seed + start)
    for k in range(start, stop):
        h = size
        w = int(size * rng.uniform(0.8, 1.0))
        cv2.imwrite(str(Path(folder) / f"{k // 1000:03d}" / f"img{k:06d}.png"),
                    varied_cxr(h, w, rng=rng))


def replica(n: int, size: int, workers: int) -> tuple[Path, list[tuple[int, int]]]:
    """Write (once) the replica; returns its folder and the planted ``(source, copy)``."""
    from radharmony.fake.duplicates import plant_copies

    folder = ROOT / "bench-data" / f"audit-{n}-{size}"
    truth_file = folder / "planted.json"
    if truth_file.exists():
        return folder, [tuple(p) for p in json.loads(truth_file.read_text())]
    for k in range(0, n, 1000):
        (folder / f"{k // 1000:03d}").mkdir(parents=True, exist_ok=True)
    step = 250
    jobs = [(str(folder), a, min(a + step, n), size, 0) for a in range(0, n, step)]
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_write_chunk, jobs))
    paths = [folder / f"{k // 1000:03d}" / f"img{k:06d}.png" for k in range(n)]
    planted = plant_copies(paths, int(n * COPY_SHARE), seed=1, exact=int(n * EXACT_SHARE))
    truth_file.write_text(json.dumps(planted))
    return folder, planted


def _dataset(folder: Path, n: int):
    from radharmony.data.dataset import BaseRadiologicalDataset
    from radharmony.spec import DatasetSpec

    rel = [f"{k // 1000:03d}/img{k:06d}.png" for k in range(n)]
    table = pd.DataFrame({"patient_id": [f"p{k}" for k in range(n)],
                          "study_id": [f"s{k}" for k in range(n)], "image_path": rel,
                          "view_position": "PA", "report": None})
    spec = DatasetSpec(key="bench_audit", title="audit benchmark replica")
    return BaseRadiologicalDataset(folder, harmonized_df=table, spec=spec, cache_dir=None)


def _cpu() -> float:
    """User + system CPU seconds of this process (all its threads): the machine is shared, so
    wall time alone measures the neighbours too."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def score(found: set, truth: set, n: int) -> dict:
    hit = len(found & truth)
    return {"planted": len(truth), "found": len(found), "recall": hit / max(1, len(truth)),
            "false_pairs": len(found - truth),
            "false_pairs_per_image": len(found - truth) / n}


def whole_audit(n: int, size: int, workers: int) -> dict:
    from radharmony.audit import audit
    from radharmony.audit import hashing

    folder, planted = replica(n, size, workers)
    ds = _dataset(folder, n)
    timed = {}
    real_pairs = hashing.near_pairs

    def near(*a, **k):
        t = time.perf_counter()
        out = real_pairs(*a, **k)
        timed["pairing_s"] = time.perf_counter() - t
        return out

    from radharmony.audit import core

    core.near_pairs = near
    try:
        t0, c0 = time.perf_counter(), _cpu()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = audit(ds, workers=workers, progress=False)
        total, cpu = time.perf_counter() - t0, _cpu() - c0
    finally:
        core.near_pairs = real_pairs
    ids = ds.sample_ids
    truth = {tuple(sorted((ids[a], ids[b]))) for a, b in planted}
    found = {tuple(sorted(p)) for p in zip(report.pairs["a"], report.pairs["b"])}
    return {"images": n, "size": size, "workers": workers, "seconds": total, "cpu_seconds": cpu,
            "pairing_seconds": timed.get("pairing_s"),
            "images_per_second": n / total, **score(found, truth, n)}


def _hash_chunk(args):
    start, stop, seed = args
    from radharmony.audit.hashing import phash, small_image
    from radharmony.fake.duplicates import altered_copy, varied_cxr

    rng = np.random.default_rng(seed + start)
    base, copies = [], []
    for k in range(start, stop):
        img = varied_cxr(128, int(128 * rng.uniform(0.8, 1.0)), rng=rng)
        base.append(phash(small_image(img)))
        if rng.random() < COPY_SHARE:
            ok, buf = cv2.imencode(".jpg", altered_copy(img, rng),
                                   [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(60, 96))])
            copies.append((k, phash(small_image(cv2.imdecode(buf, 0)))))
    return base, copies


def pairing_at_scale(n: int, workers: int) -> dict:
    from radharmony.audit.hashing import near_pairs

    cached = ROOT / "bench-data" / f"audit-hashes-{n}.npz"
    if cached.exists():
        data = np.load(cached)
        arr, truth = data["hashes"], set(map(tuple, data["truth"].tolist()))
    else:
        step = 2000
        with ProcessPoolExecutor(workers) as pool:
            parts = list(pool.map(_hash_chunk, [(a, min(a + step, n), 7)
                                                for a in range(0, n, step)]))
        hashes = [h for base, _ in parts for h in base]
        truth = set()
        for _, copies in parts:
            for k, h in copies:
                truth.add((k, len(hashes)))
                hashes.append(h)
        arr = np.array(hashes, dtype=np.uint8)
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cached, hashes=arr, truth=np.array(sorted(truth)))
    t = time.perf_counter()
    i, j, _ = near_pairs(arr)
    seconds = time.perf_counter() - t
    return {"hashes": len(arr), "seconds": seconds,
            **score(set(zip(i.tolist(), j.tolist())), truth, len(arr))}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--hashes", type=int, default=100_000)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.workers)
    out = {"cpus": os.cpu_count(), "pairing": pairing_at_scale(args.hashes, args.workers),
           "whole": whole_audit(args.images, args.size, args.workers)}
    w, p = out["whole"], out["pairing"]
    per_image = (w["seconds"] - (w["pairing_seconds"] or 0)) / w["images"]
    out["extrapolated_100k_seconds"] = per_image * 100_000 + p["seconds"] * 100_000 / p["hashes"]
    # on an idle machine the threads' CPU time spread over the workers bounds the wall time
    out["extrapolated_100k_cpu_bound_seconds"] = \
        w["cpu_seconds"] / w["workers"] / w["images"] * 100_000 + p["seconds"]
    print(json.dumps(out, indent=2))
    print(f"audit of {w['images']:,} images ({w['size']} px PNG) on {w['workers']} threads: "
          f"{w['seconds']:.1f} s, recall {w['recall']:.4f}, false pairs {w['false_pairs']} "
          f"({100 * w['false_pairs_per_image']:.3f} % of images); pairing {p['hashes']:,} "
          f"hashes: {p['seconds']:.1f} s, recall {p['recall']:.4f}, false pairs "
          f"{p['false_pairs']} ({100 * p['false_pairs_per_image']:.4f} %); 100,000 images "
          f"extrapolated: {out['extrapolated_100k_seconds'] / 60:.1f} min (CPU time over "
          f"{w['workers']} cores: {out['extrapolated_100k_cpu_bound_seconds'] / 60:.1f} min)")
    return out


if __name__ == "__main__":
    main()
