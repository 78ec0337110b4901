"""An RSNA 2023 Abdominal Trauma replica in the real on-disk format (the Kaggle release).

Layout (``<root>`` is ``base_image_dir``)::

    <root>/train.csv                 patient_id, the 14 one-hot label columns, any_injury
    <root>/train_series_meta.csv     patient_id,series_id,aortic_hu,incomplete_organ
    <root>/image_level_labels.csv    patient_id,series_id,instance_number,injury_name
    <root>/train_images/<patient_id>/<series_id>/<instance_number>.dcm
    <root>/segmentations/<series_id>.nii

Quirks reproduced: numeric ids; a patient with two series (two phases); files named by their
instance number, one series stored in descending z; one series stored as 12 signed bits of 16
(``PixelRepresentation`` 1, high bits 0, intercept 0); image-level labels only on the slices
of injured patients' series; segmentations in another axis order than the DICOM (RAS x, y, z).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.rsna_abdominal_trauma import (COLUMNS, IMAGE_LABEL_COLUMNS, IMAGE_LABEL_FILE,
                                              IMAGES, SEGMENTATIONS, SERIES_COLUMNS,
                                              SERIES_FILE)
from .rsna_cspine import write_label_map, write_numbered_series
from .tables import write_csv
from .volumes import AXIAL, synthetic_ct

#: patient -> its injuries as one-hot columns set to 1 (the others' healthy column is 1)
PATIENTS = {"10004": ("extravasation_injury", "liver_low", "spleen_high"),
            "10005": (),
            "10007": ("bowel_injury", "kidney_high")}
#: series: (patient, series_id, aortic_hu, incomplete_organ, descending, 12-bit signed,
#: image-level labels (instance_number, injury_name))
SERIES = (("10004", "21057", 146.0, 0, False, False,
           ((2, "Active_Extravasation"), (3, "Active_Extravasation"))),
          ("10004", "51033", 454.0, 1, True, False, ()),
          ("10005", "18667", 187.0, 0, False, True, ()),
          ("10007", "31111", 220.0, 0, True, False, ((5, "Bowel"),)))


def one_hot(injuries) -> list[int]:
    """``train.csv``'s label cells of a patient with ``injuries``."""
    cells = {c: int(c in injuries) for c in COLUMNS[1:]}
    for organ in ("bowel", "extravasation"):
        cells[f"{organ}_healthy"] = 1 - cells[f"{organ}_injury"]
    for organ in ("kidney", "liver", "spleen"):
        cells[f"{organ}_healthy"] = 1 - cells[f"{organ}_low"] - cells[f"{organ}_high"]
    cells["any_injury"] = int(bool(injuries))
    return list(cells.values())


def organ_labels(shape) -> np.ndarray:
    """A label map on a ``(D, H, W)`` grid: liver (1) on the patient's right (low W), spleen
    (2) on the left, in the lower half."""
    d, h, w = shape
    out = np.zeros(shape, np.uint8)
    out[: d // 2 + 1, 2:h // 2, 1:w // 3] = 1
    out[: d // 2, 2:h // 2, 2 * w // 3:w - 1] = 2
    return out


def write_rsna_abdominal_trauma(root: str | Path, *, series=SERIES, patients=PATIENTS,
                                seed: int = 0, shape=(6, 16, 18), segmented=None,
                                bad_label: bool = False, orientation=AXIAL) -> Path:
    """Write an RSNA abdominal trauma replica under ``root`` and return it: the ``patients``
    and their ``series``; those whose index is in ``segmented`` (default: all) have a
    segmentation (:func:`organ_labels`). ``bad_label``: a last image-level label on instance
    99 (no such file) of the first series. ``orientation``: every series'
    ``ImageOrientationPatient`` (``(1, 0, 0, 0, -1, 0)``: the slice normal toward the feet)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i, (patient, sid, hu, incomplete, descending, signed12, listed) in enumerate(series):
        folder = root / IMAGES / patient / sid
        write_numbered_series(folder, synthetic_ct(shape, rng=rng), descending=descending,
                              signed12=signed12, z0=-300.0 - 10 * i, seed=seed + i,
                              orientation=orientation,
                              series_uid=f"1.2.826.0.1.3680043.8.498.{patient}.{sid}")
        rows.append([patient, sid, hu, incomplete])
        labels += [[patient, sid, n, name] for n, name in listed]
        if segmented is None or i in segmented:
            write_label_map(root / SEGMENTATIONS / f"{sid}.nii", folder, organ_labels(shape))
    if bad_label:
        labels.append([series[0][0], series[0][1], 99, "Active_Extravasation"])
    write_csv(root / "train.csv", COLUMNS, [[p, *one_hot(i)] for p, i in patients.items()],
              newline="\n")
    write_csv(root / SERIES_FILE, SERIES_COLUMNS, rows, newline="\n")
    write_csv(root / IMAGE_LABEL_FILE, IMAGE_LABEL_COLUMNS, labels, newline="\n")
    return root


@register_fake("rsna_abdominal_trauma")
def make(root: Path) -> dict:
    """Contract-suite maker: three patients, four series (all segmented)."""
    return {"base_image_dir": write_rsna_abdominal_trauma(root)}
