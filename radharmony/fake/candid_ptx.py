"""A CANDID-PTX replica in the release's format (as far as it is known: see the dataset page).

Layout::

    <root>/Pneumothorax_reports.csv   SOPInstanceUID,StudyInstanceUID,filename,Report,EncodedPixels
    <root>/acute_rib_fracture.csv     anon_SOPUID,annotation_ref,mask_rle
    <root>/chest_tube.csv             anon_SOPUID,annotation_ref,mask_rle
    <root>/chest_radiographs/<SOPInstanceUID>.jpg     8-bit JPEGs, sizes vary

Quirks reproduced: one reports row per pneumothorax region (an image with two regions has two
rows, the second further down), ``-1`` for an image without one, one empty code (not read);
the fracture and tube tables list only positive images; codes over the column-major pixels of
the JPEG's own (non-square) size, relative (SIIM-ACR's) or absolute as ``relative=`` says;
anonymised UIDs starting ``4.1.46.958385``; two images of one patient (``filename`` index).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..annotations.masks import rle_encode
from ..datasets.candid_ptx import REPORTS, SIDE_FILES
from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv

UID_ROOT = "4.1.46.958385"
SIDE_HEADER = ["anon_SOPUID", "annotation_ref", "mask_rle"]


def region(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """One region: a filled ellipse of several columns and rows."""
    mask = np.zeros(shape, np.uint8)
    h, w = shape
    center = (int(rng.integers(w // 5, 4 * w // 5)), int(rng.integers(h // 5, 4 * h // 5)))
    axes = (int(rng.integers(10, w // 6)), int(rng.integers(10, h // 6)))
    cv2.ellipse(mask, center, axes, float(rng.uniform(0, 180)), 0, 360, 1, -1)
    return mask


def write_candid_ptx(root: str | Path, *, n_images: int = 6, seed: int = 0,
                     relative: bool = True, images: bool = True) -> Path:
    """Write the replica under ``root`` and return ``root``. Image 1 has two pneumothorax regions
    and a chest tube, image 2 a rib fracture, image 4 an empty code; images 0 and 1 share a
    patient; every third image has no pneumothorax."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows, later, fracture, tube = [], [], [], []
    for i in range(n_images):
        sop = f"{UID_ROOT}.{int(rng.integers(10**5, 10**6))}.{i + 1}"
        shape = (int(rng.integers(300, 360)), int(rng.integers(260, 320)))
        n_ptx = 0 if i % 3 == 0 else (2 if i == 1 else 1)
        codes = [rle_encode(region(shape, rng), relative=relative, order="F")
                 for _ in range(n_ptx)] or (["" if i == 4 else "-1"])
        patient = 7 if i < 2 else 10 + i
        report = f"CHEST PA\nFindings: {'Pneumothorax.' if n_ptx else 'No pneumothorax.'}\n"
        first = [sop, f"{UID_ROOT}.2.{i}", f"{patient}_{i}.dcm", report]
        rows.append(first + [codes[0]])
        later += [first + [c] for c in codes[1:]]
        if i == 1:
            tube.append([sop, f"ref{i}", rle_encode(region(shape, rng), relative=relative,
                                                    order="F")])
        if i == 2:
            fracture.append([sop, f"ref{i}", rle_encode(region(shape, rng), relative=relative,
                                                        order="F")])
        if images:
            (root / "chest_radiographs").mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / "chest_radiographs" / f"{sop}.jpg"),
                        synthetic_cxr(*shape, rng=rng, bits=8), [cv2.IMWRITE_JPEG_QUALITY, 95])
    write_csv(root / REPORTS, ["SOPInstanceUID", "StudyInstanceUID", "filename", "Report",
                               "EncodedPixels"], rows + later)
    write_csv(root / SIDE_FILES["rib_fracture"][0], SIDE_HEADER, fracture)
    write_csv(root / SIDE_FILES["chest_tube"][0], SIDE_HEADER, tube)
    return root


@register_fake("candid_ptx")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 JPEGs with relative (SIIM-ACR) codes."""
    return {"base_image_dir": write_candid_ptx(root)}
