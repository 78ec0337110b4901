"""Looking at a volume: the viewer's page and one slice of each plane on a 512 x 512 x 400 CT.

    python -m benchmarks.viewer_volume [--work bench-data]

A synthetic int16 chest CT (:func:`radharmony.fake.volumes.synthetic_ct`, 400 x 512 x 512,
0.7 x 0.7 x 1.25 mm) is written once as uncompressed NIfTI under ``--work`` and read into the
volume cache (timed, no target: ``pre_cache``). Then a fresh viewer server answers, over HTTP:

(v1) **the page** (``/``) and **the sample** (``/api/sample``: opens the cache entry, reads the
     annotations hook; no voxels). Target <= 1 s each.
(v2) **one slice of each plane** (``/volume.png``, middle slice, lung window), first and again:
     an axial slice decodes the chunks of one 64-slice slab, a coronal or sagittal plane one slab
     across the depth. Target <= 1 s each; the bytes sent are printed (one plane's PNG, never
     the 210 MB volume).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import ClassVar

import numpy as np

SHAPE = (400, 512, 512)       # (D, H, W)
SPACING = (1.25, 0.7, 0.7)    # mm
TARGET_S = 1.0


def _dataset(work: Path):
    import pandas as pd

    from radharmony.data.volumes import VolumeDataset
    from radharmony.fake.volumes import synthetic_ct, write_nifti
    from radharmony.spec import DatasetSpec
    from radharmony.table.harmonizer import BaseHarmonizer

    class BenchHarmonizer(BaseHarmonizer):
        spec: ClassVar[DatasetSpec] = DatasetSpec(key="benchct", title="Bench CT",
                                                  outputs=frozenset(), row_unit="volume")

    class BenchDataset(VolumeDataset):
        harmonizer_class = BenchHarmonizer

    path = work / "viewer_volume" / "ct.nii"
    if not path.exists():
        affine = np.diag([-SPACING[2], -SPACING[1], SPACING[0], 1.0])  # RAS: (i, j, k) = (W, H, D)
        write_nifti(path, synthetic_ct(SHAPE).transpose(2, 1, 0), affine)
    table = pd.DataFrame([{"patient_id": "p0", "study_id": "s0", "image_path": "ct.nii",
                           "view_position": None, "report": None}])
    return BenchDataset(path.parent, harmonized_df=table, cache_dir=path.parent / "cache")


def _timed_get(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
    return time.perf_counter() - start, len(body)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=Path("bench-data"))
    args = p.parse_args(argv)
    from radharmony.viewer import make_server

    ds = _dataset(args.work)
    start = time.perf_counter()
    ds.pre_cache(progress=False)
    out = {"volume": list(SHAPE), "pre_cache_s": round(time.perf_counter() - start, 2)}
    server = make_server([ds], port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = server.url
        out["page_s"], out["page_bytes"] = _timed_get(base)
        out["sample_s"], out["sample_bytes"] = _timed_get(base + "api/sample?split=benchct&index=0")
        for plane, k in (("axial", 200), ("coronal", 256), ("sagittal", 256)):
            url = base + f"volume.png?split=benchct&index=0&plane={plane}&slice={k}&window=lung"
            out[f"{plane}_first_s"], out[f"{plane}_bytes"] = _timed_get(url)
            out[f"{plane}_again_s"], _ = _timed_get(url.replace(f"slice={k}", f"slice={k + 1}"))
    finally:
        server.shutdown()
        server.server_close()
    out = {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}
    out["met"] = all(v <= TARGET_S for k, v in out.items() if k.endswith("_s") and
                     k != "pre_cache_s")
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
