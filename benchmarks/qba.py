"""MIMIC-Ext-CXR-QBA at scale: harmonizing an export in bounded memory.

    python -m benchmarks.qba [--work bench-data] [--studies 40000]

A metadata-only export (:func:`radharmony.fake.mimic_ext_cxr_qba.write_export`: 7 questions
per study over one or two frontal images, the Parquet files in row groups of 131,072 rows,
qa.zip with one JSON per study) is written once under ``<work>/qba/A_frontal`` and reused.
Two fresh processes each report their peak RSS: one harmonizes it
(``MIMICExtCXRQBAHarmonizer.harmonize()``, which reads only the id and tag columns, a record
batch at a time), the other only loads the two question files whole with
``pandas.read_parquet`` -- what a reader without batching and column selection starts with,
before it reads a single text. Each reports the peak RSS above its baseline (the interpreter
and libraries imported, nothing read); the harmonized table's own size
(``memory_usage(deep=True)``) is printed beside them: the harmonizer's peak should stay within
a small multiple of the table it returns, whatever the files' other columns hold. No
pass/fail: the numbers are the result.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def replica(work: Path, n_studies: int) -> Path:
    from radharmony.fake.mimic_ext_cxr_qba import write_export

    export = work / "qba" / f"A_frontal_{n_studies}"
    path = export / "metadata" / "question_metadata.parquet"
    if not path.is_file():
        write_export(export, n_studies)
    return path


def _rss_gb() -> float:
    """The process's resident memory now (``ru_maxrss`` would carry the parent's peak across
    the fork and exec that started it)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30


class _Peak(threading.Thread):
    """Samples the resident memory every 2 ms while the work runs; ``peak`` is the largest."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.done = _rss_gb(), threading.Event()

    def run(self):
        while not self.done.wait(0.002):
            self.peak = max(self.peak, _rss_gb())


def one_run(path: Path, mode: str) -> dict:
    import pandas as pd
    import pyarrow.parquet  # noqa: F401  (imported before the baseline, as the harmonizer is)

    from radharmony.datasets.mimic_ext_cxr_qba import MIMICExtCXRQBAHarmonizer

    base = _rss_gb()  # the interpreter and the libraries, before any file is read
    sampler = _Peak()
    sampler.start()
    start, cpu = time.perf_counter(), time.process_time()
    if mode == "harmonize":
        df = MIMICExtCXRQBAHarmonizer(csv_path=path).harmonize()
        table_gb = df.memory_usage(deep=True).sum() / 2**30
        rows = len(df)
    else:  # the whole-file read a reader without batches and columns starts with
        frames = [pd.read_parquet(path), pd.read_parquet(
            path.with_name("question_image_metadata.parquet"))]
        table_gb, rows = None, len(frames[0])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    sampler.done.set()
    sampler.join()
    peak = max(sampler.peak, _rss_gb())
    return {"mode": mode, "rows": rows, "seconds": seconds, "cpu_seconds": cpu,
            "peak_rss_gb": peak, "added_gb": peak - base, "table_gb": table_gb}


def bench(work: Path, n_studies: int) -> list[dict]:
    path = replica(work, n_studies)
    out = []
    for mode in ("harmonize", "whole"):
        run = subprocess.run([sys.executable, "-m", "benchmarks.qba", "--one", str(path),
                              "--mode", mode], cwd=ROOT, capture_output=True, text=True,
                             check=True)
        out.append(json.loads(run.stdout.strip().splitlines()[-1]))
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default=str(ROOT / "bench-data"))
    p.add_argument("--studies", type=int, default=40_000)
    p.add_argument("--one", help=argparse.SUPPRESS)  # one measured run (a child process)
    p.add_argument("--mode", default="harmonize", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(Path(args.one), args.mode)))
        return
    harm, whole = bench(Path(args.work), args.studies)
    print(f"MIMIC-Ext-CXR-QBA harmonize, {harm['rows']:,} questions: "
          f"{harm['seconds']:.1f} s (CPU {harm['cpu_seconds']:.1f} s), peak RSS "
          f"{harm['peak_rss_gb']:.2f} GB, {harm['added_gb']:.2f} GB above the libraries' "
          f"baseline, for a {harm['table_gb']:.2f} GB table; loading the two question files "
          f"whole with pandas alone adds {whole['added_gb']:.2f} GB")


if __name__ == "__main__":
    main()
