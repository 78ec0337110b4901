"""CXR-LT 2023 and 2024 replicas over a MIMIC-CXR-JPG replica (the overlay's images).

Layout::

    <root>/files/p1X/p<subject>/s<study>/<dicom_id>.jpg     the MIMIC-CXR-JPG replica
    <root>/cxr-lt-2024/labels.csv     dicom_id,subject_id,study_id,ViewPosition,fpath,<45>,split
    <root>/cxr-lt-2023/{train,development,test}.csv   dicom_id,subject_id,study_id,fpath,<26>

Quirks reproduced: labels ``0`` / ``1`` per image (every image of a study alike), 2024's
``Normal`` against 2023's ``No Finding``, a 2024 split ``val``, one 2024 row with an empty
label cell, a 2023 test file without label columns. The column order is a guess (not pinned
by any source; the harmonizer finds columns by name).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets.cxr_lt import LABELS_2023, LABELS_2024
from . import register_fake
from .mimic import studies, write_mimic
from .tables import write_csv

SPLITS_2024 = {"train": "train", "validate": "val", "test": "test"}
SPLITS_2023 = {"train": "train", "validate": "development", "test": "test"}


def write_cxr_lt(root: str | Path, *, n_subjects: int = 4, seed: int = 0,
                 images: bool = True) -> Path:
    """Write a MIMIC-CXR-JPG replica and both CXR-LT releases over it; returns ``root``."""
    root = Path(root)
    write_mimic(root, n_subjects=n_subjects, seed=seed, images=images)
    rng = np.random.default_rng(seed + 1)
    rows24, rows23 = [], {part: [] for part in SPLITS_2023.values()}
    for s in studies(root):
        positive = set(rng.choice(len(LABELS_2024), 2, replace=False).tolist())
        for dicom, view in zip(s["dicoms"], s["views"]):
            path = f"files/p{s['subject'][:2]}/p{s['subject']}/s{s['study']}/{dicom}.jpg"
            ids = [dicom, s["subject"], s["study"]]
            cells = [int(i in positive) for i in range(len(LABELS_2024))]
            rows24.append([*ids, view, path, *cells, SPLITS_2024[s["split"]]])
            by_name = dict(zip(LABELS_2024, cells))
            by_name["No Finding"] = by_name["Normal"]
            rows23[SPLITS_2023[s["split"]]].append([*ids, path,
                                                    *(by_name[c] for c in LABELS_2023)])
    rows24[0][5] = ""  # an empty label cell (Adenopathy)
    write_csv(root / "cxr-lt-2024" / "labels.csv",
              ["dicom_id", "subject_id", "study_id", "ViewPosition", "fpath", *LABELS_2024,
               "split"], rows24)
    for part, rows in rows23.items():
        header = ["dicom_id", "subject_id", "study_id", "fpath", *LABELS_2023]
        if part == "test":  # released without labels
            header, rows = header[:4], [r[:4] for r in rows]
        write_csv(root / "cxr-lt-2023" / f"{part}.csv", header, rows)
    return root


@register_fake("cxr_lt", "cxr_lt_2023")
def make(root: Path) -> dict:
    """Contract-suite maker (both keys share the replica): 4 patients' MIMIC images."""
    return {"base_image_dir": write_cxr_lt(root)}
