"""CheXmask replicas in the real on-disk format, one per covered base dataset.

Layout (``Annotations/OriginalResolution/`` of the PhysioNet release)::

    <root>/<source>.csv.gz      <id column>,Dice RCA (Mean),Dice RCA (Max),Landmarks,
                                Left Lung,Right Lung,Heart,Height,Width

plus the base dataset's images (NIH ``images/<name>.png``, CheXpert
``CheXpert-v1.0-small/train/...jpg``, VinDr ``train/<id>.dicom``; MIMIC-CXR-JPG and PadChest:
their whole replica, metadata table included, which the join needs).

Quirks reproduced: the source-specific id column; absolute, 1-indexed, row-major run-length
codes (non-square images catch transposes); landmarks numpy-printed and comma-separated; the
two Dice columns swapped (as in the Padchest file; written here for the NIH replica); a row
with empty Height/Width (a 1024 x 1024 image).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..datasets.chexmask import SOURCES
from . import register_fake
from .dicom import write_dicom
from .images import synthetic_cxr, write_png
from .tables import write_csv


def encode_chexmask(mask: np.ndarray) -> str:
    """CheXmask's code of a 0/1 mask: ``start length`` pairs, 1-indexed, row-major."""
    flat = np.concatenate(([0], (np.asarray(mask).ravel() > 0).astype(np.int8), [0]))
    change = np.flatnonzero(np.diff(flat))
    starts, ends = change[0::2], change[1::2]
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends))


def organ_masks(h: int, w: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Right lung (image left), left lung, heart ellipses and 120 landmarks on their outlines."""
    out, points = {}, []
    specs = {"Right Lung": ((int(w * .3), int(h * .45)), (int(w * .15), int(h * .3)), 44),
             "Left Lung": ((int(w * .7), int(h * .45)), (int(w * .15), int(h * .3)), 50),
             "Heart": ((int(w * .55), int(h * .62)), (int(w * .12), int(h * .1)), 26)}
    for name, (center, axes, n) in specs.items():
        m = np.zeros((h, w), np.uint8)
        cv2.ellipse(m, center, axes, 0, 0, 360, 1, -1)
        out[name] = m
        t = np.linspace(0, 2 * np.pi, n, endpoint=False)
        points.append(np.stack([center[0] + axes[0] * np.cos(t),
                                center[1] + axes[1] * np.sin(t)], 1).round())
    return out, np.concatenate(points)


def write_chexmask_table(path: str | Path, id_col: str, images: dict[str, tuple[int, int]], *,
                         dice_swapped: bool = False) -> Path:
    """Write a CheXmask table for ``{id: (height, width)}``; the last row has no size."""
    rows = []
    for k, (image_id, (h, w)) in enumerate(images.items()):
        masks, marks = organ_masks(h, w)
        text = str(marks.astype(int)) if k % 2 else ",".join(map(str, marks.astype(int).ravel()))
        size = ["", ""] if k == len(images) - 1 and k else [h, w]
        dice = [0.81, 0.9] if not dice_swapped else [0.9, 0.81]
        rows.append([image_id, *dice, text, encode_chexmask(masks["Left Lung"]),
                     encode_chexmask(masks["Right Lung"]), encode_chexmask(masks["Heart"]),
                     *size])
    dice_cols = ["Dice RCA (Max)", "Dice RCA (Mean)"] if dice_swapped else \
        ["Dice RCA (Mean)", "Dice RCA (Max)"]
    return write_csv(path, [id_col, *dice_cols, "Landmarks", "Left Lung", "Right Lung",
                            "Heart", "Height", "Width"], rows)


def write_chexmask(root: str | Path, base: str, *, n_images: int = 4, seed: int = 0) -> Path:
    """Write the base images and the CheXmask table of ``base``; returns ``base_image_dir``.

    The last image is 1024 x 1024 (its row has empty Height/Width, decoded at 1024)."""
    root = Path(root)
    if base in ("mimic", "padchest"):
        return _write_joined(root, base, seed=seed)
    rng = np.random.default_rng(seed)
    sizes = [(72, 56), (64, 80), (60, 60)]
    images, image_dir = {}, {"nih": root / "images", "chexpert": root / "CheXpert-v1.0-small",
                             "vindr": root / "train"}[base]
    for i in range(n_images):
        h, w = (1024, 1024) if i == n_images - 1 else sizes[i % 3]
        img = synthetic_cxr(h, w, rng=rng, bits=8)
        if base == "nih":
            name = f"{i + 1:08d}_{i % 2:03d}.png"
            write_png(image_dir / name, img)
        elif base == "chexpert":
            rel = f"train/patient{i // 2 + 1:05d}/study{i % 2 + 1}/view1_frontal.jpg"
            name = rel  # CheXmask drops the release folder
            (image_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(image_dir / rel), img)
        else:
            name = "".join(rng.choice(list("0123456789abcdef"), 32))
            write_dicom(image_dir / f"{name}.dicom", img)
        images[name] = (h, w)
    write_chexmask_table(root / SOURCES[base][0], SOURCES[base][1], images,
                         dice_swapped=base == "nih")
    return image_dir


def _write_joined(root: Path, base: str, *, seed: int) -> Path:
    """The base replica (its images and metadata table) and a CheXmask table of its ids (the
    MIMIC dicom id or PadChest's ImageID, with no folder): the join needs the base table."""
    import pandas as pd

    if base == "mimic":
        from .mimic import write_mimic

        write_mimic(root, n_subjects=3, seed=seed, image_size=(72, 56))
        meta = pd.read_csv(root / "mimic-cxr-2.0.0-metadata.csv.gz", dtype=str)
        images = {d: (int(h), int(w)) for d, h, w in zip(meta["dicom_id"], meta["Rows"],
                                                         meta["Columns"])}
    else:
        from .padchest import FILE, write_padchest

        write_padchest(root, n_patients=3, seed=seed, image_size=(72, 64))
        meta = pd.read_csv(root / FILE, dtype=str)
        images = {i: cv2.imread(str(root / d / i), cv2.IMREAD_UNCHANGED).shape[:2]
                  for i, d in zip(meta["ImageID"], meta["ImageDir"])}
    write_chexmask_table(root / SOURCES[base][0], SOURCES[base][1], images,
                         dice_swapped=base == "padchest")
    return root


@register_fake("chexmask_nih")
def make_nih(root: Path) -> dict:
    return {"base_image_dir": write_chexmask(root, "nih")}


@register_fake("chexmask_chexpert")
def make_chexpert(root: Path) -> dict:
    return {"base_image_dir": write_chexmask(root, "chexpert")}


@register_fake("chexmask_vindr")
def make_vindr(root: Path) -> dict:
    return {"base_image_dir": write_chexmask(root, "vindr")}


@register_fake("chexmask_mimic")
def make_mimic(root: Path) -> dict:
    return {"base_image_dir": write_chexmask(root, "mimic")}


@register_fake("chexmask_padchest")
def make_padchest(root: Path) -> dict:
    return {"base_image_dir": write_chexmask(root, "padchest")}
