"""Canonical finding counts on the real metadata tables, and the time the derivation takes.

Harmonizes each real table torchxrayvision ships (NIH, Google, CheXpert, PadChest, VinDr, RSNA,
SIIM, OpenI), derives the canonical findings with :func:`radharmony.vocabulary.derive_findings`
and prints a markdown table of positives / negatives (and uncertain, ``u``) per dataset and
finding, then the derivation time and peak RSS.

    python -m benchmarks.vocab_counts [--update-doc docs/vocabulary.md]

``--update-doc`` rewrites the table between the ``<!-- counts:start -->`` and
``<!-- counts:end -->`` lines of that page.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import time
import warnings
from pathlib import Path

from radharmony.datasets.chexpert import CheXpertHarmonizer
from radharmony.datasets.nih import NIHChestXray14Harmonizer, NIHGoogleHarmonizer
from radharmony.datasets.openi import OpenIHarmonizer
from radharmony.datasets.padchest import PadChestHarmonizer
from radharmony.datasets.rsna import RSNAPneumoniaHarmonizer
from radharmony.datasets.siim import SIIMPneumothoraxHarmonizer
from radharmony.datasets.vindr import VinDrCXRHarmonizer
from radharmony.vocabulary import FINDINGS, derive_findings

#: dataset key -> (harmonizer, the real table's file name in torchxrayvision/data)
REAL_TABLES = {
    "nih_cxr14": (NIHChestXray14Harmonizer, "Data_Entry_2017_v2020.csv.gz"),
    "nih_cxr14_google": (NIHGoogleHarmonizer, "google2019_nih-chest-xray-labels.csv.gz"),
    "chexpert": (CheXpertHarmonizer, "chexpert_train.csv.gz"),
    "padchest": (PadChestHarmonizer, "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz"),
    "vindr_cxr": (VinDrCXRHarmonizer, "vinbigdata-train.csv.gz"),
    "rsna_pneumonia": (RSNAPneumoniaHarmonizer, "kaggle_stage_2_train_labels.csv.zip"),
    "siim_acr_ptx": (SIIMPneumothoraxHarmonizer, "siim-pneumothorax-train-rle.csv.gz"),
    "openi": (OpenIHarmonizer, "NLMCXR_reports.tgz"),
}

START, END = "<!-- counts:start -->", "<!-- counts:end -->"


def txv_data_dir() -> Path | None:
    spec = importlib.util.find_spec("torchxrayvision")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / "data").is_dir():
            return Path(loc) / "data"
    return None

def harmonize_real(key: str, data_dir: Path):
    harmonizer, name = REAL_TABLES[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return harmonizer(csv_path=data_dir / name).harmonize()

def counts(derived) -> dict[str, tuple[int, int, int]]:
    """finding -> (positives, negatives, uncertain), findings with any known value only."""
    v = derived.to_numpy()
    out = {}
    for j, f in enumerate(derived.columns):
        pos, neg, unc = (int((v[:, j] == x).sum()) for x in (1.0, 0.0, -1.0))
        if pos or neg or unc:
            out[f] = (pos, neg, unc)
    return out

def markdown(all_counts: dict[str, dict[str, tuple[int, int, int]]]) -> str:
    keys = list(all_counts)
    lines = ["| finding | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for f in FINDINGS:
        cells = []
        for k in keys:
            c = all_counts[k].get(f)
            cells.append("" if c is None else
                         f"{c[0]:,} / {c[1]:,}" + (f" (u {c[2]:,})" if c[2] else ""))
        if any(cells):
            lines.append(f"| `{f}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update-doc", type=Path, help="rewrite the count table in this page")
    args = ap.parse_args(argv)
    data_dir = txv_data_dir()
    if data_dir is None:
        print("torchxrayvision's data tables are not installed; nothing to count")
        return 0
    tables = {k: harmonize_real(k, data_dir) for k in REAL_TABLES}
    t0 = time.perf_counter()
    derived = {k: derive_findings(df, REAL_TABLES[k][0].spec) for k, df in tables.items()}
    seconds = time.perf_counter() - t0
    rows = sum(len(d) for d in derived.values())
    all_counts = {k: counts(d) for k, d in derived.items()}
    table = markdown(all_counts)
    print(table)
    print(repr(all_counts))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"derive_findings over {rows:,} rows of {len(tables)} tables: {seconds:.2f} s; "
          f"peak RSS (harmonizing included) {peak:.0f} MiB")
    if args.update_doc:
        text = args.update_doc.read_text()
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        args.update_doc.write_text(f"{head}{START}\n{table}{END}{tail}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
