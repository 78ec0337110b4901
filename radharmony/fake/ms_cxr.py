"""MS-CXR and MS-CXR-T replicas in their real on-disk format, over a MIMIC-CXR-JPG image tree.

Layout::

    <root>/MS_CXR_Local_Alignment_v1.1.0.csv                  dicom_id,category_name,label_text,
                                                              path,x,y,w,h,image_width,image_height,split
    <root>/MS_CXR_T_temporal_image_classification_v1.0.0.csv  subject_id,study_id,dicom_id,
                                                              previous_study_id,previous_dicom_id,
                                                              <f>_progression, <f>_label_quality
    <root>/files/p10/p<subject>/s<study>/<dicom_id>.jpg       8-bit grayscale JPEG

Quirks reproduced: two phrases (two rows) for one image, one phrase with two boxes; boxes
``x,y,w,h`` in pixels of the JPEG with its size in the row; the authors' ``split``; empty
progression cells for unlabelled findings; a patient with three studies giving two pairs.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..datasets.ms_cxr import CATEGORIES, COLUMNS, FINDINGS, PAIR_COLUMNS, mimic_path
from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv


def _dicom_id(rng) -> str:
    return "-".join("".join(rng.choice(list("0123456789abcdef"), 8)) for _ in range(5))


def write_ms_cxr(root: str | Path, *, n_patients: int = 4, seed: int = 0, images: bool = True,
                 subjects: list[str] | None = None) -> Path:
    """Write both tables and their images under ``root``; returns ``root`` (the MIMIC root).
    ``subjects``: MIMIC subject ids to write (e.g. those of a MIMIC-CXR-JPG replica)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    grounding, pairs = [], []
    n_patients = n_patients if subjects is None else len(subjects)
    for p in range(n_patients):
        subject = f"1{p}{int(rng.integers(100000, 999999))}"
        subject = subject if subjects is None else str(subjects[p])
        studies = [(str(int(rng.integers(50_000_000, 59_999_999))), _dicom_id(rng))
                   for _ in range(3 if p == 0 else 2)]
        for s, (study, dicom) in enumerate(studies):
            h, w = (int(rng.integers(300, 360)), int(rng.integers(260, 320)))
            if images:
                out = root / mimic_path(subject, study, dicom)
                out.parent.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(out), synthetic_cxr(h, w, rng=rng, bits=8))
            if s == len(studies) - 1:  # the latest study is grounded
                path = mimic_path(subject, study, dicom)
                cat = CATEGORIES[p % len(CATEGORIES)]
                phrases = [(cat, f"{cat.lower()} in the left lower lobe", 1 + (p == 0))]
                if p == 0:
                    phrases.append(("Pleural Effusion", "small right pleural effusion", 1))
                for category, text, n_box in phrases:
                    for _ in range(n_box):
                        x, y = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
                        grounding.append([dicom, category, text, path, x, y,
                                          int(rng.integers(10, w // 2)),
                                          int(rng.integers(10, h // 2)), w, h,
                                          ("train", "val", "test")[p % 3]])
            if s:
                prev_study, prev_dicom = studies[s - 1]
                prog = [("improving", "stable", "worsening", "")[int(rng.integers(4))]
                        for _ in FINDINGS]
                quality = ["one_expert" if v else "" for v in prog]
                pairs.append([subject, study, dicom, prev_study, prev_dicom, *prog, *quality])
    write_csv(root / "MS_CXR_Local_Alignment_v1.1.0.csv", list(COLUMNS), grounding)
    write_csv(root / "MS_CXR_T_temporal_image_classification_v1.0.0.csv",
              [*PAIR_COLUMNS, *(f"{f}_progression" for f in FINDINGS),
               *(f"{f}_label_quality" for f in FINDINGS)], pairs)
    return root


@register_fake("ms_cxr", "ms_cxr_t")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 patients, 9 images, 5 grounded boxes, 5 pairs."""
    return {"base_image_dir": write_ms_cxr(root)}
