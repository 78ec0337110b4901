"""A VinDr-CXR PhysioNet-release replica in the real on-disk format.

Layout (``physionet.org/files/vindr-cxr/1.0.0/``)::

    <root>/annotations/image_labels_train.csv   image_id,rad_id,<28 labels>   (3 rows per image)
    <root>/annotations/image_labels_test.csv    image_id,<28 labels>          (1 row per image)
    <root>/annotations/annotations_train.csv    image_id,class_name,rad_id,x_min,y_min,x_max,y_max
    <root>/annotations/annotations_test.csv     image_id,class_name,x_min,y_min,x_max,y_max
    <root>/{train,test}/<image_id>.dicom        uncompressed 16-bit DICOM

Quirks reproduced: the test files' singular ``Other disease``; no ``rad_id`` in the test files;
``No finding`` box rows with empty fields; float box coordinates in DICOM pixels; local labels
beyond the Kaggle 14 (``Rib fracture``, ``Lung cyst``); label cells ``0``/``1``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets.vindr_physionet import LABELS, LOCAL_LABELS
from . import register_fake
from .dicom import DX_IMAGE, write_dicom
from .images import synthetic_cxr
from .tables import write_csv

TEST_LABELS = [("Other disease" if k == "Other diseases" else k) for k in LABELS]


def _image_id(rng) -> str:
    return "".join(rng.choice(list("0123456789abcdef"), 32))


def _box(rng, h: int, w: int) -> list[float]:
    x0, y0 = float(rng.integers(0, w // 2)), float(rng.integers(0, h // 2))
    return [x0, y0, float(min(w, x0 + rng.integers(10, w // 2))),
            float(min(h, y0 + rng.integers(10, h // 2)))]


def write_vindr_physionet(root: str | Path, *, n_train: int = 5, n_test: int = 4, seed: int = 0,
                          images: bool = True) -> Path:
    """Write the replica under ``root`` and return the release root.

    Train image 0: no finding from anyone; image 1: one reader marks ``Rib fracture`` (a
    local label the Kaggle table lacks). Test image 0: ``No finding``; image 1: ``Other disease``.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    shapes: dict[tuple[str, str], tuple[int, int]] = {}
    lab_rows, box_rows = {"train": [], "test": []}, {"train": [], "test": []}
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            image_id = _image_id(rng)
            h, w = ((320, 256), (288, 352), (300, 300))[i % 3]
            shapes[(split, image_id)] = (h, w)
            readers = [f"R{r}" for r in rng.choice(np.arange(1, 18), 3, replace=False)] \
                if split == "train" else [None]
            for r, rad in enumerate(readers):
                found = set() if i == 0 else \
                    {LOCAL_LABELS[int(k)] for k in rng.choice(22, int(rng.integers(0, 3)))}
                if split == "train" and i == 1 and r == 0:
                    found.add("Rib fracture")
                cells = {k: int(k in found) for k in LOCAL_LABELS}
                cells["Other diseases"] = int(split == "test" and i == 1)
                cells["Pneumonia"] = int("Consolidation" in found)
                cells["No finding"] = int(not found and not cells["Other diseases"])
                labels = [cells.get(k, 0) for k in LABELS]
                lab_rows[split].append([image_id, rad, *labels] if rad else [image_id, *labels])
                for name in sorted(found) or ["No finding"]:
                    coords = ["", "", "", ""] if name == "No finding" else _box(rng, h, w)
                    box_rows[split].append([image_id, name, rad, *coords] if rad else
                                           [image_id, name, *coords])
    ann = root / "annotations"
    write_csv(ann / "image_labels_train.csv", ["image_id", "rad_id", *LABELS], lab_rows["train"])
    write_csv(ann / "image_labels_test.csv", ["image_id", *TEST_LABELS], lab_rows["test"])
    write_csv(ann / "annotations_train.csv",
              ["image_id", "class_name", "rad_id", "x_min", "y_min", "x_max", "y_max"],
              [box_rows["train"][k] for k in rng.permutation(len(box_rows["train"]))])
    write_csv(ann / "annotations_test.csv",
              ["image_id", "class_name", "x_min", "y_min", "x_max", "y_max"], box_rows["test"])
    if images:
        for (split, image_id), (h, w) in shapes.items():
            write_dicom(root / split / f"{image_id}.dicom", synthetic_cxr(h, w, rng=rng),
                        bits_stored=12, sop_class=DX_IMAGE, Modality="DX")
    return root


@register_fake("vindr_cxr_physionet", "vindr_cxr_test")
def make(root: Path) -> dict:
    """Contract-suite maker: 5 train and 4 test DICOMs under one release root."""
    return {"base_image_dir": write_vindr_physionet(root)}
