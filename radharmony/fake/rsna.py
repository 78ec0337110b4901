"""An RSNA Pneumonia Detection Challenge replica in the real on-disk format.

Layout (the Kaggle download, plus the two files that restore more metadata)::

    <root>/stage_2_train_labels.csv          patientId,x,y,width,height,Target (one row per box)
    <root>/stage_2_detailed_class_info.csv   patientId,class
    <root>/stage_2_train_images/<patientId>.dcm   8-bit MONOCHROME2, JPEG Baseline
    <root>/kaggle_stage_2_train_images_dicom_headers.csv.gz   (torchxrayvision's header table)
    <root>/pneumonia-challenge-dataset-mappings_2018.json     (RSNA's NIH mapping, optional)

Quirks reproduced: uuid image ids that the DICOM also calls ``PatientID``; box rows of one image
repeated with ``Target`` 1, empty box fields with ``Target`` 0; the detailed class file has one
row per box too; the header table's leading unnamed index column and float ``InstanceNumber``;
``Series Description`` ``"view: PA"``; ages as strings in the DICOM; two RSNA images of one NIH
patient in the mapping.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import cv2
import numpy as np
import pandas as pd

from . import register_fake
from .dicom import write_dicom
from .images import synthetic_cxr
from .tables import write_csv

HEADER_COLUMNS = ["BodyPartExamined", "ConversionType", "Filename", "InstanceNumber",
                  "Modality", "PatientAge", "PatientID", "PatientOrientation", "PatientSex",
                  "PixelSpacing", "SamplesPerPixel", "SeriesNumber", "ViewPosition"]
CLASSES = ["Normal", "No Lung Opacity / Not Normal"]


def write_rsna(root: str | Path, *, n_images: int = 8, seed: int = 0, size: int = 256,
               mapping: bool = True, images: bool = True, image_format: str = "dcm") -> Path:
    """Write the replica under ``root``; returns the image folder ``stage_2_train_images``.

    ``size`` is the square DICOM size (the real files are 1024); boxes are drawn in it.
    ``image_format``: ``"dcm"`` (the release), or ``"png"`` / ``"jpg"`` for the converted
    copies many users train from (same names, 8-bit).
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    image_dir = root / "stage_2_train_images"
    image_dir.mkdir(parents=True, exist_ok=True)
    ids = [str(uuid.UUID(bytes=rng.bytes(16), version=4)) for _ in range(n_images)]
    labels, classes, headers, maps = [], [], [], []
    for i, pid in enumerate(ids):
        n_box = 0 if i % 3 == 0 else int(rng.choice([0, 1, 2, 3], p=[.3, .4, .2, .1]))
        for _ in range(n_box):
            x, y = int(rng.integers(0, size // 2)), int(rng.integers(0, size // 2))
            w, h = int(rng.integers(8, size // 2)), int(rng.integers(8, size // 2))
            labels.append([pid, float(x), float(y), float(w), float(h), 1])
            classes.append([pid, "Lung Opacity"])
        if n_box == 0:
            labels.append([pid, "", "", "", "", 0])
            classes.append([pid, CLASSES[i % 2]])
        view, sex, age = str(rng.choice(["PA", "AP"])), str(rng.choice(["M", "F"])), \
            int(rng.integers(1, 92))
        headers.append(["CHEST", "WSD", f"{pid}.dcm", 1.0, "CR", age, pid, None, sex,
                        0.168, 1.0, 1.0, view])
        patient = 1000 + i // 2  # NIH patients with two images each
        maps.append({"img_id": f"{patient:08d}_{i % 2:03d}.png", "subset_img_id": pid,
                     "subset_group": "train", "subset_init_label": "", "orig_labels": []})
        if images and image_format != "dcm":
            img = synthetic_cxr(size, size, rng=rng, bits=8)
            cv2.imwrite(str(image_dir / f"{pid}.{image_format}"), img)
        elif images:
            write_dicom(image_dir / f"{pid}.dcm", synthetic_cxr(size, size, rng=rng, bits=8),
                        jpeg=True, PatientID=pid, PatientName=pid, PatientSex=sex,
                        PatientAge=str(age), ViewPosition=view, BodyPartExamined="CHEST",
                        SeriesDescription=f"view: {view}", ConversionType="WSD",
                        PixelSpacing=[0.168, 0.168])
    write_csv(root / "stage_2_train_labels.csv", ["patientId", "x", "y", "width", "height",
                                              "Target"], labels)
    write_csv(root / "stage_2_detailed_class_info.csv", ["patientId", "class"], classes)
    pd.DataFrame(headers, columns=HEADER_COLUMNS).to_csv(
        root / "kaggle_stage_2_train_images_dicom_headers.csv.gz", index=True)
    if mapping:
        (root / "pneumonia-challenge-dataset-mappings_2018.json").write_text(json.dumps(maps))
    return image_dir


@register_fake("rsna_pneumonia")
def make(root: Path) -> dict:
    """Contract-suite maker: 8 images with DICOMs, all side files."""
    return {"base_image_dir": write_rsna(root)}
