"""A training mixture of >= 3 million records over six full-size datasets (metadata only).

    python -m benchmarks.mixture_build [--work bench-data] [--scale 1.0] [--runs 2]

The replicas are the fake writers' at the real releases' sizes, metadata only (no image file:
the hold-out is then by patient only, as ``mixture.json`` says): ReXGradient-160K (140,000 /
10,000 / 10,000 studies, ~1.8 images each) with ReXVQA's questions over it (~4.4 per study),
MIMIC-CXR-JPG (190,000 subjects, ~380,000 images, one report file per study), CheXpert
(75,000 patients, ~225,000 images), PadChest (80,000 patients, ~160,000 images) and VinDr-CXR
(15,000 images). ``--scale`` shrinks every count (a smoke run: ``--scale 0.02``). They are
written once under ``<work>/mixture-<scale>/`` and reused.

The spec draws 14 tasks from the six sources with MIMIC's test split and ReXGradient's test set
held out. A first build fills the table cache; each measured run is a fresh process building the
mixture from the cached tables, timed around :func:`radharmony.mixture.build` (wall, and CPU
summed over the build's processes: one per source, as many at once as cores, at most
4), with the peak memory of the whole process tree: the sum of its processes' proportional set
sizes sampled every 0.1 s (a page shared by the forked processes counts once), beside the peak
RSS of the parent and of the largest source process. The fastest run counts for time, the
largest for memory.
Targets: >= 3 million records in <= 60 s and <= 4 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S, TARGET_GB, TARGET_RECORDS = 60.0, 4.0, 3_000_000
FULL = {"rex_studies": {"train": 140_000, "valid": 10_000, "test": 10_000},
        "mimic_subjects": 190_000, "chexpert_patients": 75_000, "padchest_patients": 80_000,
        "vindr_images": 15_000}


def _sizes(scale: float) -> dict:
    def n(x):
        return max(4, int(round(x * scale)))
    return {"rex_studies": {k: n(v) for k, v in FULL["rex_studies"].items()},
            **{k: n(v) for k, v in FULL.items() if k != "rex_studies"}}


def replicas(work: Path, scale: float) -> dict[str, str]:
    """The roots of the six metadata-only replicas (written once)."""
    from radharmony.fake.chexpert import write_chexpert
    from radharmony.fake.mimic import write_mimic
    from radharmony.fake.padchest import write_padchest
    from radharmony.fake.rexvqa import write_rexvqa
    from radharmony.fake.vindr import write_vindr

    base = work / f"mixture-{scale:g}"
    sizes = _sizes(scale)
    roots = {"rexgradient": base / "rexgradient" / "deid_png", "mimic": base / "mimic",
             "chexpert": base / "chexpert" / "CheXpert-v1.0-small",
             "padchest": base / "padchest", "vindr": base / "vindr" / "train"}
    if not (base / "done").is_file():
        shutil.rmtree(base, ignore_errors=True)
        print(f"writing the metadata-only replicas under {base} (once) ...", flush=True)
        write_rexvqa(base / "rexgradient", studies=sizes["rex_studies"], images=False)
        write_mimic(base / "mimic", n_subjects=sizes["mimic_subjects"], images=False)
        write_chexpert(base / "chexpert", n_patients=sizes["chexpert_patients"], images=False)
        write_padchest(base / "padchest", n_patients=sizes["padchest_patients"], images=False)
        write_vindr(base / "vindr", n_images=sizes["vindr_images"], images=False)
        (base / "done").write_text("ok\n")
    return {k: str(v) for k, v in roots.items()}


def spec(roots: dict, cache_dir: Path) -> dict:
    """The benchmark's mixture: every family, over the six sources."""
    return {
        "name": "bench-mixture", "seed": 0, "valid": 0.02, "cache_dir": str(cache_dir),
        "sources": [
            {"dataset": "rexgradient_train", "root": roots["rexgradient"],
             "tasks": {"report_findings": "all", "report_findings_impression": "all",
                       "report_impression_indication": "all", "summarize_impression": "all",
                       "image_text_matching": "all", "classify_view": "all"}},
            {"dataset": "mimic_cxr_jpg", "root": roots["mimic"], "split": "train",
             "tasks": {"report_findings": "all", "report_findings_impression_indication": "all",
                       "classify_findings": "all", "finding_question": "random:50%",
                       "classify_view": "all"}},
            {"dataset": "chexpert", "root": roots["chexpert"],
             "tasks": {"classify_findings": "x2", "finding_question": "random:40%",
                       "classify_view": "all"}},
            {"dataset": "padchest", "root": roots["padchest"],
             "tasks": {"classify_findings": "all", "classify_view": "all"}},
            {"dataset": "rexvqa_train", "root": roots["rexgradient"], "tasks": {"vqa_mcq": "all"}},
            {"dataset": "vindr_cxr", "root": roots["vindr"],
             "tasks": {"classify_findings": "all", "finding_question": "all"}},
        ],
        "hold_out": [{"dataset": "mimic_cxr_jpg", "root": roots["mimic"], "split": "test"},
                     {"dataset": "rexgradient_test", "root": roots["rexgradient"]}]}


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``)."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                stack += [int(c) for c in task.read_text().split()]
            except OSError:
                pass
    return out


