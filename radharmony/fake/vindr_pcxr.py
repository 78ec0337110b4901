"""A VinDr-PCXR replica in the real on-disk format.

Layout (``physionet.org/files/vindr-pcxr/1.0.0/``; the CSVs at the release root)::

    <root>/image_labels_{train,test}.csv   image_id,rad_ID,<15 labels>   cells 1.0 / 0.0
    <root>/annotations_{train,test}.csv    image_id,rad_ID,class_name,x_min,y_min,x_max,y_max
    <root>/{train,test}/<image_id>.dicom   uncompressed 16-bit DICOM, small pediatric sizes

Quirks reproduced: ``rad_ID`` with a capital ID; the CSV's misspellings (``Brocho-pneumonia``,
``Diagphramatic hernia``, box class ``Bronchectasis``); every image has at least one annotation
row, ``No finding`` rows with empty box fields; widely varying image sizes; ``PatientAge`` in
the DICOM header.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets.vindr_pcxr import LABELS
from . import register_fake
from .dicom import DX_IMAGE, write_dicom
from .images import synthetic_cxr
from .tables import write_csv

BOX_CLASSES = ("Bronchectasis", "Diffuse aveolar opacity", "Peribronchovascular interstitial "
               "opacity", "Dextro cardia", "Other nodule/mass", "Boot-shaped heart")


def write_vindr_pcxr(root: str | Path, *, n_train: int = 5, n_test: int = 3, seed: int = 0,
                     images: bool = True) -> Path:
    """Write the replica under ``root`` and return the release root.

    Per split, image 0 is ``No finding``; train image 1 has ``Brocho-pneumonia`` and
    ``Pneumonia`` with two boxes.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("test", n_test)):
        labels, boxes = [], []
        for i in range(n):
            image_id = "".join(rng.choice(list("0123456789abcdef"), 32))
            h, w = ((256, 224), (180, 200), (320, 260))[i % 3]
            rad = f"R{int(rng.integers(1, 6))}"
            pos = set() if i == 0 else {LABELS[int(rng.integers(1, len(LABELS)))]}
            if split == "train" and i == 1:
                pos = {"Brocho-pneumonia", "Pneumonia"}
            labels.append([image_id, rad, *(("1.0" if (k in pos or k == "No finding" and not pos)
                                             else "0.0") for k in LABELS)])
            n_box = 0 if i == 0 else (2 if i == 1 else int(rng.integers(0, 2)))
            for _ in range(n_box):
                x0, y0 = float(rng.integers(0, w // 2)), float(rng.integers(0, h // 2))
                boxes.append([image_id, rad, BOX_CLASSES[int(rng.integers(len(BOX_CLASSES)))],
                              x0, y0, x0 + float(rng.integers(10, w // 2)),
                              y0 + float(rng.integers(10, h // 2))])
            if not n_box:
                boxes.append([image_id, rad, "No finding", "", "", "", ""])
            if images:
                write_dicom(root / split / f"{image_id}.dicom", synthetic_cxr(h, w, rng=rng),
                            bits_stored=12, sop_class=DX_IMAGE, Modality="DX",
                            PatientAge=f"{int(rng.integers(0, 10)):03d}Y")
        write_csv(root / f"image_labels_{split}.csv", ["image_id", "rad_ID", *LABELS], labels)
        write_csv(root / f"annotations_{split}.csv",
                  ["image_id", "rad_ID", "class_name", "x_min", "y_min", "x_max", "y_max"],
                  boxes)
    return root


@register_fake("vindr_pcxr", "vindr_pcxr_test")
def make(root: Path) -> dict:
    """Contract-suite maker: 5 train and 3 test DICOMs under one release root."""
    return {"base_image_dir": write_vindr_pcxr(root)}
