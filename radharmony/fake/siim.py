"""A SIIM-ACR Pneumothorax replica in the real on-disk format.

Layout (the original competition download)::

    <root>/train-rle.csv                      "ImageId, EncodedPixels" (leading space)
    <root>/dicom-images-train/<StudyUID>/<SeriesUID>/<ImageId>.dcm
                                              1024 x 1024, 8-bit MONOCHROME2, JPEG Baseline

Quirks reproduced: the space in the header; one row per pneumothorax instance (an image with
two regions has two rows, not adjacent), ``-1`` for an image without one; relative,
column-major run-length codes over 1024 x 1024; folders named by DICOM UIDs the CSV does not
mention; ``PatientID`` a per-image uuid; ``Series Description`` ``"view: PA"``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import cv2
import numpy as np

from ..annotations.masks import rle_encode
from . import register_fake
from .dicom import write_dicom
from .images import synthetic_cxr
from .tables import write_csv

SIZE = 1024
UID_ROOT = "1.2.276.0.7230010.3.1"


def _uid(level: int, rng: np.random.Generator) -> str:
    return f"{UID_ROOT}.{level}.8323329.{int(rng.integers(1000, 20000))}." \
           f"{1517875000 + int(rng.integers(0, 999))}.{int(rng.integers(100000, 999999))}"


def instance_mask(rng: np.random.Generator) -> np.ndarray:
    """One pneumothorax-like region: a thin ellipse near a lung apex or border."""
    mask = np.zeros((SIZE, SIZE), np.uint8)
    center = (int(rng.integers(150, 874)), int(rng.integers(100, 600)))
    axes = (int(rng.integers(20, 120)), int(rng.integers(40, 200)))
    cv2.ellipse(mask, center, axes, float(rng.uniform(0, 180)), 0, 360, 1, -1)
    return mask


def write_siim(root: str | Path, *, n_images: int = 6, seed: int = 0, images: bool = True
               ) -> Path:
    """Write the replica under ``root``; returns the image folder ``dicom-images-train``.

    Image 1 has two instances (two rows), every third image none.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    image_dir = root / "dicom-images-train"
    rows, later = [], []
    for i in range(n_images):
        image_id = _uid(4, rng)
        n_inst = 0 if i % 3 == 0 else (2 if i == 1 else 1)
        codes = [rle_encode(instance_mask(rng), relative=True, order="F")
                 for _ in range(n_inst)] or ["-1"]
        rows.append([image_id, codes[0]])
        later += [[image_id, c] for c in codes[1:]]  # further instances come further down
        if images:
            pid = str(uuid.UUID(bytes=rng.bytes(16), version=4))
            study, series = _uid(2, rng), _uid(3, rng)
            write_dicom(image_dir / study / series / f"{image_id}.dcm",
                        synthetic_cxr(SIZE, SIZE, rng=rng, bits=8), jpeg=True,
                        SOPInstanceUID=image_id, StudyInstanceUID=study,
                        SeriesInstanceUID=series, PatientID=pid, PatientName=pid,
                        ViewPosition="PA", SeriesDescription="view: PA",
                        BodyPartExamined="CHEST", PixelSpacing=[0.168, 0.168])
    write_csv(root / "train-rle.csv", ["ImageId", " EncodedPixels"], rows + later)
    image_dir.mkdir(parents=True, exist_ok=True)
    return image_dir


@register_fake("siim_acr_ptx")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 DICOMs, one with two mask instances, two without."""
    return {"base_image_dir": write_siim(root)}