def _pss_kib(pid: int) -> int:
    """The proportional set size of ``pid`` (pages shared by k processes count 1/k each)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeMemory:
    """The peak memory of this process and the processes it starts (the build runs one per
    source), sampled every ``every`` seconds as the sum of their proportional set sizes: the
    memory the build holds at once, each shared page counted once."""

    def __init__(self, every: float = 0.1):
        import threading

        self.peak_kib, self._every = 0, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = os.getpid()
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in _tree(me)))
            self._stop.wait(self._every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def one_run(spec_path: Path, out: Path) -> dict:
    """Build the mixture in this process: seconds, records, peak memory (the process tree's
    summed PSS where ``/proc`` has it, and the peak RSS of this process and of its largest
    child)."""
    from radharmony.mixture import build

    with warnings.catch_warnings(), TreeMemory() as mem:
        warnings.simplefilter("ignore")
        start, cpu = time.perf_counter(), time.process_time()
        manifest = build(json.loads(spec_path.read_text()), out, progress=False)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = me.ru_maxrss / 2**20  # KiB -> GiB
    return {"seconds": seconds, "cpu_seconds": cpu + kids.ru_utime + kids.ru_stime,
            "records": manifest["records"], "peak_rss_gb": rss,
            "peak_child_rss_gb": kids.ru_maxrss / 2**20,
            "peak_tree_gb": mem.peak_kib / 2**20 if mem.peak_kib else
            rss + kids.ru_maxrss / 2**20, "bytes": (out / "records.parquet").stat().st_size}


def _child(spec_path: Path, out: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "benchmarks.mixture_build", "--one",
                        str(spec_path), str(out)], cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"the build failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def bench(work: Path, scale: float = 1.0, runs: int = 2) -> dict:
    roots = replicas(work, scale)
    base = work / f"mixture-{scale:g}"
    spec_path = base / "spec.json"
    spec_path.write_text(json.dumps(spec(roots, base / "cache")))
    t = time.perf_counter()
    _child(spec_path, base / "out")  # fills the table cache
    first = time.perf_counter() - t
    results = [_child(spec_path, base / "out") for _ in range(runs)]
    best = min(r["seconds"] for r in results)
    rss = max(r["peak_tree_gb"] for r in results)
    records = results[0]["records"]
    return {"scale": scale, "records": records, "seconds": round(best, 2),
            "cpu_seconds": round(min(r["cpu_seconds"] for r in results), 2),
            "runs": [round(r["seconds"], 2) for r in results],
            "first_build_seconds": round(first, 2), "peak_gb": round(rss, 2),
            "peak_rss_gb": round(max(r["peak_rss_gb"] for r in results), 2),
            "peak_child_rss_gb": round(max(r["peak_child_rss_gb"] for r in results), 2),
            "parquet_mb": round(results[0]["bytes"] / 2**20, 1),
            "met": records >= TARGET_RECORDS and best <= TARGET_S and rss <= TARGET_GB}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default=str(ROOT / "bench-data"))
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # one measured run (a child)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(Path(args.one[0]), Path(args.one[1]))))
        return
    r = bench(Path(args.work), args.scale, args.runs)
    print(f"mixture build (scale {r['scale']:g}), {r['records']:,} records "
          f"({r['parquet_mb']} MB of Parquet) from cached tables: {r['seconds']} s (runs "
          f"{r['runs']}; CPU {r['cpu_seconds']} s over its processes; first build "
          f"{r['first_build_seconds']} s), peak memory {r['peak_gb']} GB (the processes' summed "
          f"PSS; peak RSS {r['peak_rss_gb']} GB here, {r['peak_child_rss_gb']} GB in the "
          f"largest source process); targets >= {TARGET_RECORDS:,} records, "
          f"<= {TARGET_S:g} s and <= {TARGET_GB:g} GB: {'met' if r['met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
