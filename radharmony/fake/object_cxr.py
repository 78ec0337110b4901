"""An Object-CXR replica in the challenge's format (images already extracted from the zips).

Layout::

    <root>/train.csv, <root>/dev.csv     image_name,annotation
    <root>/train/00001.jpg ...            8-bit JPEG, sizes vary
    <root>/dev/08001.jpg ...

Quirks reproduced: several shapes in one cell separated by ``;`` (type first: 0 rectangle,
1 ellipse, 2 polygon); integer pixel coordinates; empty annotations for negative images
(half of them); dev names continuing the train numbering.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv


def _annotation(rng: np.random.Generator, h: int, w: int, n: int) -> str:
    parts = []
    for k in range(n):
        kind = k % 3
        x0, y0 = int(rng.integers(10, w // 2)), int(rng.integers(10, h // 2))
        x1, y1 = x0 + int(rng.integers(8, w // 3)), y0 + int(rng.integers(8, h // 3))
        if kind < 2:
            parts.append(f"{kind} {x0} {y0} {x1} {y1}")
        else:
            pts = [(x0, y0), (x1, y0 + 3), ((x0 + x1) // 2, y1), (x0 + 2, y1 - 4)]
            parts.append("2 " + " ".join(f"{x} {y}" for x, y in pts))
    return ";".join(parts)


def write_object_cxr(root: str | Path, *, n_train: int = 6, n_dev: int = 2, seed: int = 0,
                     images: bool = True) -> Path:
    """Write the replica under ``root`` and return ``root``. Train image 1 has all three
    shape types in one cell; even-numbered images have no object."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    number = 1
    for split, n in (("train", n_train), ("dev", n_dev)):
        rows = []
        if split == "dev":
            number = 8001
        for i in range(n):
            name = f"{number:05d}.jpg"
            number += 1
            h, w = (int(rng.integers(300, 360)), int(rng.integers(260, 320)))
            rows.append([name, "" if i % 2 == 0 else _annotation(rng, h, w, 3 if i == 1 else 1)])
            if images:
                (root / split).mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(root / split / name), synthetic_cxr(h, w, rng=rng, bits=8),
                            [cv2.IMWRITE_JPEG_QUALITY, 90])
        write_csv(root / f"{split}.csv", ["image_name", "annotation"], rows)
    return root


@register_fake("object_cxr_train", "object_cxr_dev")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 train and 2 dev JPEGs."""
    return {"base_image_dir": write_object_cxr(root)}
