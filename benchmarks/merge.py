"""Merging the eight real metadata tables (about 560,000 images) into one label space.

Harmonizes each real table torchxrayvision ships (NIH, Google, CheXpert, PadChest, VinDr, RSNA,
SIIM, OpenI), builds each as a dataset over its table (metadata only: no image is read, no
cache), then times :func:`radharmony.merge` over all eight and reports the peak RSS of the
process (harmonizing included).

    python -m benchmarks.merge
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pickle
import resource
import tempfile
import time
import warnings
from pathlib import Path

from radharmony.data.dataset import BaseRadiologicalDataset

from .vocab_counts import REAL_TABLES, harmonize_real, txv_data_dir


def _dataset(key: str, table) -> BaseRadiologicalDataset:
    spec = REAL_TABLES[key][0].spec
    return BaseRadiologicalDataset(f"/data/{key}", harmonized_df=table, spec=spec,
                                   cache_dir=None, output_cls=True)


def _harmonize_all(out_dir: str) -> None:
    data_dir = txv_data_dir()
    for k in REAL_TABLES:
        with open(Path(out_dir) / f"{k}.pkl", "wb") as fh:
            pickle.dump(harmonize_real(k, data_dir), fh, protocol=pickle.HIGHEST_PROTOCOL)


def bench() -> dict | None:
    """``{"rows", "sources", "harmonize_seconds", "build_seconds", "merge_seconds",
    "peak_rss_bytes"}``, or None when the real tables are not installed."""
    from radharmony import merge

    data_dir = txv_data_dir()
    if data_dir is None:
        return None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        child = multiprocessing.get_context("spawn").Process(target=_harmonize_all, args=(tmp,))
        child.start()
        child.join()
        if child.exitcode:
            raise SystemExit(f"harmonizing the real tables failed (exit {child.exitcode})")
        tables = {}
        for k in REAL_TABLES:
            with open(Path(tmp) / f"{k}.pkl", "rb") as fh:
                tables[k] = pickle.load(fh)
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        datasets = [_dataset(k, t) for k, t in tables.items()]
        del tables
        t2, c2 = time.perf_counter(), time.process_time()
        merged = merge(datasets)
    t3, c3 = time.perf_counter(), time.process_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"rows": len(merged), "sources": len(datasets), "findings": len(merged.findings),
            "harmonize_seconds": round(t1 - t0, 2), "build_seconds": round(t2 - t1, 2),
            "merge_seconds": round(t3 - t2, 2), "merge_cpu_seconds": round(c3 - c2, 2),
            "peak_rss_bytes": peak,
            "report": merged.merge_report.to_dict("records")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = bench()
    if res is None:
        print("torchxrayvision's data tables are not installed; nothing to merge")
        return 0
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    import pandas as pd

    print(pd.DataFrame(res["report"]).to_string(index=False))
    ok = res["merge_seconds"] <= 10 and res["peak_rss_bytes"] <= 2e9
    print(f"merge of {res['sources']} real tables, {res['rows']:,} rows x {res['findings']} "
          f"findings: {res['merge_seconds']:.2f} s ({res['merge_cpu_seconds']:.2f} s CPU; "
          f"datasets built in "
          f"{res['build_seconds']:.2f} s, harmonized in {res['harmonize_seconds']:.2f} s); "
          f"peak RSS {res['peak_rss_bytes'] / 1e9:.2f} GB -> target (seconds, <= 2 GB) "
          f"{'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
