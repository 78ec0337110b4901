"""A SIIM-FISABIO-RSNA COVID-19 replica in the competition's on-disk format.

Layout::

    <root>/train_image_level.csv    id,boxes,label,StudyInstanceUID
    <root>/train_study_level.csv    id,Negative for Pneumonia,Typical Appearance,...
    <root>/train/<study>/<series>/<image>.dcm     16-bit DICOM (some MONOCHROME1)

Quirks reproduced: 12-hex pseudonyms with ``_image`` / ``_study`` suffixes; ``boxes`` as a
Python literal with single quotes and long floats, empty for images without one; ``label``
``opacity 1 x1 y1 x2 y2`` repeated per box or ``none 1 0 0 1 1``; one study with two images of
which only one has boxes (different series folders); rows not grouped by study.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from .dicom import write_dicom
from .images import synthetic_cxr
from .tables import write_csv

STUDY_HEADER = ["id", "Negative for Pneumonia", "Typical Appearance",
                "Indeterminate Appearance", "Atypical Appearance"]


def _hex(rng: np.random.Generator) -> str:
    return "".join(rng.choice(list("0123456789abcdef"), 12))


def write_siim_covid(root: str | Path, *, n_studies: int = 4, seed: int = 0,
                     images: bool = True) -> Path:
    """Write the replica under ``root`` and return ``root``. Study 0 (negative) has two
    images; study 1 (typical) two boxes; each class appears once in the first four studies."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    image_rows, study_rows = [], []
    for s in range(n_studies):
        study = _hex(rng)
        cls = s % 4
        study_rows.append([f"{study}_study", *[int(k == cls) for k in range(4)]])
        for k in range(2 if s == 0 else 1):
            image, series = _hex(rng), _hex(rng)
            h, w = (320, 288) if (s + k) % 2 else (288, 320)
            # study 0 (class 0, negative) -> no boxes; study 1 (typical) has 2 boxes
            n_box = 0 if cls == 0 else (2 if s == 1 else 1)
            boxes = []
            for _ in range(n_box):
                x, y = float(rng.uniform(10, w / 2)) + 0.28836, float(rng.uniform(10, h / 2))
                boxes.append({"x": x, "y": y, "width": float(rng.uniform(20, w / 3)),
                              "height": float(rng.uniform(20, h / 3))})
            label = " ".join(f"opacity 1 {b['x']} {b['y']} {b['x'] + b['width']} "
                             f"{b['y'] + b['height']}" for b in boxes) or "none 1 0 0 1 1"
            image_rows.append([f"{image}_image", repr(boxes) if boxes else "", label, study])
            if images:
                img = synthetic_cxr(h, w, rng=rng)
                mono1 = (s + k) % 3 == 2
                write_dicom(root / "train" / study / series / f"{image}.dcm",
                            img.max() - img if mono1 else img, bits_stored=12,
                            photometric="MONOCHROME1" if mono1 else "MONOCHROME2",
                            Modality="DX")
    order = rng.permutation(len(image_rows))
    write_csv(root / "train_image_level.csv", ["id", "boxes", "label", "StudyInstanceUID"],
              [image_rows[i] for i in order])
    write_csv(root / "train_study_level.csv", STUDY_HEADER, study_rows)
    (root / "train").mkdir(parents=True, exist_ok=True)
    return root


@register_fake("siim_covid19")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 studies, 5 DICOMs."""
    return {"base_image_dir": write_siim_covid(root)}
