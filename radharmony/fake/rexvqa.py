"""A ReXVQA replica in the real on-disk format, over a ReXGradient-160K replica.

Layout (HF ``rajpurkarlab/ReXVQA`` beside the extracted ReXGradient images)::

    <root>/metadata/<split>_vqa_data.json      one JSON object keyed by question id
    <root>/deid_png/...                        ReXGradient's PNGs (radharmony.fake.rexgradient)
    <root>/download/metadata/...               ReXGradient's own metadata

Each question carries the fields two independent loaders read (``question``, ``options``
``["A. ...", ...]``, ``correct_answer`` (a letter), ``correct_answer_explanation``,
``task_name``, ``category``, ``subcategory``, ``class``, ``study_id``, ``StudyInstanceUid``,
``PatientID``, ``AccessionNumber``, ``ImagePath`` (the study's ``../deid_png/...`` list),
``ImageViewPosition``, ``ImageModality``) and the study fields copied from ReXGradient
(``PatientSex``, ``PatientAge``, ``StudyDate``, ``Manufacturer``, ``Indication``,
``Comparison``, ``Findings``, ``Impression``; bare ``NaN`` kept). The questions of a split are
over the same split's ReXGradient studies, so the splits are ReXGradient's. Assumed, not
verified: the question-id form (``<split>_<number>``) and ``study_id`` = ReXGradient's key.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import register_fake
from .rexgradient import make_metadata, write_rexgradient

#: the five skills, as ReXrank's VQA table names them
TASKS = ("Presence Assessment", "Location and Distribution Assessment", "Negation Assessment",
         "Differential Diagnosis", "Geometric Information Assessment")
CATEGORIES = {"Lung and Pleural Opacity": ("Pleural Effusion", "Consolidation", "Atelectasis"),
              "Cardiac and Mediastinal": ("Cardiomegaly", "Mediastinal Widening"),
              "Devices and Lines": ("Endotracheal Tube", "Central Line"),
              "Bones and Soft Tissue": ("Fracture", "Degenerative Change")}
FINDINGS = ("pleural effusion", "consolidation", "cardiomegaly", "pneumothorax", "atelectasis",
            "pulmonary edema", "a nodule", "an endotracheal tube")
PLACES = ("right lower lobe", "left lower lobe", "right upper lobe", "bilateral bases",
          "left apex")
STUDY_FIELDS = ("PatientSex", "PatientAge", "StudyDate", "Manufacturer", "Indication",
                "Comparison", "Findings", "Impression")


def _question(rng, task: str) -> tuple[str, list[str]]:
    f = FINDINGS[int(rng.integers(len(FINDINGS)))]
    if task.startswith("Presence"):
        return f"Is there {f} in this chest radiograph?", ["Yes", "No", "Cannot be determined",
                                                            "Only on the lateral view"]
    if task.startswith("Location"):
        places = list(rng.permutation(PLACES)[:4])
        return f"Where is the {f} located?", places
    if task.startswith("Negation"):
        return "Which finding is NOT present?", list(rng.permutation(FINDINGS)[:4])
    if task.startswith("Differential"):
        return "What is the most likely diagnosis?", list(rng.permutation(FINDINGS)[:4])
    return f"What is the approximate size of the {f}?", ["Small", "Moderate", "Large",
                                                          "Not measurable"]


def make_questions(meta: dict, *, split: str, seed: int = 0, per_study: float = 4.4,
                   start: int = 0) -> dict:
    """``<split>_vqa_data.json`` content: about ``per_study`` questions for each study of a
    ReXGradient split's metadata ``meta`` (every study gets at least one)."""
    rng = np.random.default_rng(seed)
    out, n = {}, start
    cats = list(CATEGORIES)
    for key, e in meta.items():
        for _ in range(1 + int(rng.poisson(per_study - 1))):
            task = TASKS[int(rng.integers(len(TASKS)))]
            cat = cats[int(rng.integers(len(cats)))]
            sub = CATEGORIES[cat][int(rng.integers(len(CATEGORIES[cat])))]
            q, opts = _question(rng, task)
            letter = "ABCD"[int(rng.integers(4))]
            entry = {"question": q, "options": [f"{'ABCD'[k]}. {o}" for k, o in
                                                enumerate(opts)],
                     "correct_answer": letter,
                     "correct_answer_explanation": f"The report states: {sub.lower()} is "
                                                   f"{'seen' if letter != 'B' else 'absent'}.",
                     "task_name": task, "category": cat, "subcategory": sub,
                     "class": "abnormal" if letter != "B" else "normal",
                     "study_id": key, "StudyInstanceUid": e["StudyInstanceUid"],
                     "PatientID": e["PatientID"], "AccessionNumber": e["AccessionNumber"],
                     "ImagePath": e["ImagePath"], "ImageViewPosition": e["ImageViewPosition"],
                     "ImageModality": e["ImageModality"],
                     **{f: e[f] for f in STUDY_FIELDS}}
            out[f"{split}_{n:07d}"] = entry
            n += 1
    return out


def write_rexvqa(root: str | Path, *, studies: dict[str, int] | None = None, seed: int = 0,
                 images: bool = True, per_study: float = 4.4) -> Path:
    """Write a ReXGradient replica (``images=False``: metadata only) and ReXVQA's question
    files over it under ``root``; returns ``root/deid_png``. The ReXGradient metadata is the
    same as :func:`~radharmony.fake.rexgradient.write_rexgradient` writes for ``studies``."""
    root = Path(root)
    studies = studies or {"train": 24, "valid": 8, "test": 8}
    image_root = write_rexgradient(root, studies=studies, seed=seed, images=images)
    out = root / "metadata"
    out.mkdir(parents=True, exist_ok=True)
    for i, (split, n) in enumerate(studies.items()):
        meta = make_metadata(n, seed=seed * 1000 + i)  # the studies write_rexgradient wrote
        dump(out / f"{split}_vqa_data.json",
             make_questions(meta, split=split, seed=seed * 1000 + i + 7, per_study=per_study))
    return image_root


def dump(path: Path, obj) -> None:
    """As ReXGradient's own metadata files are written (assumed alike): one JSON object,
    indented by two spaces, NaN written bare."""
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=2)


@register_fake("rexvqa_train", "rexvqa_valid", "rexvqa_test")
def make(root: Path) -> dict:
    """Contract-suite maker: the question files over a small ReXGradient replica."""
    return {"base_image_dir": write_rexvqa(root, studies={"train": 6, "valid": 4, "test": 4},
                                           per_study=2.0)}
