"""A mixture at CheXOne's scale: build it, open it, draw its first batch, and read it from
8 ranks x 2 DataLoader workers on one machine (metadata only).

    python -m benchmarks.mixture_scale [--work bench-data] [--scale 1.0] [--repeat 1.8]
                                       [--ranks 8] [--workers 2] [--batches 8] [--rates]

The sources are :mod:`benchmarks.mixture_build`'s six full-size metadata-only replicas
(``--scale`` shrinks them), each drawn twice under two names (12 sources: ``<name>_a`` and
``<name>_b``, whose records differ by their ids), every rule ``x<repeat>`` (each record
``--repeat`` times): about 8.5 M x ``repeat`` records at scale 1 (2.55 M x ``repeat`` at
scale 0.3, measured), so 15 M at the default ``--repeat 1.8``.

Each step runs in a fresh process:

* the build (:func:`benchmarks.mixture_build.one_run`): wall seconds and the peak of the
  process tree's summed proportional set sizes (a page shared by forked processes counts once);
* the open: ``MixtureDataset(out)`` and ``MixtureSampler(ds, batch_size=64)``, wall seconds
  of each, the first batch of indices, then the first batch read (``ds.batch``), and this
  process's private memory (``/proc/self/smaps_rollup``'s ``Private_Clean`` +
  ``Private_Dirty``; and ``Private_Dirty`` alone, its heap: a clean private page is a mapped
  file's page no other process has touched yet, page cache that becomes shared when one
  does);
* ``--ranks`` processes, each opening the mixture and reading ``--batches`` batches of 64
  through ``DataLoader(ds, batch_size=None, sampler=MixtureSampler(ds, num_replicas=R,
  rank=r, batch_size=64), num_workers=--workers)``; with the workers still alive each process
  sums the private memory of itself and its workers, and the figure is the sum over ranks.

``--rates``: every sampler draws by rate (each source a share: :func:`bench_rates`) instead
of each record once.

The replicas have no image file, so a batch's pixels stand in as zeros (the columns, the
fields and the collate are read as in training); the image read itself is
:mod:`benchmarks.mixture_export`'s ``--only read``.
Targets: 15 M records built in <= 240 s and <= 4 GB; open <= 5 s and <= 1 GB private; the
sampler's first batch <= 1 s; 8 x 2 processes <= 4 GB private in all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"build_s": 240.0, "build_gb": 4.0, "open_s": 5.0, "open_private_gb": 1.0,
           "first_batch_s": 1.0, "ranks_private_gb": 4.0}


def scale_spec(roots: dict, cache_dir: Path, repeat: float) -> dict:
    """:func:`benchmarks.mixture_build.spec`'s sources twice each, every rule ``x<repeat>``."""
    from benchmarks.mixture_build import spec

    base = spec(roots, cache_dir)
    rule = "all" if repeat == 1 else f"x{repeat:g}"
    sources = []
    for copy in ("a", "b"):
        for s in base["sources"]:
            sources.append({**s, "name": f"{s['dataset']}_{copy}",
                            "tasks": {t: rule for t in s["tasks"]}})
    return {**base, "name": "bench-scale", "sources": sources}


def private_kib(pid: int | str = "self", kinds=("Private_Clean:", "Private_Dirty:")) -> int:
    """``Private_Clean + Private_Dirty`` of process ``pid`` in KiB (its pages no other process
    maps); ``kinds=("Private_Dirty:",)``: the written ones only (its heap: what it alone
    holds; a clean private page is a file's, e.g. a column's page only this process has
    touched yet, which the page cache can drop and which becomes shared when another process
    touches it)."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(kinds):
            total += int(line.split()[1])
    return total


DIRTY = ("Private_Dirty:",)


def bench_rates(out: Path, on: bool) -> dict | None:
    """With ``on``: a share per source of the train split (1, 2, 3, ... in the manifest's
    order), the first task of the first source with two tasks rated apart (2): the sampler's
    draw by rate."""
    if not on:
        return None
    from radharmony.mixture.records import read_manifest

    manifest = read_manifest(out)
    tasks: dict = {}
    for c in manifest["counts"]:
        if c["split"] == "train" and c["records"]:
            tasks.setdefault(c["source"], []).append(c["task"])
    rates: dict = {s["name"]: float(i + 1) for i, s in enumerate(manifest["sources"])
                   if s["name"] in tasks}
    apart = next(([s, t[0]] for s, t in tasks.items() if len(t) > 1), None)
    if apart:
        rates["/".join(apart)] = 2.0
    return rates


def _no_pixels(ds) -> None:
    """The metadata-only replicas have no image file: each batch's pixels are zeros."""
    import torch

    s = ds.size
    ds.images.tensor = lambda items: torch.zeros((len(items), 1, s, s), dtype=ds.dtype)


