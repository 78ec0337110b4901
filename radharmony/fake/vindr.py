"""A VinDr-CXR (VinBigData) replica in the real on-disk format.

Layout (the Kaggle competition download)::

    <root>/train.csv                     image_id,class_name,class_id,rad_id,x_min,y_min,x_max,y_max
    <root>/train/<image_id>.dicom        uncompressed 16-bit DICOM (12/14 bits stored)

Quirks reproduced: 32-hex image ids with the ``.dicom`` extension; three radiologists per image
drawn from R1..R17; a radiologist who saw nothing writes one ``No finding`` row (class_id 14)
with empty box fields; boxes as floats (``691.0``) in the DICOM's own pixels; one radiologist
may draw several boxes of one finding; some images MONOCHROME1; images of varied sizes; rows
of one image not contiguous.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from .dicom import DX_IMAGE, write_dicom
from .images import synthetic_cxr
from .tables import write_csv

HEADER = ["image_id", "class_name", "class_id", "rad_id", "x_min", "y_min", "x_max", "y_max"]
FINDINGS = ["Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly",
            "Consolidation", "ILD", "Infiltration", "Lung Opacity", "Nodule/Mass",
            "Other lesion", "Pleural effusion", "Pleural thickening", "Pneumothorax",
            "Pulmonary fibrosis"]


def make_rows(n_images: int, *, seed: int = 0, sizes=((320, 256), (288, 352), (300, 300))
              ) -> tuple[list[list], dict[str, tuple[int, int]]]:
    """``(train.csv rows, {image_id: (rows, cols)})``; image 0 has no finding from anyone."""
    rng = np.random.default_rng(seed)
    rows, shapes = [], {}
    for i in range(n_images):
        image_id = "".join(rng.choice(list("0123456789abcdef"), 32))
        h, w = sizes[i % len(sizes)]
        shapes[image_id] = (h, w)
        for rad in rng.choice(np.arange(1, 18), 3, replace=False):
            n_find = 0 if i == 0 else int(rng.choice([0, 1, 2, 3], p=[.3, .3, .25, .15]))
            if n_find == 0:
                rows.append([image_id, "No finding", 14, f"R{rad}", "", "", "", ""])
            for _ in range(n_find):
                cid = int(rng.integers(len(FINDINGS)))
                for _ in range(int(rng.choice([1, 1, 2]))):
                    x0, y0 = float(rng.integers(0, w // 2)), float(rng.integers(0, h // 2))
                    x1 = float(min(w, x0 + rng.integers(10, w // 2)))
                    y1 = float(min(h, y0 + rng.integers(10, h // 2)))
                    rows.append([image_id, FINDINGS[cid], cid, f"R{rad}", x0, y0, x1, y1])
    order = rng.permutation(len(rows))  # the real file is not grouped by image
    return [rows[k] for k in order], shapes


def write_vindr(root: str | Path, *, n_images: int = 8, seed: int = 0, images: bool = True
                ) -> Path:
    """Write the replica under ``root`` and return the image folder ``root/train``."""
    root = Path(root)
    rows, shapes = make_rows(n_images, seed=seed)
    write_csv(root / "train.csv", HEADER, rows)
    image_dir = root / "train"
    image_dir.mkdir(parents=True, exist_ok=True)
    if images:
        rng = np.random.default_rng(seed + 1)
        for i, (image_id, (h, w)) in enumerate(shapes.items()):
            bits = 12 if i % 2 else 14
            img = (synthetic_cxr(h, w, rng=rng).astype(np.uint32) << (bits - 12)).astype(np.uint16)
            mono1 = i % 3 == 1
            write_dicom(image_dir / f"{image_id}.dicom", img.max() - img if mono1 else img,
                        photometric="MONOCHROME1" if mono1 else "MONOCHROME2",
                        bits_stored=bits, sop_class=DX_IMAGE, Modality="DX",
                        PatientSex=str(rng.choice(["M", "F", "O"])))
    return image_dir


@register_fake("vindr_cxr")
def make(root: Path) -> dict:
    """Contract-suite maker: 8 images with DICOMs."""
    return {"base_image_dir": write_vindr(root)}
