"""A TBX11K replica in the real on-disk format.

Layout (the release as torchxrayvision reads it)::

    <root>/annotations/json/TBX11K_train.json    COCO: categories, images, annotations
    <root>/annotations/json/TBX11K_val.json
    <root>/imgs/tb/tb0005.png                    512 x 512, 8-bit, 3 equal channels
    <root>/imgs/health/h0001.png
    <root>/imgs/sick/s0001.png

Quirks reproduced (from the real fixture): the three categories with ids 1-3 and supercategory
``Tuberculosis``; image ids not contiguous (601 for the first healthy image); ``date_captured``
as ``"2020-06-24 12:42:41.793194"``, empty ``coco_url``/``flickr_url``; ``bbox`` floats with
many digits, ``area`` an integer, ``width``/``height`` repeated on each annotation; two boxes
of one category on one image; healthy and sick images without annotations.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from . import register_fake
from .images import synthetic_cxr

CATEGORIES = [{"id": 1, "name": "ActiveTuberculosis", "supercategory": "Tuberculosis"},
              {"id": 2, "name": "ObsoletePulmonaryTuberculosis", "supercategory": "Tuberculosis"},
              {"id": 3, "name": "PulmonaryTuberculosis", "supercategory": "Tuberculosis"}]
SIZE = 512
DATE = "2020-06-24 12:42:41.793194"


def coco_file(images: list[tuple[int, str]], boxes: dict[int, list[tuple[int, list[float]]]]
              ) -> dict:
    """A TBX11K COCO object: ``images`` ``[(id, file_name)]``, ``boxes`` ``{image id:
    [(category_id, [x, y, w, h]), ...]}``, keys in the real order."""
    anns, k = [], 0
    for image_id, file_name in images:
        for cat, (x, y, w, h) in boxes.get(image_id, []):
            k += 1
            anns.append({"id": k, "image_id": image_id, "category_id": cat, "iscrowd": 0,
                         "area": int(w * h), "bbox": [x, y, w, h], "width": SIZE,
                         "height": SIZE})
    return {"categories": CATEGORIES,
            "images": [{"id": i, "file_name": f, "width": SIZE, "height": SIZE,
                        "date_captured": DATE, "license": 1, "coco_url": "", "flickr_url": ""}
                       for i, f in images],
            "annotations": anns}


def write_tbx11k(root: str | Path, *, seed: int = 0, images: bool = True) -> Path:
    """Write the replica under ``root``; returns ``root`` (the ``base_image_dir``).

    train: 3 TB images (one with two category-2 boxes, one with boxes of categories 1 and 2),
    2 healthy, 1 sick; val: 1 TB, 1 healthy.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)

    def box() -> list[float]:
        x, y = rng.uniform(60, 300, 2)
        return [float(x), float(y), float(rng.uniform(30, 150)), float(rng.uniform(30, 150))]

    splits = {
        "train": ([(1, "tb/tb0005.png"), (2, "tb/tb0007.png"), (3, "tb/tb0012.png"),
                   (601, "health/h0001.png"), (602, "health/h0003.png"),
                   (1201, "sick/s0002.png")],
                  {1: [(1, box())], 2: [(2, box()), (2, box())], 3: [(1, box()), (2, box())]}),
        "val": ([(4, "tb/tb0020.png"), (603, "health/h0010.png")], {4: [(1, box())]}),
    }
    for split, (ims, boxes) in splits.items():
        out = root / "annotations" / "json" / f"TBX11K_{split}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(coco_file(ims, boxes)))
        if images:
            for _, name in ims:
                path = root / "imgs" / name
                path.parent.mkdir(parents=True, exist_ok=True)
                gray = synthetic_cxr(SIZE, SIZE, rng=rng, bits=8)
                cv2.imwrite(str(path), cv2.merge([gray, gray, gray]))
    return root


@register_fake("tbx11k_train", "tbx11k_val")
def make(root: Path) -> dict:
    """Contract-suite maker: both splits with PNGs."""
    return {"base_image_dir": write_tbx11k(root)}
