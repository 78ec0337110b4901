"""NLM Montgomery and Shenzhen replicas in the release layout.

Layout::

    <root>/MontgomerySet/CXR_png/MCUCXR_0001_0.png            16-bit PNG (12-bit values)
    <root>/MontgomerySet/ClinicalReadings/MCUCXR_0001_0.txt   "Patient's Sex: F" ...
    <root>/MontgomerySet/ManualMask/{leftMask,rightMask}/MCUCXR_0001_0.png   0/255 masks
    <root>/Shenzhen-Hospital-CXR-Set/CXR_png/CHNCXR_0001_0.png   8-bit PNG
    <root>/Shenzhen-Hospital-CXR-Set/ClinicalReadings/CHNCXR_0001_0.txt   "male 45yrs\\nnormal"

Quirks reproduced: the label as the last character of the stem; ids not contiguous
(``MCUCXR_0007`` absent, as in the real set); one Montgomery image without masks and one
Shenzhen image without a reading; a ``Thumbs.db`` beside the PNGs. Bit depths are not
confirmed on real files (see :mod:`radharmony.datasets.nlm_tb`).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from . import register_fake
from .images import synthetic_cxr, write_png

MONTGOMERY = [("MCUCXR_0001_0", "F", "027Y", "normal"), ("MCUCXR_0002_0", "M", "040Y", "normal"),
              ("MCUCXR_0008_0", "F", "065Y", "normal"),
              ("MCUCXR_0104_1", "M", "052Y", "Right upper lobe cavitary lesion, TB."),
              ("MCUCXR_0108_1", "M", "031Y", "bilateral infiltrates consistent with TB")]
SHENZHEN = [("CHNCXR_0001_0", "male 45yrs", "normal"), ("CHNCXR_0002_0", "female 36yrs", "normal"),
            ("CHNCXR_0327_1", "male 23yrs", "STB,ATB in the right upper field"),
            ("CHNCXR_0330_1", "female 61yr", "PTB in the left lower field")]


def _lung(h: int, w: int, side: int) -> np.ndarray:
    mask = np.zeros((h, w), np.uint8)
    center = (int(w * (0.5 + side * 0.19)), int(h * 0.47))
    cv2.ellipse(mask, center, (int(w * 0.13), int(h * 0.28)), 0, 0, 360, 255, -1)
    return mask


def write_montgomery(root: str | Path, *, seed: int = 0, images: bool = True) -> Path:
    """Write ``root/MontgomerySet`` and return it (the ``base_image_dir``)."""
    base = Path(root) / "MontgomerySet"
    rng = np.random.default_rng(seed)
    (base / "CXR_png").mkdir(parents=True, exist_ok=True)
    (base / "CXR_png" / "Thumbs.db").write_bytes(b"\x00" * 16)
    for i, (stem, sex, age, text) in enumerate(MONTGOMERY):
        reading = base / "ClinicalReadings" / f"{stem}.txt"
        reading.parent.mkdir(parents=True, exist_ok=True)
        reading.write_text(f"Patient's Sex: {sex}\nPatient's Age: {age}\n\n{text}\n")
        h, w = (300, 248) if i % 2 else (248, 300)
        if images:
            write_png(base / "CXR_png" / f"{stem}.png", synthetic_cxr(h, w, rng=rng))
        if i != 1:  # this image has no manual masks
            for side, folder in ((1, "leftMask"), (-1, "rightMask")):  # patient's left: image right
                write_png(base / "ManualMask" / folder / f"{stem}.png", _lung(h, w, side))
    return base


def write_shenzhen(root: str | Path, *, seed: int = 0, images: bool = True) -> Path:
    """Write ``root/Shenzhen-Hospital-CXR-Set`` and return it."""
    base = Path(root) / "Shenzhen-Hospital-CXR-Set"
    rng = np.random.default_rng(seed)
    (base / "CXR_png").mkdir(parents=True, exist_ok=True)
    for i, (stem, first, text) in enumerate(SHENZHEN):
        if i != 1:
            reading = base / "ClinicalReadings" / f"{stem}.txt"
            reading.parent.mkdir(parents=True, exist_ok=True)
            reading.write_text(f"{first}\n{text}\n")
        if images:
            write_png(base / "CXR_png" / f"{stem}.png", synthetic_cxr(280, 280, rng=rng, bits=8))
    return base


@register_fake("nlm_montgomery")
def make_montgomery(root: Path) -> dict:
    """Contract-suite maker: 5 Montgomery images, 4 with masks."""
    return {"base_image_dir": write_montgomery(root)}


@register_fake("nlm_shenzhen")
def make_shenzhen(root: Path) -> dict:
    """Contract-suite maker: 4 Shenzhen images."""
    return {"base_image_dir": write_shenzhen(root)}
