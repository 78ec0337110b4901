"""Looking at a mixture: the viewer's open and page times and the composition plot's time.

    python -m benchmarks.mixture_view [--records 3000000] [--work bench-data]

On a synthetic mixture of ``--records`` records (30 sources x 35 tasks, drawn with weights
that span 1000x; targets from one token to report length; row groups of 50,000; the file
and its manifest laid out as records.py says, written once under ``--work``):

(m1) **open**: ``MixtureApp(out)`` and its ``/api/meta``, in a fresh process. Target <= 2 s.
(m2) **a page of 50 records**: the first page filtered by a task (first use of the filter,
     reading only the row groups it needs), a page deep in the unfiltered list, and a page
     of the rarest task (which scans every row group's filter columns once). Target <= 0.5 s
     each.
(m3) **a record by id**: the ``record_id`` column scanned group by group, then its row group
     read -- reported, no target (its images decode on their own request).
(m4) **composition plot** (:func:`radharmony.mixture.plots.plot_composition` to a PNG, target
     lengths streamed by row group). Target <= 10 s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"open_s": 2.0, "page_s": 0.5, "plot_s": 10.0}
GROUP = 50_000
WORDS = ("the lungs are clear no pleural effusion or pneumothorax heart size is normal "
         "there is mild cardiomegaly with small bilateral effusions stable left lower lobe "
         "opacity FINDINGS: IMPRESSION: yes no right upper").split()


def synthetic(out: Path, records: int, *, sources: int = 30, tasks: int = 35, seed: int = 0
              ) -> Path:
    """Write a synthetic mixture of ``records`` records under ``out`` (once: kept when its
    manifest already says so)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from radharmony.mixture.records import MANIFEST_FORMAT, RECORD_SCHEMA

    manifest_path = out / "mixture.json"
    if manifest_path.exists() and json.loads(manifest_path.read_text()).get("records") == records:
        return out
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    src_names = [f"source_{i:02d}" for i in range(sources)]
    task_names = [f"task_{j:02d}" for j in range(tasks)]
    weights = np.outer(rng.uniform(0.2, 1, sources), np.geomspace(1000, 1, tasks))
    weights *= rng.random(weights.shape) > 0.3  # not every source feeds every task
    weights /= weights.sum()
    mean_len = np.geomspace(120, 1, tasks)  # report-length targets down to a word
    pools = [pa.array([" ".join(rng.choice(WORDS, max(1, int(rng.gamma(4, m / 4)))))
                       for _ in range(64)]) for m in mean_len]
    counts = np.zeros((sources, tasks, 2), np.int64)
    with pq.ParquetWriter(out / "records.parquet", RECORD_SCHEMA) as writer:
        for start in range(0, records, GROUP):
            n = min(GROUP, records - start)
            cell = rng.choice(weights.size, n, p=weights.ravel())
            s, t = np.divmod(cell, tasks)
            split = (rng.random(n) < 0.05).astype(np.int64)
            np.add.at(counts, (s, t, split), 1)
            pick = rng.integers(0, 64, n)
            target = pa.concat_arrays([pools[j].take(pa.array(pick[t == j]))
                                       for j in range(tasks)])
            order = np.argsort(t, kind="stable")
            back = np.empty(n, np.int64)
            back[order] = np.arange(n)
            ids = [f"{(start + i) * 2654435761 % 2**64:016x}" for i in range(n)]
            cols = {
                "record_id": ids, "task": np.array(task_names)[t].tolist(),
                "family": ["reports"] * n, "source": np.array(src_names)[s].tolist(),
                "dataset": np.array(src_names)[s].tolist(), "source_split": ["train"] * n,
                "split": np.array(["train", "valid"])[split].tolist(),
                "patient_id": [f"p{i % 99991}" for i in range(n)],
                "study_id": [f"s{i}" for i in range(n)], "sample_id": [f"x:{i}" for i in range(n)],
                "image_paths": [[f"p{i % 977}/img.png"] for i in range(n)],
                "views": [["PA"]] * n, "prompt": ["Describe the findings."] * n,
                "target": target.take(pa.array(back)), "prompt_variant": np.zeros(n, np.int16),
                "fields": ["{}"] * n}
            writer.write_table(pa.table(cols, schema=RECORD_SCHEMA), row_group_size=GROUP)
    rows = [{"source": src_names[i], "task": task_names[j], "split": sp, "records": int(c)}
            for (i, j, k), c in np.ndenumerate(counts) if c
            for sp in [("train", "valid")[k]]]
    excluded = [{"source": src_names[i], "task": task_names[0], "reason": reason,
                 "records": int(rng.integers(10, 5000))}
                for i in range(sources) for reason in ("held out patient", "empty target",
                                                       "no box")[:1 + i % 3]]
    manifest = {"format": MANIFEST_FORMAT, "radharmony_version": "bench", "name":
                f"synthetic-{records}", "seed": seed, "spec": {}, "images": {"mode": "original"},
                "boxes": "pixels", "sources": [{"name": n, "dataset": n, "root": str(out),
                                                "split": "train", "kwargs": {}, "inputs": {}}
                                               for n in src_names],
                "hold_out": {}, "counts": rows, "excluded": excluded, "records": records}
    manifest_path.write_text(json.dumps(manifest))
    return out


