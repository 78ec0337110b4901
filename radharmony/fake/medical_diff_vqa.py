"""A Medical-Diff-VQA replica in the real on-disk format, over a MIMIC-CXR-JPG replica.

Layout (PhysioNet ``medical-diff-vqa/1.0.0`` files beside MIMIC-CXR-JPG's root)::

    <root>/mimic_pair_questions.csv   study_id,subject_id,ref_id,question_type,question,answer,split
    <root>/mimic_all.csv              subject_id,study_id,<14 labels>,dicom_id,view,split,
                                      study_date,study_order
    <root>/files/...                  MIMIC-CXR-JPG (radharmony.fake.mimic)

Each patient with two studies gets a main (later) / reference (prior) pair and questions of
the seven types, ``difference`` among them; only the images of the paired studies
(``mimic_all.csv``'s one per study) are kept; answers are free text or yes/no; splits are
``train`` / ``val`` / ``test``; label cells are ``1.0`` / ``0.0`` / ``-1.0`` / empty.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from .mimic import LABELS, studies, write_mimic
from .tables import write_csv

QUESTIONS = [
    ("abnormality", "what abnormalities are seen in this image?", "pleural effusion, atelectasis"),
    ("location", "where is the pleural effusion located?", "left lower lung"),
    ("level", "what level is the pleural effusion?", "small"),
    ("view", "which view is this image taken?", "PA view"),
    ("type", "what type is the opacity?", "patchy"),
    ("presence", "is there evidence of pneumothorax in this image?", "no"),
    ("presence", "is there evidence of pleural effusion in this image?", "yes"),
    ("difference", "what has changed compared to the reference image?",
     "the main image has an additional finding of pleural effusion than the reference image."),
    ("difference", "what has changed in the left lung area?", "nothing has changed."),
]
SPLITS = {"train": "train", "validate": "val", "test": "test"}


def write_medical_diff_vqa(root: str | Path, *, n_subjects: int = 6, seed: int = 0,
                           images: bool = True) -> Path:
    """Write the replica under ``root`` (MIMIC-CXR-JPG's ``files/`` included) and return
    ``root``."""
    root = Path(write_mimic(root, n_subjects=n_subjects, seed=seed, images=images))
    rng = np.random.default_rng(seed + 31)
    by_subject: dict = {}
    rows = []
    for order, s in enumerate(studies(root)):
        by_subject.setdefault(s["subject"], []).append(s)
        k = next((i for i, v in enumerate(s["views"]) if v in ("PA", "AP")), 0)
        rows.append([s["subject"], s["study"],
                     *rng.choice(["1.0", "0.0", "-1.0", ""], len(LABELS)),
                     s["dicoms"][k], s["views"][k], SPLITS[s["split"]], s["date"],
                     len(by_subject[s["subject"]]) - 1])
    write_csv(root / "mimic_all.csv", ["subject_id", "study_id", *LABELS, "dicom_id", "view",
                                       "split", "study_date", "study_order"], rows)
    pairs = []
    for subject, ss in by_subject.items():
        if len(ss) < 2:
            continue
        ref, main = sorted(ss, key=lambda s: s["date"])[:2]
        for qtype, question, answer in QUESTIONS:
            pairs.append([main["study"], subject, ref["study"], qtype, question, answer,
                          SPLITS[main["split"]]])
    write_csv(root / "mimic_pair_questions.csv", ["study_id", "subject_id", "ref_id",
                                                  "question_type", "question", "answer",
                                                  "split"], pairs)
    asked = {p[0] for p in pairs} | {p[2] for p in pairs}
    used = {r[-5] for r in rows if r[1] in asked}  # mimic_all's image of each paired study
    for jpg in (root / "files").rglob("*.jpg"):
        if jpg.stem not in used:
            jpg.unlink()
    return root


@register_fake("medical_diff_vqa")
def make(root: Path) -> dict:
    """Contract-suite maker: the pairs of a six-patient MIMIC replica."""
    return {"base_image_dir": write_medical_diff_vqa(root)}
