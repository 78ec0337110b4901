"""A RANZCR CLiP replica in the real on-disk format.

Layout (the Kaggle download)::

    <root>/train.csv               StudyInstanceUID, 11 labels (ETT, NGT, CVC, Swan Ganz), PatientID
    <root>/train_annotations.csv   StudyInstanceUID,label,data   (one row per traced line)
    <root>/train/<StudyInstanceUID>.jpg   8-bit grayscale JPEGs of varied size

Quirks reproduced: the label columns grouped ETT, NGT, CVC (not alphabetical); UIDs
``1.2.826.0.1.3680043.8.498.<digits>``; 9-hex ``PatientID`` with two images for one patient;
``data`` as ``[[x, y], ...]`` integer points in JPEG pixels; two lines (one device twice) on
one image, images without any line.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from ..datasets.ranzcr import COLUMNS, LABELS
from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv


def _trace(rng, h: int, w: int) -> list[list[int]]:
    x, y = int(rng.integers(w // 4, 3 * w // 4)), int(rng.integers(h // 10, h // 3))
    pts = [[x, y]]
    for _ in range(int(rng.integers(2, 6))):
        x = int(np.clip(x + rng.integers(-30, 30), 0, w - 1))
        y = int(np.clip(y + rng.integers(20, 60), 0, h - 1))
        pts.append([x, y])
    return pts


def write_ranzcr(root: str | Path, *, n_images: int = 6, seed: int = 0, images: bool = True
                 ) -> Path:
    """Write the replica under ``root``; returns the image folder ``root/train``.

    Images 0 and 1 share a patient; image 1 has two ``CVC - Normal`` lines; image 2 none.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows, lines, sizes = [], [], {}
    patients = ["".join(rng.choice(list("0123456789abcdef"), 9)) for _ in range(n_images)]
    for i in range(n_images):
        uid = "1.2.826.0.1.3680043.8.498." + "".join(map(str, rng.integers(0, 10, 38)))
        h, w = ((420, 380), (400, 400), (360, 440))[i % 3]
        sizes[uid] = (h, w)
        cells = {k: 0 for k in LABELS}
        cells[LABELS[int(rng.integers(0, 3))]] = 1
        cells["CVC - Normal"] = int(i == 1)
        cells[LABELS[3 + int(rng.integers(0, 4))]] = int(i % 2 == 0)
        rows.append([uid, *(cells[k] for k in LABELS), patients[0 if i == 1 else i]])
        for label in (["CVC - Normal", "CVC - Normal"] if i == 1 else
                      [] if i == 2 else [k for k in LABELS if cells[k]][:1]):
            lines.append([uid, label, json.dumps(_trace(rng, h, w))])
    write_csv(root / "train.csv", list(COLUMNS), rows)
    write_csv(root / "train_annotations.csv", ["StudyInstanceUID", "label", "data"], lines)
    image_dir = root / "train"
    image_dir.mkdir(parents=True, exist_ok=True)
    if images:
        for uid, (h, w) in sizes.items():
            cv2.imwrite(str(image_dir / f"{uid}.jpg"), synthetic_cxr(h, w, rng=rng, bits=8),
                        [cv2.IMWRITE_JPEG_QUALITY, 90])
    return image_dir


@register_fake("ranzcr_clip")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 JPEGs, 5 patients, 6 traced lines."""
    return {"base_image_dir": write_ranzcr(root)}
