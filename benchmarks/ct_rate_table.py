"""The CT-RATE table at full scale: metadata, reports and labels of 50,188 reconstructions joined.

    python -m benchmarks.ct_rate_table [--rounds 3] [--work bench-data]

The fake writer's CSVs (the released columns; ~1.9 reconstructions per scan, distinct report
texts) for both splits: train 47,149 and validation 3,039 rows, 50,188 in all, written once
under ``--work``. Each round, in a fresh process (so nothing is warm but the page cache):

- **cold**: ``CTRATE{Train,Valid}Harmonizer(base_image_dir=...).harmonize()``: read the three
  CSVs of each split, join, validate (no table cache). Target: <= 10 s.
- **cached**: the same through the table cache (``harmonize(cache_dir=...)``, filled by an
  earlier call), in a fresh process: keying on the inputs' identities and reading the stored
  table. Target: <= 1 s.

The best round counts (on a shared machine the slower rounds measure the neighbours); the
process's CPU time is reported beside the wall time. Imports are not timed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPLITS = {"train": 47_149, "valid": 3_039}


def corpus(work: Path, scale: float = 1.0) -> Path:
    """Both splits' CSVs under ``work/ct-rate-table`` (written once; ``scale`` < 1: that
    fraction of the rows, in a folder of its own); returns ``dataset/``."""
    from radharmony.fake.ct_rate import write_ct_rate

    sizes = {split: max(1, int(n * scale)) for split, n in SPLITS.items()}
    root = work / ("ct-rate-table" if scale == 1 else f"ct-rate-table-{scale:g}")
    if not (root / "done").exists():
        print(f"writing {sum(sizes.values()):,} CT-RATE metadata rows under {root} (once) ...",
              flush=True)
        for split, n in sizes.items():
            write_ct_rate(root, split=split, n_patients=n, metadata_only=True, n_volumes=n,
                          seed={"train": 0, "valid": 1}[split])
        (root / "done").write_text("ok\n")
    return root / "dataset"


def one_round(base: str, cache: str | None) -> dict:
    """Time one harmonize of both splits (in this process)."""
    import warnings

    from radharmony.datasets.ct_rate import CTRATETrainHarmonizer, CTRATEValidHarmonizer

    t0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cls in (CTRATETrainHarmonizer, CTRATEValidHarmonizer):
            rows += len(cls(base_image_dir=base).harmonize(cache_dir=cache))
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "rows": rows}


def in_process(base: Path, cache: Path | None) -> dict:
    code = ("import json, sys; from benchmarks.ct_rate_table import one_round; "
            "print(json.dumps(one_round(sys.argv[1], sys.argv[2] or None)))")
    out = subprocess.run([sys.executable, "-c", code, str(base), str(cache or "")], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=ROOT / "bench-data")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the 50,188 rows")
    args = ap.parse_args(argv)
    base = corpus(args.work, args.scale)
    cache = base.parent / "table-cache"
    in_process(base, cache)  # fills the table cache
    cold = [in_process(base, None) for _ in range(args.rounds)]
    cached = [in_process(base, cache) for _ in range(args.rounds)]
    result = {"rows": cold[0]["rows"], "cold_s": min(r["seconds"] for r in cold),
              "cached_s": min(r["seconds"] for r in cached),
              "cold_cpu_s": min(r["cpu"] for r in cold),
              "cached_cpu_s": min(r["cpu"] for r in cached),
              "cold_rounds": [round(r["seconds"], 3) for r in cold],
              "cached_rounds": [round(r["seconds"], 3) for r in cached]}
    print(f"CT-RATE table, {result['rows']:,} rows: cold {result['cold_s']:.2f} s "
          f"(target <= 10 s), cached {result['cached_s']:.3f} s (target <= 1 s); CPU time "
          f"{result['cold_cpu_s']:.2f} s / {result['cached_cpu_s']:.3f} s; wall rounds "
          f"{result['cold_rounds']} / {result['cached_rounds']}")
    return result


if __name__ == "__main__":
    main()
