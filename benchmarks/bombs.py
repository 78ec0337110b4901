"""Peak memory of reading two decompression bombs, each in its own process.

    python -m benchmarks.bombs [--dir bench-data/bombs] [--code OLD_CHECKOUT]

* a deflated DICOM of ~0.5 MB: a 16 x 16 image beside a 512 MiB private element of zeros,
  read with ``radharmony.imaging.read.read_image`` and through a dataset's ``ds[0]``;
* a saved harmonizer of ~30 kB: 768 distinct strings of 1 MiB (768 MiB of text, zstd),
  loaded with ``radharmony.table.store.load_table``.

Prints one JSON line per case: the file's size, what happened (refused: the error's first
words) and the reading process's peak RSS (``VmHWM``) beside its peak just before the read (imports done, the dataset built).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

_READ = r"""
import json, sys, time
from pathlib import Path
kind, path = sys.argv[1], Path(sys.argv[2])
import numpy, pandas, pyarrow.parquet, pydicom, torch
from radharmony.errors import RadHarmonyError
from radharmony.imaging.read import read_image
from radharmony.table.store import load_table
from radharmony.datasets.rexgradient import ReXGradientValidDataset
def hwm():  # VmHWM: this image's peak (ru_maxrss carries the parent's across exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
base = hwm()
t = time.perf_counter()
try:
    if kind == "dicom":
        out = "read %s" % (read_image(path)[0].shape,)
    elif kind == "dataset":
        ds = ReXGradientValidDataset(path, dtype=torch.float32)
        base = hwm()  # the dataset built: its read alone is measured
        out = "read %s" % (tuple(ds[0]["img"].shape),)
    else:
        out = "read %d rows" % len(load_table(path)[1])
except RadHarmonyError as exc:
    out = "refused: " + str(exc)[:120]
print(json.dumps({"outcome": out, "seconds": round(time.perf_counter() - t, 2),
                  "rss_before_read_mib": round(base / 1024),
                  "peak_rss_mib": round(hwm() / 1024)}))
"""


def _write(folder: Path) -> dict[str, Path]:
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    from radharmony.datasets.rexgradient import ReXGradientValidDataset
    from radharmony.fake.dicom import write_deflated_dicom
    from radharmony.fake.rexgradient import write_rexgradient
    from radharmony.table import store

    folder.mkdir(parents=True, exist_ok=True)
    tiny = (np.arange(256).reshape(16, 16) * 200).astype(np.uint16)
    dicom = folder / "bomb.dcm"
    if not dicom.exists():
        write_deflated_dicom(dicom, tiny, private_bytes=512 << 20)
    root = folder / "rex" / "ReXGradient-160K"
    if not root.exists():
        root = write_rexgradient(folder / "rex", studies={"valid": 1}, image_size=(96, 80))
        write_deflated_dicom(ReXGradientValidDataset(root).image_file(0), tiny,
                             private_bytes=512 << 20)
    table = folder / "bomb.parquet"
    if not table.exists():
        df = pd.DataFrame({"report": [f"{i:08d}" + "a" * ((1 << 20) - 8) for i in range(768)]})
        real = pq.write_table
        pq.write_table = lambda *a, **k: real(*a, compression="zstd", **k)
        try:
            store.save_table(table, df, {"class": "x"})
        finally:
            pq.write_table = real
    return {"dicom": dicom, "dataset": root, "parquet": table}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("bench-data/bombs"))
    ap.add_argument("--code", type=Path, default=None,
                    help="read with the radharmony package under this folder (e.g. an older "
                         "commit's, for a before/after comparison)")
    args = ap.parse_args(argv)
    code = args.code or Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(code.resolve())}
    for kind, path in _write(args.dir).items():
        size = path.stat().st_size if path.is_file() else sum(
            f.stat().st_size for f in path.rglob("*.png") if f.is_file())
        t = time.perf_counter()
        run = subprocess.run([sys.executable, "-c", _READ, kind, str(path)],
                             capture_output=True, text=True, env=env, cwd=args.dir)
        line = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "{}"
        res = {"case": kind, "file_bytes": size, **json.loads(line),
               "wall_s": round(time.perf_counter() - t, 1)}
        if run.returncode:
            res["error"] = run.stderr.strip().splitlines()[-1:]
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
