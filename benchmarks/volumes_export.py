"""Exporting volumes at M3D-LaMed's preset: from radharmony's volume cache against the same work
through MONAI transforms from the NIfTI files, side by side in one run.

    python -m benchmarks.volumes_export [--volumes 1000] [--side 256] [--depths 96 192]
                                        [--workers 2] [--engine local|ray] [--json FILE]

``volumes`` synthetic chest CTs (:func:`benchmarks.volumes_cache.synthetic_ct`, gzip NIfTI)
are pre-cached at the ``m3d`` preset (not timed: the export reads a filled cache; its time is
reported). Then, each in ``workers`` processes (or Ray tasks with ``--engine ray``), started
and warm (both sides' imports done before the clock starts), every volume is exported as M3D-LaMed's ``.npy`` (1, 32, 256, 256) float32 in [0, 1]:

* **ours**: what ``radharmony mix export --format m3d`` does per volume once its dataset has
  named the file: :func:`radharmony.volumes.presets.preset_array` from the warm cache (the
  cached int16 geometry decoded, min-max mapped), ``np.save``;
* **MONAI**: ``LoadImage`` (the NIfTI), ``EnsureChannelFirst``, ``Orientation`` to the
  canonical (S, P, L), ``ScaleIntensity`` (min-max to [0, 1]), ``CropForeground`` (values
  above 0), ``Resize`` to (32, 256, 256) (trilinear), ``np.save``.

Each written file is removed once written (both sides alike: 8 MiB a volume, 8 GB for 1,000).
Target: ours >= 5x MONAI. Returns (and prints) a dict; ``--json`` writes it too.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from benchmarks.volumes_cache import load_nifti, write_corpus

ROOT = Path(__file__).resolve().parents[1]
PARAMS = {"reader": "nibabel"}
TARGET = 5.0


def _save(out: Path, array: np.ndarray) -> None:
    np.save(out, array)
    os.unlink(out)


def ours_one(cache_dir: str, out: str, path: str) -> tuple:
    from radharmony.volumes.cache import VolumeCache
    from radharmony.volumes.presets import preset_array

    cache = VolumeCache(cache_dir)
    array = preset_array(cache, "m3d", [path], PARAMS, partial(load_nifti, path))
    _save(Path(out) / (Path(path).name + ".npy"), array)
    return array.shape, float(array.min()), float(array.max())


_MONAI: dict = {}


def _monai_transform():
    if "t" not in _MONAI:
        import warnings

        from monai.transforms import (Compose, CropForeground, EnsureChannelFirst, LoadImage,
                                      Orientation, Resize, ScaleIntensity)

        warnings.simplefilter("ignore")
        _MONAI["t"] = Compose([LoadImage(image_only=True), EnsureChannelFirst(),
                               Orientation(axcodes="SPL"), ScaleIntensity(minv=0.0, maxv=1.0),
                               CropForeground(), Resize((32, 256, 256), mode="trilinear")])
    return _MONAI["t"]


def monai_one(out: str, path: str) -> tuple:
    array = np.asarray(_monai_transform()(path), np.float32)
    _save(Path(out) / (Path(path).name + ".npy"), array)
    return array.shape, float(array.min()), float(array.max())


def _warm(_=None) -> None:
    """Import both sides' code in a worker before the clock starts (not what is measured)."""
    import radharmony.volumes.presets  # noqa: F401

    _monai_transform()
    time.sleep(0.2)  # so every worker of the pool takes one


def _run(fn, paths, workers: int, engine: str) -> tuple[float, list]:
    """``fn`` over ``paths`` on started, warm workers: the time of the work alone."""
    paths = list(map(str, paths))
    if engine == "ray":
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                 ignore_reinit_error=True)
        task = ray.remote(num_cpus=1)(lambda p: fn(p))
        ray.get([ray.remote(num_cpus=1)(_warm).remote() for _ in range(workers)])
        t = time.perf_counter()
        got = ray.get([task.remote(p) for p in paths])
        took = time.perf_counter() - t
        ray.shutdown()
        return took, got
    if not workers:
        _warm()
        return _timed(map, fn, paths)
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_warm, range(workers)))
        return _timed(partial(pool.map, chunksize=max(1, len(paths) // (8 * workers))), fn,
                      paths)


def _timed(mapper, fn, paths) -> tuple[float, list]:
    t = time.perf_counter()
    got = list(mapper(fn, paths))
    return time.perf_counter() - t, got


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--volumes", type=int, default=1000)
    ap.add_argument("--side", type=int, default=256)
    ap.add_argument("--depths", type=int, nargs=2, default=(96, 192))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--engine", choices=("local", "ray"), default="local")
    ap.add_argument("--work", type=Path, default=ROOT / "bench-data")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    from radharmony.volumes.cache import VolumeCache
    from radharmony.volumes.precache import VolumeJob, pre_cache_volumes

    folder = args.work / f"volumes-export-{args.side}-{args.depths[0]}-{args.depths[1]}"
    paths = write_corpus(folder / "nifti", volumes=args.volumes, side=args.side,
                         depths=args.depths)
    cache_dir = folder / "cache"
    jobs = [VolumeJob([str(p)], partial(load_nifti, p), PARAMS) for p in paths]
    t = time.perf_counter()
    pre_cache_volumes(VolumeCache(cache_dir), jobs, presets=["m3d"],
                      num_workers=args.workers)
    precache_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory(dir=folder) as out:
        ours_s, a = _run(partial(ours_one, str(cache_dir), out), paths, args.workers,
                         args.engine)
        monai_s, b = _run(partial(monai_one, out), paths, args.workers, args.engine)
    assert {s for s, _, _ in a} == {s for s, _, _ in b} == {(1, 32, 256, 256)}, (a[0], b[0])
    result = {"volumes": len(paths), "side": args.side, "depths": list(args.depths),
              "workers": args.workers, "engine": args.engine, "precache_s": precache_s,
              "ours_s": ours_s, "monai_s": monai_s, "speedup": monai_s / ours_s,
              "target": TARGET, "ours_range": [min(x[1] for x in a), max(x[2] for x in a)]}
    print(f"m3d export of {len(paths)} volumes ({args.side}^2 x {args.depths[0]}-"
          f"{args.depths[1]}, {args.workers} {args.engine} workers): ours {ours_s:.2f} s from "
          f"the cache (filled in {precache_s:.1f} s), MONAI {monai_s:.2f} s from NIfTI: "
          f"{result['speedup']:.1f}x (target >= {TARGET:g}x)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
