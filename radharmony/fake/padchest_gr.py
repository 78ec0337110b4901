"""A PadChest-GR replica in the layout of the BIMCV download.

Layout::

    <root>/BIMCV-Padchest-GR/grounded_reports_20240819.json
    <root>/BIMCV-Padchest-GR/master_table.csv     StudyID,ImageID,PatientID,PatientAge,
                                                  PatientSex_DICOM,StudyDate_DICOM,split,
                                                  study_is_benchmark,study_is_validation
    <root>/BIMCV-Padchest-GR/Padchest_GR_files/<ImageID>.png   (16-bit grayscale)

Quirks reproduced: normalised ``[x1, y1, x2, y2]`` boxes; a sentence boxed by both readers
(``boxes`` two, ``extra_boxes`` one), one by reader 1 only; a negative sentence without boxes;
a normal study (no abnormal sentence); PadChest-style ``ImageID`` names; ``split``
``validation``; a term outside the harmonized labels (``COPD signs``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr, write_png
from .tables import write_csv

MASTER = ["StudyID", "ImageID", "PatientID", "PatientAge", "PatientSex_DICOM", "StudyDate_DICOM",
          "split", "study_is_benchmark", "study_is_validation"]
FINDINGS = [
    ({"sentence_en": "Right pleural effusion.", "sentence_es": "Derrame pleural derecho.",
      "abnormal": True, "labels": ["pleural effusion"], "locations": ["right"],
      "progression": None},
     [[0.1, 0.5, 0.4, 0.9], [0.12, 0.55, 0.38, 0.85]], [[0.11, 0.52, 0.41, 0.88]]),
    ({"sentence_en": "Cardiomegaly.", "sentence_es": "Cardiomegalia.", "abnormal": True,
      "labels": ["cardiomegaly"], "locations": [], "progression": "stable"},
     [[0.35, 0.45, 0.75, 0.8]], []),
    ({"sentence_en": "Signs of COPD.", "sentence_es": "Signos de EPOC.", "abnormal": True,
      "labels": ["COPD signs"], "locations": [], "progression": None},
     [[0.05, 0.1, 0.95, 0.9]], [[0.06, 0.1, 0.94, 0.92]]),
    ({"sentence_en": "No pneumothorax.", "sentence_es": "No se observa neumotórax.",
      "abnormal": False, "labels": [], "locations": [], "progression": None}, [], []),
]


def write_padchest_gr(root: str | Path, *, n_studies: int = 5, seed: int = 0,
                      images: bool = True, folder: str = "BIMCV-Padchest-GR") -> Path:
    """Write the replica under ``root``; returns the PadChest-GR folder (``base_image_dir``)."""
    base = Path(root) / folder
    rng = np.random.default_rng(seed)
    studies, master = [], []
    for s in range(n_studies):
        patient = str(int(rng.integers(10**17, 10**18)))
        study = "".join(str(int(v)) for v in rng.integers(10**8, 10**9, 4)) + str(s)
        image = f"{study}_{''.join(rng.choice(list('abcdefghijk0123456789'), 6))}.png"
        chosen = [] if s == n_studies - 1 else \
            [FINDINGS[s % 3], FINDINGS[(s + 1) % 3], FINDINGS[3]]
        findings = [{**f, "boxes": b1, "extra_boxes": b2} for f, b1, b2 in chosen]
        if not chosen:  # a normal study
            findings = [{**FINDINGS[3][0], "boxes": [], "extra_boxes": []}]
        studies.append({"StudyID": study, "ImageID": image, "findings": findings})
        master.append([study, image, patient, str(40 + s), ("M", "F")[s % 2], str(20150101 + s),
                       ("train", "validation", "test")[s % 3], str(s % 2 == 0),
                       str(s % 3 == 1)])
        if images:
            write_png(base / "Padchest_GR_files" / image,
                      synthetic_cxr(int(rng.integers(90, 120)), int(rng.integers(80, 110)),
                                    rng=rng))
    base.mkdir(parents=True, exist_ok=True)
    (base / "grounded_reports_20240819.json").write_text(json.dumps(studies, ensure_ascii=False))
    write_csv(base / "master_table.csv", MASTER, master)
    return base


@register_fake("padchest_gr")
def make(root: Path) -> dict:
    """Contract-suite maker: 5 studies (4 abnormal, 1 normal)."""
    return {"base_image_dir": write_padchest_gr(root)}
