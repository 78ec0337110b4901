"""A CheXlocalize replica in the layout of the Stanford AIMI download.

Layout::

    <root>/CheXpert/val_labels.csv    CheXpert's valid.csv header; Path CheXpert-v1.0/valid/...
    <root>/CheXpert/test_labels.csv   Path + the 14 labels (no Sex/Age/view columns); Path test/...
    <root>/CheXpert/{val,test}/patient<N>/study<N>/view<K>_<frontal|lateral>.jpg
    <root>/CheXlocalize/gt_segmentations_{val,test}.json
        {cxr_id: {task: {"size": [h, w], "counts": <COCO compressed RLE>}}}

Quirks reproduced: the labels say ``valid/`` while the images sit in ``val/``; masks at twice the
JPEG's size (full resolution against a downsized JPEG, same aspect); every segmented CXR has all
10 tasks, all-zero where negative; a CXR with no positive finding (and a lateral view) has no
entry; one mask with two separate blobs (two contours); label cells ``1.0``/``0.0`` (val) and
``1``/``0`` (test).
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from ..annotations.coco import coco_rle_encode
from ..datasets.chexlocalize import TASK_LABELS, TASKS, cxr_id
from ..datasets.chexpert import COLUMNS, LABELS
from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv


def task_mask(task: str, h: int, w: int, *, blobs: int = 1) -> np.ndarray:
    """A filled ellipse (or ``blobs`` of them) in a task-specific place."""
    k = TASKS.index(task)
    m = np.zeros((h, w), np.uint8)
    for b in range(blobs):
        cx = int(w * (0.25 + 0.5 * b + 0.03 * k)) if blobs > 1 else int(w * (0.3 + 0.04 * k))
        cv2.ellipse(m, (cx, int(h * (0.35 + 0.03 * k))), (max(2, w // 10), max(2, h // 9)),
                    0, 0, 360, 1, -1)
    return m


def write_split(labels_csv: Path, seg_json: Path, image_root: Path | None, split: str,
                images: list[tuple[str, tuple[int, int], set[str]]], *, rng) -> None:
    """Write one split: ``images`` is ``[(rel path as the CSV says, (h, w), positive labels)]``;
    JPEGs go to ``image_root / rel`` (``valid/`` written as ``val/``) when given."""
    seg, rows = {}, []
    for k, (rel, (h, w), positive) in enumerate(images):
        cells = {c: ("1.0" if c in positive else "0.0") if split == "val" else
                 ("1" if c in positive else "0") for c in LABELS}
        if split == "val":
            lateral = rel.endswith("_lateral.jpg")
            rows.append([f"CheXpert-v1.0/{rel}", ("Female", "Male")[k % 2], str(40 + k),
                         "Lateral" if lateral else "Frontal", "" if lateral else ("AP", "PA")[k % 2],
                         *(cells[c] for c in LABELS)])
        else:
            rows.append([rel, *(cells[c] for c in LABELS)])
        if any(TASK_LABELS[t] in positive for t in TASKS):
            H, W = 2 * h, 2 * w  # full resolution against the downsized JPEG
            seg[cxr_id(rel)] = {t: coco_rle_encode(
                task_mask(t, H, W, blobs=2 if k == 0 and t == TASKS[0] else 1)
                if TASK_LABELS[t] in positive else np.zeros((H, W), np.uint8)) for t in TASKS}
        if image_root is not None:
            out = image_root / rel.replace("valid/", "val/", 1)
            out.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(out), synthetic_cxr(h, w, rng=rng, bits=8),
                        [cv2.IMWRITE_JPEG_QUALITY, 90])
    header = list(COLUMNS) if split == "val" else ["Path", *LABELS]
    write_csv(labels_csv, header, rows)
    seg_json.parent.mkdir(parents=True, exist_ok=True)
    seg_json.write_text(json.dumps(seg))


def sample_images(split: str, n_patients: int, *, rng) -> list:
    """``[(rel, (h, w), positives)]``: patients with one or two views; the last has none."""
    first = 64541 if split == "val" else 64741
    folder = "valid" if split == "val" else "test"
    out = []
    for p in range(n_patients):
        views = 2 if p == 1 else 1
        for v in range(1, views + 1):
            kind = "lateral" if v == 2 else "frontal"
            rel = f"{folder}/patient{first + p:05d}/study1/view{v}_{kind}.jpg"
            h, w = int(rng.integers(60, 90)), int(rng.integers(50, 80))
            pos = set() if p == n_patients - 1 or v == 2 else \
                {TASK_LABELS[TASKS[(p + j) % len(TASKS)]] for j in range(1 + p % 3)}
            pos |= {"Pneumonia"} if p == 2 else set()  # a positive label without a mask task
            out.append((rel, (h, w), pos or {"No Finding"}))
    return out


def write_chexlocalize(root: str | Path, *, n_patients: int = 5, seed: int = 0,
                       images: bool = True) -> Path:
    """Write both splits under ``root``; returns ``<root>/CheXpert`` (the image root)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    base = root / "CheXpert"
    for split in ("val", "test"):
        write_split(base / f"{split}_labels.csv",
                    root / "CheXlocalize" / f"gt_segmentations_{split}.json",
                    base if images else None, split, sample_images(split, n_patients, rng=rng),
                    rng=rng)
    return base


@register_fake("chexlocalize_val", "chexlocalize_test")
def make(root: Path) -> dict:
    """Contract-suite maker: 5 patients per split, 6 images each, 4 segmented."""
    return {"base_image_dir": write_chexlocalize(root)}
