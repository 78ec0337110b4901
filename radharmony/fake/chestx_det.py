"""A ChestX-Det replica in the authors' format (images already extracted from the zips).

Layout::

    <root>/ChestX_Det_train.json, <root>/ChestX_Det_test.json
        [{"file_name": "36199.png", "syms": [...], "boxes": [[x1, y1, x2, y2]],
          "polygons": [[[x, y], ...]]}, ...]          one JSON array per split
    <root>/train_data/36199.png ...                   8-bit 1024 x 1024 PNGs
    <root>/test_data/...

Quirks reproduced: integer pixel coordinates; one polygon per box, in the same order; images
without findings (empty lists); file names that are ChestX-Det's own numbers, except one test
image named as NIH's ``Image Index`` (as ChestX-Det10 names them).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..datasets.chestx_det import FILES, LABELS, ZIP_FOLDERS
from . import register_fake
from .images import synthetic_cxr, write_png

SIZE = 1024


def _instance(rng: np.random.Generator) -> tuple[list[int], list[list[int]]]:
    """A box and a polygon inside it (a diamond with one extra point)."""
    x0, y0 = int(rng.integers(100, 600)), int(rng.integers(100, 600))
    x1, y1 = x0 + int(rng.integers(40, 300)), y0 + int(rng.integers(40, 300))
    cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
    return [x0, y0, x1, y1], [[cx, y0], [x1, cy], [cx + 5, y1], [x0, cy], [x0 + 3, y0 + 3]]


def write_chestx_det(root: str | Path, *, n_train: int = 5, n_test: int = 2, seed: int = 0,
                     images: bool = True) -> Path:
    """Write the replica under ``root`` and return ``root``. Train image 1 has two instances of
    different findings; every third image none; the last test image has an NIH name."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    number = 36199
    for split, n in (("train", n_train), ("test", n_test)):
        entries = []
        for i in range(n):
            name = "00000042_006.png" if split == "test" and i == n - 1 else f"{number}.png"
            number += 1
            k = 0 if i % 3 == 0 else (2 if i == 1 else 1)
            syms = [LABELS[int(rng.integers(0, len(LABELS)))] for _ in range(k)]
            if k == 2 and syms[0] == syms[1]:
                syms[1] = LABELS[(LABELS.index(syms[0]) + 1) % len(LABELS)]
            pairs = [_instance(rng) for _ in range(k)]
            entries.append({"file_name": name, "syms": syms, "boxes": [b for b, _ in pairs],
                            "polygons": [p for _, p in pairs]})
            if images:
                write_png(root / ZIP_FOLDERS[split] / name,
                          synthetic_cxr(SIZE, SIZE, rng=rng, bits=8))
        (root / FILES[split]).write_text(json.dumps(entries))
    return root


@register_fake("chestx_det")
def make(root: Path) -> dict:
    """Contract-suite maker: 5 train and 2 test PNGs, one of them NIH-named."""
    return {"base_image_dir": write_chestx_det(root)}