def one(out: Path) -> dict:
    """The measured run, in a fresh process (nothing cached from a previous one)."""
    from radharmony.mixture.plots import plot_composition
    from radharmony.viewer.mixture import MixtureApp

    t0 = time.perf_counter()
    app = MixtureApp(out)
    meta = app.meta()
    res = {"records": meta["records"], "row_groups": meta["row_groups"],
           "open_s": time.perf_counter() - t0}
    pages = {}
    tasks = meta["choices"]["task"]
    for name, kw in (("first page of task_00", {"task": "task_00"}),
                     ("page at 60% of the list", {"offset": int(meta["records"] * 0.6)}),
                     (f"first page of {tasks[-1]} (rarest)", {"task": tasks[-1]}),
                     ("second page of task_00", {"task": "task_00", "offset": 50})):
        t = time.perf_counter()
        page = app.records(limit=50, **kw)
        pages[name] = (time.perf_counter() - t, len(page["items"]))
    res["pages"] = pages
    rid = page["items"][-1]["record_id"]
    t = time.perf_counter()
    app.index.record(record_id=rid)  # the Parquet part (images decode on their own route)
    res["record_by_id_s"] = time.perf_counter() - t
    t, cpu = time.perf_counter(), time.process_time()
    plot_composition(out, out / "composition.png")
    res["plot_s"], res["plot_cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=3_000_000)
    p.add_argument("--work", default=str(ROOT / "bench-data"))
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(Path(args.one))))
        return
    t = time.perf_counter()
    out = synthetic(Path(args.work) / f"mixture-{args.records}", args.records)
    print(f"synthetic mixture: {time.perf_counter() - t:.1f} s to write (or reuse) {out}")
    run = subprocess.run([sys.executable, "-m", "benchmarks.mixture_view", "--one", str(out)],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    r = json.loads(run.stdout.strip().splitlines()[-1])
    page_s = max(s for s, _ in r["pages"].values())
    met = {"open_s": r["open_s"], "page_s": page_s, "plot_s": r["plot_s"]}
    print(f"{r['records']:,} records in {r['row_groups']} row groups:")
    print(f"  open (MixtureApp + meta): {r['open_s']:.3f} s (target <= {TARGETS['open_s']:g})")
    for name, (s, n) in r["pages"].items():
        print(f"  {name}: {s:.3f} s, {n} records (target <= {TARGETS['page_s']:g})")
    print(f"  a record by id: {r['record_by_id_s']:.3f} s")
    print(f"  composition plot: {r['plot_s']:.2f} s, CPU {r['plot_cpu_s']:.2f} s (target <= "
          f"{TARGETS['plot_s']:g})")
    print("targets: " + ", ".join(f"{k} {'met' if v <= TARGETS[k] else 'NOT met'}"
                                  for k, v in met.items()))


if __name__ == "__main__":
    main()
