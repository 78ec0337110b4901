"""A GEMeX-VQA replica in the real on-disk format, over a MIMIC-CXR-JPG replica.

Layout (HF ``BoKelvin/GEMeX-VQA`` beside MIMIC-CXR-JPG's root)::

    <root>/GEMeX-VQA/{open_ended,closed_ended,single_choice,multi_choice}_question.jsonl
    <root>/files/...          MIMIC-CXR-JPG (radharmony.fake.mimic)

Quirks reproduced: ``image_path`` relative to ``files/`` (``p10/p.../s.../<dicom>.jpg``),
``choices`` lettered ``"A: ..."``, a single-choice answer a letter and a multi-choice answer a
list of letters, ``q_id`` counting from 0 in every file, ``visual_locations`` ``[x, y, w, h]``
lists, the original report in every line.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import register_fake
from .mimic import studies, write_mimic

REPORT = "FINDINGS: Small left pleural effusion. IMPRESSION: Small left effusion."
KINDS = {
    "open_ended_question.jsonl": lambda: {"question": "Where is the effusion located?",
                                          "answer": "left costophrenic angle", "type": "open"},
    "closed_ended_question.jsonl": lambda: {"question": "Is there a pneumothorax?",
                                            "answer": "no", "type": "closed"},
    "single_choice_question.jsonl": lambda: {
        "question": "Which side has the effusion?", "answer": "B",
        "choices": ["A: Right", "B: Left", "C: Both sides", "D: Neither"], "type": "single"},
    "multi_choice_question.jsonl": lambda: {
        "question": "Which findings are present?", "answer": ["A", "C"],
        "choices": ["A: Pleural effusion", "B: Pneumothorax", "C: Atelectasis",
                    "D: Fracture"], "type": "multi"},
}


def write_gemex(root: str | Path, *, n_subjects: int = 6, seed: int = 0,
                images: bool = True) -> Path:
    """Write the replica under ``root`` and return ``root`` (MIMIC-CXR-JPG's root)."""
    root = Path(write_mimic(root, n_subjects=n_subjects, seed=seed, images=images))
    folder = root / "GEMeX-VQA"
    folder.mkdir(parents=True, exist_ok=True)
    images_ = [(s, d) for s in studies(root) for d in s["dicoms"]]
    for name, make_q in KINDS.items():
        with open(folder / name, "w") as fh:
            for q_id, (s, dicom) in enumerate(images_):
                line = {"q_id": q_id, "image_path": f"p{s['subject'][:2]}/p{s['subject']}/"
                                                    f"s{s['study']}/{dicom}.jpg",
                        **make_q(), "reason": "The left costophrenic angle is blunted.",
                        "visual_regions": ["left lung"],
                        "visual_locations": [[0.52, 0.55, 0.3, 0.25]], "ori_report": REPORT}
                fh.write(json.dumps(line) + "\n")
    return root


@register_fake("gemex_vqa")
def make(root: Path) -> dict:
    """Contract-suite maker: every question kind on a six-patient MIMIC replica."""
    base = write_gemex(root)
    return {"base_image_dir": base, "csv_path": base / "GEMeX-VQA" / "open_ended_question.jsonl"}
