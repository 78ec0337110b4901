"""An NIH ChestX-ray14 replica (and Google's expert labels) in the real on-disk format.

Layout, as the twelve ``images_NNN.tar.gz`` archives and the tables ship::

    <root>/images/<8-digit patient>_<3-digit follow-up>.png   (8-bit; one RGBA, as a few are)
    <root>/Data_Entry_2017_v2020.csv
    <root>/BBox_List_2017.csv
    <root>/train_val_list.txt, <root>/test_list.txt
    <root>/google2019_nih-chest-xray-labels.csv                (CRLF line endings)

Quirks reproduced: the header's ``OriginalImage[Width,Height]`` and
``OriginalImagePixelSpacing[x,y]`` (two names over four fields); ``Patient ID`` without the
file name's zero padding; ``Follow-up #`` disagreeing with the file suffix on some rows; the box
file's ``Bbox [x,y,w,h],,,`` header (9 fields) over 6-field rows, ``Infiltrate`` spelling and an
image with two boxes; ``Patient Sex`` instead of ``Patient Gender`` on request.
"""

from __future__ import annotations

import csv
from pathlib import Path

import cv2
import numpy as np

from . import register_fake
from .images import synthetic_cxr, write_png

HEADER = ("Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,{sex},View Position,"
          "OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y]")
BOX_HEADER = "Image Index,Finding Label,Bbox [x,y,w,h],,,"
GOOGLE_EXTRA = "Fracture,Pneumothorax,Airspace opacity,Nodule or mass,Set Id"
FINDINGS = ("Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule",
            "Pneumonia", "Pneumothorax", "Consolidation", "Edema", "Emphysema", "Fibrosis",
            "Pleural_Thickening", "Hernia")
BOX_FINDINGS = ("Atelectasis", "Cardiomegaly", "Effusion", "Infiltrate", "Mass", "Nodule",
                "Pneumonia", "Pneumothorax")


def entry_row(name: str, labels: str = "No Finding", *, follow_up: int | None = None,
              age: int = 45, sex: str = "M", view: str = "PA",
              size: tuple[int, int] = (2500, 2048), spacing: float = 0.168) -> list:
    """One ``Data_Entry_2017_v2020.csv`` row (``follow_up`` defaults to the file suffix)."""
    pid, fu = name[:-4].split("_")
    return [name, labels, int(fu) if follow_up is None else follow_up, int(pid), age, sex, view,
            size[0], size[1], spacing, spacing]


def write_entries(path: str | Path, rows, *, sex_column: str = "Patient Gender",
                  extra_header: str = "", newline: str = "\n") -> Path:
    """Write entry rows under the real header (``extra_header`` adds Google's columns)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = HEADER.format(sex=sex_column) + ("," + extra_header if extra_header else "")
    with open(path, "w", newline="") as fh:
        fh.write(header + newline)
        w = csv.writer(fh, lineterminator=newline)
        w.writerows(rows)
    return path


def write_boxes(path: str | Path, boxes) -> Path:
    """Write ``(name, label, x, y, w, h)`` rows under the 9-field header."""
    path = Path(path)
    with open(path, "w", newline="") as fh:
        fh.write(BOX_HEADER + "\n")
        csv.writer(fh, lineterminator="\n").writerows(boxes)
    return path


def write_nih(root: str | Path, *, n_patients: int = 6, seed: int = 0, images: bool = True,
              size: int = 256, sex_column: str = "Patient Gender", layout: str = "images"
              ) -> Path:
    """Write an NIH ChestX-ray14 replica under ``root`` and return its image root.

    ``size``: the PNGs' side (the real ones are 1024; box pixels stay in 1024 units).
    ``layout``: ``"images"`` (every PNG in ``root/images``, returned) or ``"kaggle"`` (the
    Kaggle mirror's ``root/images_001/images/`` ... nesting, three PNGs a folder; ``root``
    returned).
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows, names = [], []
    for p in range(1, n_patients + 1):
        sex, age = ("M", "F")[p % 2], int(rng.integers(18, 90))
        for fu in range(int(rng.integers(1, 4))):
            name = f"{p:08d}_{fu:03d}.png"
            k = int(rng.integers(0, 3))
            labels = "|".join(sorted(rng.choice(FINDINGS, k, replace=False))) or "No Finding"
            listed = fu + 1 if (p + fu) % 4 == 0 else fu  # Follow-up # disagrees with the name
            rows.append(entry_row(name, labels, follow_up=listed, age=age + fu, sex=sex,
                                  view=("PA", "AP")[(p + fu) % 2]))
            names.append(name)
    write_entries(root / "Data_Entry_2017_v2020.csv", rows, sex_column=sex_column)
    boxes = [(n, BOX_FINDINGS[i % len(BOX_FINDINGS)], *np.round(rng.uniform(50, 400, 4), 6))
             for i, n in enumerate(names[::3])]
    boxes.append((names[0], "Infiltrate", 500.5, 600.25, 200.0, 150.75))  # two boxes on one
    write_boxes(root / "BBox_List_2017.csv", boxes)
    test = {n for n in names if int(n[:8]) % 3 == 0}
    (root / "train_val_list.txt").write_text("".join(f"{n}\n" for n in names if n not in test))
    (root / "test_list.txt").write_text("".join(f"{n}\n" for n in sorted(test)))
    google = [r + [*(("YES", "NO")[int(v)] for v in rng.integers(0, 2, 4)),
                   ("val", "test")[i % 2]] for i, r in enumerate(rows[::2])]
    write_entries(root / "google2019_nih-chest-xray-labels.csv", google,
                  sex_column=sex_column, extra_header=GOOGLE_EXTRA, newline="\r\n")
    if images:
        for i, n in enumerate(names):
            img = synthetic_cxr(size, size, rng=rng, bits=8)
            if i == 1:  # a few released PNGs are RGBA
                img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGRA)
            folder = root / "images" if layout == "images" else \
                root / f"images_{i // 3 + 1:03d}" / "images"
            write_png(folder / n, img)
    (root / "images").mkdir(parents=True, exist_ok=True)
    return root / "images" if layout == "images" else root


@register_fake("nih_cxr14", "nih_cxr14_google")
def make(root: Path) -> dict:
    """Contract-suite maker: a small replica with images; kwargs for either key."""
    return {"base_image_dir": write_nih(root)}