def open_run(out: Path, rates: bool = False) -> dict:
    """Open the mixture and draw and read its first batch, in this process."""
    import resource

    t = time.perf_counter()
    import torch  # noqa: F401 (imported before the clock: every trainer has it)

    from radharmony.mixture import MixtureDataset, MixtureSampler
    imported = time.perf_counter() - t
    before = private_kib()
    t = time.perf_counter()
    ds = MixtureDataset(out)
    opened = time.perf_counter() - t
    after_open = private_kib()
    t = time.perf_counter()
    sampler = MixtureSampler(ds, batch_size=64, seed=0, rates=bench_rates(out, rates))
    first = next(iter(sampler))
    drawn = time.perf_counter() - t
    _no_pixels(ds)
    t = time.perf_counter()
    batch = ds.batch(first)
    read = time.perf_counter() - t
    return {"records": len(ds), "import_s": imported, "open_s": opened,
            "open_private_gb": after_open / 2**20, "private_before_open_gb": before / 2**20,
            "first_batch_s": drawn, "first_read_s": read, "batch": len(batch["record_id"]),
            "private_gb": private_kib() / 2**20,
            "private_dirty_gb": private_kib(kinds=DIRTY) / 2**20,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def rank_run(out: Path, rank: int, ranks: int, workers: int, batches: int,
             rates: int = 0) -> dict:
    """One rank: open, read ``batches`` batches with ``workers`` workers, then sum the private
    memory of this process and its workers (alive)."""
    import torch

    from radharmony.mixture import MixtureDataset, MixtureSampler, mixture_collate

    ds = MixtureDataset(out)
    _no_pixels(ds)
    sampler = MixtureSampler(ds, batch_size=64, seed=0, num_replicas=ranks, rank=rank,
                             rates=bench_rates(out, bool(rates)))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler,
                                         num_workers=workers, collate_fn=mixture_collate,
                                         persistent_workers=workers > 0)
    it = iter(loader)
    for _ in range(batches):
        next(it)
    from benchmarks.mixture_build import _tree

    pids = _tree(os.getpid())
    mine = {str(p): private_kib(p) for p in pids}
    dirty = {str(p): private_kib(p, DIRTY) for p in pids}
    del it
    return {"rank": rank, "processes": len(pids), "private_kib": mine, "dirty_kib": dirty}


def _child(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "benchmarks.mixture_scale", *args], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{args[0]} failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def ranks_run(out: Path, ranks: int, workers: int, batches: int, rates: bool = False) -> dict:
    """``ranks`` processes side by side (:func:`rank_run`): the sum of their private memory."""
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.mixture_scale", "--rank",
                               str(out), str(r), str(ranks), str(workers), str(batches),
                               str(int(rates))],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(ranks)]
    t = time.perf_counter()
    results = []
    for p in procs:
        stdout, stderr = p.communicate()
        if p.returncode:
            raise SystemExit(f"a rank failed:\n{stderr[-4000:]}")
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    kib = sum(sum(r["private_kib"].values()) for r in results)
    dirty = sum(sum(r["dirty_kib"].values()) for r in results)
    return {"ranks": ranks, "workers": workers, "processes": sum(r["processes"] for r in results),
            "ranks_private_gb": kib / 2**20, "ranks_private_dirty_gb": dirty / 2**20,
            "ranks_s": time.perf_counter() - t,
            "largest_process_gb": max(max(r["private_kib"].values()) for r in results) / 2**20}


def bench(work: Path, scale: float, repeat: float, ranks: int, workers: int,
          batches: int, build: bool = True, rates: bool = False) -> dict:
    from benchmarks.mixture_build import replicas

    roots = replicas(work, scale)
    base = work / f"mixture-{scale:g}"
    spec_path = base / f"scale-spec-x{repeat:g}.json"
    spec_path.write_text(json.dumps(scale_spec(roots, base / "cache", repeat)))
    out = base / f"scale-out-x{repeat:g}"
    r: dict = {"scale": scale, "repeat": repeat, "rates": rates}
    if build or not (out / "mixture.json").is_file():
        b = subprocess.run([sys.executable, "-m", "benchmarks.mixture_build", "--one",
                            str(spec_path), str(out)], cwd=ROOT, capture_output=True, text=True)
        if b.returncode:
            raise SystemExit(f"the build failed:\n{b.stderr[-4000:]}")
        built = json.loads(b.stdout.strip().splitlines()[-1])
        r.update(build_s=built["seconds"], build_cpu_s=built["cpu_seconds"],
                 build_gb=built["peak_tree_gb"],
                 build_records=built["records"], sources=len(json.loads(
                     spec_path.read_text())["sources"]))
    r.update(_child("--open", str(out), *(["--rates"] if rates else [])))
    r.update(ranks_run(out, ranks, workers, batches, rates))
    r["met"] = {k: r[k] <= v for k, v in TARGETS.items() if k in r}
    return r


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default=str(ROOT / "bench-data"))
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--repeat", type=float, default=1.8)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--no-build", action="store_true", help="reuse the built mixture")
    p.add_argument("--rates", action="store_true", help="the samplers draw by rate")
    p.add_argument("--open", help=argparse.SUPPRESS)  # a child: one open
    p.add_argument("--rank", nargs=6, help=argparse.SUPPRESS)  # a child: one rank
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.open:
        print(json.dumps(open_run(Path(args.open), args.rates)))
        return
    if args.rank:
        out, *nums = args.rank
        print(json.dumps(rank_run(Path(out), *map(int, nums))))
        return
    r = bench(Path(args.work), args.scale, args.repeat, args.ranks, args.workers,
              args.batches, build=not args.no_build, rates=args.rates)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))


if __name__ == "__main__":
    main()
