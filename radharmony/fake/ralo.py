"""A Stony Brook RALO replica in the real on-disk format.

Layout (the Zenodo record, unpacked)::

    <root>/ralo-dataset-metadata.csv     two header lines: readers, then column names
    <root>/CXR_images_scored/<row>.jpg   numbered by the table's row, 0-based; AP

Quirks reproduced: the first header line groups the columns by reader (the second names
repeat, which pandas reads as ``.1``); a column radharmony does not read (``Age``); scores as
whole numbers 0-8 per reader; one unscored cell; JPEGs.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv

#: (subject, exam time, reader 1 extent, opacity, reader 2 extent, opacity)
ROWS = (("1", "20200402_1030", 4, 3, 5, 3), ("1", "20200404_0815", 6, 5, 6, 6),
        ("2", "20200410_2200", 0, 0, 1, 1), ("3", "20200415_0600", 8, 8, 7, 8),
        ("4", "20200420_1200", 2, "", 2, 2))


def write_ralo(root: str | Path, *, seed: int = 0, images: bool = True) -> Path:
    """Write the replica under ``root``; returns ``root``."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    header = ["Subject_ID", "Exam_DateTime", "Age", "Total GEOGRAPHIC", "Total OPACITY",
              "Total GEOGRAPHIC", "Total OPACITY"]
    groups = ["", "", "", "Reader 1", "", "Reader 2", ""]
    write_csv(root / "ralo-dataset-metadata.csv", groups,
              [header] + [[s, t, 60 + i, e1, o1, e2, o2]
                          for i, (s, t, e1, o1, e2, o2) in enumerate(ROWS)])
    if images:
        (root / "CXR_images_scored").mkdir(parents=True, exist_ok=True)
        for i in range(len(ROWS)):
            cv2.imwrite(str(root / "CXR_images_scored" / f"{i}.jpg"),
                        synthetic_cxr(120, 110, rng=rng, bits=8))
    return root


@register_fake("ralo")
def make(root: Path) -> dict:
    """Contract-suite maker: 5 images of 4 patients, one score unscored by reader 1."""
    return {"base_image_dir": write_ralo(root)}
