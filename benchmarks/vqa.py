"""ReXVQA at full size: harmonizing ~700k questions (metadata only, no images needed).

    python -m benchmarks.vqa [--work bench-data] [--runs 3]

The replica is the fake writer's at ReXGradient's full size (140,000 / 10,000 / 10,000 studies,
about 4.4 questions each: :func:`radharmony.fake.rexvqa.make_questions`), written once under
``<work>/rexvqa/metadata/`` and reused. Each run harmonizes the three split files one after
the other in a fresh process (no table cache), timing the three ``harmonize()`` calls
together (wall and CPU time) and taking the process's peak RSS; the fastest run counts for
time (the timeit convention on a shared machine), the largest for memory. Targets: <= 10 s, <= 2 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = {"train": 140_000, "valid": 10_000, "test": 10_000}
TARGET_S, TARGET_GB = 10.0, 2.0


def replica(work: Path) -> Path:
    """``<work>/rexvqa`` with ``metadata/<split>_vqa_data.json`` at full size (made once)."""
    from radharmony.fake.rexgradient import make_metadata
    from radharmony.fake.rexvqa import dump, make_questions

    root = work / "rexvqa"
    meta = root / "metadata"
    if all((meta / f"{s}_vqa_data.json").is_file() for s in STUDIES):
        return root
    meta.mkdir(parents=True, exist_ok=True)
    start = 0
    for i, (split, n) in enumerate(STUDIES.items()):
        questions = make_questions(make_metadata(n, seed=i), split=split, seed=i + 7,
                                   start=start)
        start += len(questions)
        tmp = meta / f"{split}_vqa_data.json.tmp"
        dump(tmp, questions)
        tmp.rename(meta / f"{split}_vqa_data.json")
    return root


def one_run(root: Path) -> dict:
    """Harmonize the three splits in this process: seconds, questions, peak RSS."""
    from radharmony.datasets.rexvqa import (ReXVQATestHarmonizer, ReXVQATrainHarmonizer,
                                            ReXVQAValidHarmonizer)

    start, cpu, n = time.perf_counter(), time.process_time(), 0
    for cls in (ReXVQATrainHarmonizer, ReXVQAValidHarmonizer, ReXVQATestHarmonizer):
        n += len(cls(csv_path=root / "metadata" / f"{cls.split}_vqa_data.json").harmonize())
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    return {"seconds": seconds, "cpu_seconds": cpu, "questions": n, "peak_rss_gb": rss}


def bench(work: Path, runs: int = 3) -> dict:
    root = replica(work)
    size = sum(f.stat().st_size for f in (root / "metadata").glob("*.json")) / 2**30
    results = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-m", "benchmarks.vqa", "--one", str(root)],
                             cwd=ROOT, capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(r["seconds"] for r in results)
    rss = max(r["peak_rss_gb"] for r in results)
    return {"questions": results[0]["questions"], "json_gb": round(size, 2),
            "seconds": round(best, 2), "peak_rss_gb": round(rss, 2),
            "cpu_seconds": round(min(r["cpu_seconds"] for r in results), 2),
            "runs": [round(r["seconds"], 2) for r in results],
            "met": best <= TARGET_S and rss <= TARGET_GB}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default=str(ROOT / "bench-data"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--one", help=argparse.SUPPRESS)  # one measured run (a child process)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(Path(args.one))))
        return
    r = bench(Path(args.work), args.runs)
    print(f"ReXVQA harmonize, {r['questions']:,} questions ({r['json_gb']} GB of JSON): "
          f"{r['seconds']} s (runs {r['runs']}; CPU {r['cpu_seconds']} s), peak RSS "
          f"{r['peak_rss_gb']} GB; targets "
          f"<= {TARGET_S:g} s and <= {TARGET_GB:g} GB: {'met' if r['met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
