"""An RSNA 2022 Cervical Spine Fracture replica in the real on-disk format (the Kaggle release).

Layout (``<root>`` is ``base_image_dir``)::

    <root>/train.csv                    StudyInstanceUID,patient_overall,C1,...,C7
    <root>/train_bounding_boxes.csv     StudyInstanceUID,x,y,width,height,slice_number
    <root>/train_images/<StudyInstanceUID>/<n>.dcm
    <root>/segmentations/<StudyInstanceUID>.nii

Quirks reproduced: files named by their instance number ``n`` (1 ..); the second study stored
in descending z (``1.dcm`` the highest slice); box rows one per slice, ``slice_number`` the
file's number; the segmentation an uncompressed uint8 NIfTI in another axis order than the
DICOM series (x, y, z of the world, RAS header), its labels 1-7 the cervical vertebrae.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.rsna_cspine import (BOX_COLUMNS, BOX_FILE, COLUMNS, IMAGES, SEGMENTATIONS,
                                    VERTEBRAE, series_geometry)
from .rsna_pe import uid
from .tables import write_csv
from .volumes import AXIAL, slice_positions, synthetic_ct, write_dicom_series, write_nifti

#: per study: (fractured vertebrae, stored in descending z, box rows (x, y, w, h, slice_number))
STUDIES = ({"fractured": ("C2",), "descending": False,
            "boxes": ((4.0, 5.0, 6.0, 3.0, 3), (4.0, 5.0, 6.0, 3.0, 4))},
           {"fractured": ("C5", "C6"), "descending": True, "boxes": ((2.0, 3.0, 5.0, 4.0, 2),)},
           {"fractured": (), "descending": False, "boxes": ()},
           {"fractured": (), "descending": True, "boxes": ()})
#: ascending RAS <- LPS
_LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


def write_numbered_series(folder: Path, hu: np.ndarray, *, descending: bool = False,
                          orientation=AXIAL, step: float = 1.0, z0: float = -40.0,
                          signed12: bool = False, seed: int = 0, **tags) -> Path:
    """One series under ``folder``: ``hu`` (slices ascending along the normal of
    ``orientation``, rows, columns) in files ``1.dcm`` .. ``n.dcm``, instance numbers the file
    numbers; ``descending``: ``1.dcm`` is the last slice along the normal. Stored with
    intercept -1024, or (``signed12``) as Hounsfield units in 12 signed bits of 16
    (``PixelRepresentation`` 1, ``BitsStored`` 12, the high four bits left 0: the reader must
    sign-extend). Returns the folder."""
    positions = slice_positions(len(hu), orientation, origin=(-12.0, -10.0, z0), step=step)
    if signed12:
        stored, intercept = (hu.astype(np.int16) & 0x0FFF).astype(np.int16), 0.0
    else:
        stored, intercept = (hu.astype(np.int32) + 1024).astype(np.int16), -1024.0
    if descending:
        stored, positions = stored[::-1], positions[::-1]
    write_dicom_series(folder, stored, spacing=(0.8, 0.8), orientation=orientation,
                       positions=positions, intercept=intercept,
                       bits_stored=12 if signed12 else None, signed=True if signed12 else None,
                       shuffle=False, reverse_instances=False, names="{}.dcm", seed=seed,
                       **tags)
    return folder


def write_study(root: Path, study: str, hu: np.ndarray, **options) -> Path:
    """One study's series under ``root/train_images/<study>``
    (:func:`write_numbered_series`)."""
    return write_numbered_series(root / IMAGES / study, hu, series_uid=f"{study}.1",
                                 StudyInstanceUID=study, **options)


def write_label_map(path: Path, series: Path, labels: np.ndarray, *,
                    offset=(0.0, 0.0, 0.0)) -> Path:
    """``labels`` (the canonical ``(D, H, W)`` grid of the DICOM series in the folder
    ``series``) as an uncompressed uint8 NIfTI at ``path``, in the world's (x, y, z) axis
    order with a RAS header; ``offset`` (mm) moves the header off the series' grid."""
    _, _, canonical, _ = series_geometry(series)
    affine = _LPS_TO_RAS @ canonical[:, [2, 1, 0, 3]]
    affine[:3, 3] += np.asarray(offset, np.float64) * [-1, -1, 1]
    return write_nifti(path, np.ascontiguousarray(labels.transpose(2, 1, 0)), affine,
                       dtype=np.uint8)


def write_segmentation(root: Path, study: str, labels: np.ndarray, *, offset=(0.0, 0.0, 0.0),
                       ) -> Path:
    """``labels`` as ``segmentations/<study>.nii`` (:func:`write_label_map`)."""
    return write_label_map(root / SEGMENTATIONS / f"{study}.nii", root / IMAGES / study,
                           labels, offset=offset)


def vertebra_labels(shape) -> np.ndarray:
    """A label map on a ``(D, H, W)`` grid: C3 (label 3) in the lower half, C2 (2) above,
    around the spine's centre."""
    d, h, w = shape
    out = np.zeros(shape, np.uint8)
    out[: d // 2, h // 2:h - 2, w // 3:2 * w // 3] = 3
    out[d // 2:, h // 2:h - 2, w // 3:2 * w // 3] = 2
    return out


def write_rsna_cspine(root: str | Path, *, studies=STUDIES, seed: int = 0, shape=(6, 16, 18),
                      segmented=None, bad_box: bool = False) -> Path:
    """Write an RSNA cervical spine replica under ``root`` and return it: one study per entry
    of ``studies``; those whose index is in ``segmented`` (default: all) have a segmentation
    (:func:`vertebra_labels`). ``bad_box``: a last box row on slice number 99 (no such file)
    of the second study."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows, boxes = [], []
    for i, info in enumerate(studies):
        study = uid(seed, 100 + i)
        write_study(root, study, synthetic_ct(shape, rng=rng), descending=info["descending"],
                    z0=-40.0 - 10 * i, seed=seed + i)
        rows.append([study, int(bool(info["fractured"])),
                     *(int(v in info["fractured"]) for v in VERTEBRAE)])
        boxes += [[study, *box[:4], box[4]] for box in info["boxes"]]
        if segmented is None or i in segmented:
            write_segmentation(root, study, vertebra_labels(shape))
    if bad_box and len(studies) > 1:
        boxes.append([rows[1][0], 1.0, 1.0, 2.0, 2.0, 99])
    write_csv(root / "train.csv", COLUMNS, rows, newline="\n")
    write_csv(root / BOX_FILE, BOX_COLUMNS, boxes, newline="\n")
    return root


@register_fake("rsna_cspine")
def make(root: Path) -> dict:
    """Contract-suite maker: four studies (two with fractures and boxes, one in descending z;
    all segmented)."""
    return {"base_image_dir": write_rsna_cspine(root)}
