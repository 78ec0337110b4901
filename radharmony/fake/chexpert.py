"""A CheXpert replica in the real on-disk format (the ``-small`` release by default).

Layout::

    <root>/CheXpert-v1.0-small/train.csv, valid.csv
    <root>/CheXpert-v1.0-small/{train,valid}/patient<NNNNN>/study<N>/view<K>_<frontal|lateral>.jpg

Quirks reproduced: label cells ``1.0`` / ``0.0`` / ``-1.0`` / empty; ``AP/PA`` empty for
lateral images and ``LL`` on one row marked ``Frontal``; ``Sex`` ``Unknown``; patients with
several studies and studies with several views; 8-bit grayscale JPEGs of varying size.
"""

from __future__ import annotations

import csv
from pathlib import Path

import cv2
import numpy as np

from ..datasets.chexpert import COLUMNS, LABELS
from . import register_fake
from .images import synthetic_cxr

HEADER = COLUMNS  # the real header; the real-table test pins it
CELLS = ("1.0", "0.0", "-1.0", "", "", "")


def chexpert_row(path: str, labels: dict[str, str] | None = None, *, sex: str = "Female",
                 age: int = 60, frontal: str = "Frontal", ap_pa: str = "AP") -> list[str]:
    """One row; ``labels`` maps label -> cell text (default: every label empty)."""
    labels = labels or {}
    return [path, sex, str(age), frontal, ap_pa, *(labels.get(k, "") for k in LABELS)]


def write_table(path: str | Path, rows) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(rows)
    return path


def write_chexpert(root: str | Path, *, n_patients: int = 8, seed: int = 0,
                   images: bool = True, release: str = "CheXpert-v1.0-small",
                   patients: list[int] | None = None) -> Path:
    """Write a CheXpert replica under ``root`` and return the release folder. ``patients``:
    the patient numbers (``patient<NNNNN>``) to write, e.g. shared with another family
    member's replica (default ``1..n_patients``); the last quarter are validation patients."""
    base = Path(root) / release
    rng = np.random.default_rng(seed)
    tables: dict[str, list] = {"train": [], "valid": []}
    patients = list(range(1, n_patients + 1)) if patients is None else list(patients)
    n_patients = len(patients)
    for i, p in enumerate(patients, start=1):
        split = "valid" if i > n_patients - max(1, n_patients // 4) else "train"
        sex = "Unknown" if p == 3 else ("Female", "Male")[p % 2]
        for s in range(1, int(rng.integers(1, 4)) + 1):
            for v in range(1, int(rng.integers(1, 3)) + 1):
                lateral = v == 2
                kind = "lateral" if lateral else "frontal"
                rel = f"{split}/patient{p:05d}/study{s}/view{v}_{kind}.jpg"
                labels = {k: CELLS[int(rng.integers(len(CELLS)))] for k in LABELS[1:]}
                if not any(x == "1.0" for x in labels.values()):
                    labels["No Finding"] = "1.0"
                ap_pa = "" if lateral else ("LL" if (p, s) == (2, 1) else
                                            ("AP", "PA")[int(rng.integers(2))])
                tables[split].append(chexpert_row(
                    f"{release}/{rel}", labels, sex=sex, age=int(rng.integers(18, 91)),
                    frontal="Lateral" if lateral else "Frontal", ap_pa=ap_pa))
                if images:
                    h, w = (320, int(rng.integers(300, 400))) if lateral else \
                        (int(rng.integers(320, 400)), 320)
                    out = base / rel
                    out.parent.mkdir(parents=True, exist_ok=True)
                    cv2.imwrite(str(out), synthetic_cxr(h, w, rng=rng, bits=8),
                                [cv2.IMWRITE_JPEG_QUALITY, 90])
    for split, rows in tables.items():
        write_table(base / f"{split}.csv", rows)
    return base


@register_fake("chexpert", "chexpert_valid")
def make(root: Path) -> dict:
    """Contract-suite maker: a small replica with JPEGs."""
    return {"base_image_dir": write_chexpert(root)}
