"""A BRAX replica in the release layout.

Layout (physionet.org/files/brax/1.1.0/)::

    <root>/master_spreadsheet_update.csv
    <root>/images/id_<PatientID>/Study_<UID>/Series_<UID>/image-<UID>.png    8-bit PNG

Quirks reproduced: labels ``1.0`` / ``0.0`` / ``-1.0`` / blank; blank ``ViewPosition`` on
about a quarter of the rows; ``PatientAge`` in 5-year groups with ``85 or more``; a thin strip
(``Rows`` 40, ``Columns`` 1200) among the rows; patients with several studies. The column
*order* is not pinned by any source (the harmonizer finds columns by name); this one is a guess.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets.chexpert import LABELS
from . import register_fake
from .dicom import write_dicom
from .images import synthetic_cxr, write_png
from .tables import write_csv

HEADER = ["DicomPath", "PngPath", "PatientID", "AccessionNumber", "StudyDate", "PatientSex",
          "PatientAge", "ViewPosition", "Manufacturer", "Rows", "Columns", *LABELS]
CELLS = ("1.0", "0.0", "-1.0", "", "", "")


def _uid(rng: np.random.Generator) -> str:
    return "1.2.826.0.1.3680043.8.498." + str(int(rng.integers(10**11, 10**12)))


def write_brax(root: str | Path, *, n_patients: int = 4, seed: int = 0, images: bool = True,
               name: str = "master_spreadsheet_update.csv", dicom: bool = False) -> Path:
    """Write the replica under ``root`` and return ``root``; the last row is a thin strip.
    ``dicom=True`` also writes each image as a DICOM at its ``DicomPath`` (the same pixels,
    16-bit; every third one MONOCHROME1)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows = []
    views = ("PA", "AP", "L", "")
    ages = ("45 - 49", "60 - 64", "85 or more", "30 - 34")
    for p in range(n_patients):
        pid = "".join(rng.choice(list("0123456789abcdef"), 32))
        for s in range(1 + p % 2):
            study, series = _uid(rng), _uid(rng)
            for v in range(2):
                sop = _uid(rng)
                rel = f"id_{pid}/Study_{study}/Series_{series}/image-{sop}"
                h, w = (300, 260) if v == 0 else (260, 300)
                labels = [CELLS[int(rng.integers(len(CELLS)))] for _ in LABELS]
                rows.append([f"Anonymized_DICOMs/{rel}.dcm", f"images/{rel}.png", pid,
                             str(int(rng.integers(10**7, 10**8))) + str(s), f"2019{p + 1:02d}15",
                             "MF"[p % 2], ages[p % 4], views[(p + s + v) % 4], "FUJIFILM", h, w,
                             *labels])
                img = synthetic_cxr(h, w, rng=rng) if images or dicom else None
                if images:
                    write_png(root / f"images/{rel}.png", (img >> 4).astype(np.uint8))
                if dicom:
                    mono1 = len(rows) % 3 == 0
                    write_dicom(root / f"Anonymized_DICOMs/{rel}.dcm",
                                4095 - img if mono1 else img, bits_stored=12, Modality="DX",
                                photometric="MONOCHROME1" if mono1 else "MONOCHROME2",
                                PatientID=pid, Manufacturer="FUJIFILM")
    strip = list(rows[-1])
    strip[1] = strip[1].replace(".png", "9.png")
    strip[0] = strip[0].replace(".dcm", "9.dcm")
    strip[9], strip[10] = 40, 1200
    rows.append(strip)
    write_csv(root / name, HEADER, rows)
    return root


@register_fake("brax")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 patients, 6 studies, 12 PNGs (+ one thin strip row)."""
    return {"base_image_dir": write_brax(root)}
