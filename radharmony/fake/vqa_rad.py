"""A VQA-RAD replica in the real on-disk format.

Layout (the OSF release)::

    <root>/VQA_RAD Dataset Public.json     a JSON list, one object per question
    <root>/VQA_RAD Image Folder/synpic<N>.jpg

Quirks reproduced: every field of the release in its order (``qid`` an integer, ``"NULL"``
rephrasings, ``qid_linked_id`` UUIDs, MedPix case URLs), head and abdomen questions beside the
chest ones, ``answer_type`` ``"CLOSED "`` with a trailing space, numeric answers (``2``),
questions asked in both ``freeform`` and ``para`` phrasing and their ``test_`` forms. Only
the chest images are written (the others' questions are in the JSON, as shipped).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr

FIELDS = ("qid", "phrase_type", "qid_linked_id", "image_case_url", "image_name", "image_organ",
          "evaluation", "question", "question_rephrase", "question_relation", "question_frame",
          "question_type", "answer", "answer_type")
CHEST_QA = [("Is there a pleural effusion?", "Yes", "CLOSED ", "PRES"),
            ("Is the heart enlarged?", "No", "CLOSED", "SIZE"),
            ("Where is the mass?", "Right upper lobe", "OPEN", "POS"),
            ("How many ribs are fractured?", 2, "OPEN", "COUNT"),
            ("Is this a PA film?", "yes", "CLOSED ", "PLANE")]
OTHER_QA = [("Are regions of the brain infarcted?", "Yes", "CLOSED", "PRES", "HEAD"),
            ("Is the liver enlarged?", "No", "CLOSED ", "SIZE", "ABD")]
IMAGES = "VQA_RAD Image Folder"
FILE = "VQA_RAD Dataset Public.json"


def write_vqa_rad(root: str | Path, *, n_chest: int = 6, seed: int = 0,
                  images: bool = True) -> Path:
    """Write the replica under ``root``; returns the image folder (``base_image_dir``)."""
    root = Path(root)
    folder = root / IMAGES
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out, qid = [], 0
    names = [(f"synpic{50000 + 37 * k}.jpg", "CHEST") for k in range(n_chest)] + \
        [(f"synpic{40000 + k}.jpg", organ) for k, organ in enumerate(("HEAD", "ABD"))]
    for k, (name, organ) in enumerate(names):
        if images and organ == "CHEST":  # only the images of vqa_rad_chest's questions
            import cv2

            cv2.imwrite(str(folder / name), synthetic_cxr(256, 240, rng=rng, bits=8))
        qa = CHEST_QA if organ == "CHEST" else [q[:4] for q in OTHER_QA if q[4] == organ]
        for j, (question, answer, atype, qtype) in enumerate(qa[: 2 + k % 4]):
            linked = str(uuid.UUID(int=int(rng.integers(2**62))))
            phrases = ["freeform", "para"] if k % 3 else ["test_freeform", "test_para"]
            for phrase in phrases[: 1 + (j == 0)]:
                out.append(dict(zip(FIELDS, (
                    qid, phrase, linked, f"https://medpix.nlm.nih.gov/case?id={linked}", name,
                    organ, "not evaluated" if j else "given",
                    question if phrase.endswith("freeform") else f"Is it true: {question}",
                    "NULL", "NULL", "NULL", qtype, answer, atype))))
                qid += 1
    (root / FILE).write_text(json.dumps(out, indent=4))
    return folder


@register_fake("vqa_rad_chest")
def make(root: Path) -> dict:
    """Contract-suite maker: six chest images (and two other organs, left out)."""
    return {"base_image_dir": write_vqa_rad(root)}
