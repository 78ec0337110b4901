"""VQA-RAD (Lau et al. 2018, CC0): the chest X-ray subset.

Source of truth: ``VQA_RAD Dataset Public.json`` -- a JSON list, one object per question:
``qid, phrase_type, qid_linked_id, image_case_url, image_name, image_organ, evaluation,
question, question_rephrase, question_relation, question_frame, question_type, answer,
answer_type``; the images lie flat in ``VQA_RAD Image Folder/`` (``base_image_dir``).

Kept: ``image_organ`` CHEST (107 chest radiographs of the 315 images). ``answer_type`` is
``OPEN`` / ``CLOSED``, some written ``"CLOSED "`` (trailing space): read stripped. The split
comes from ``phrase_type``: ``test_freeform`` / ``test_para`` are the test questions, the rest
train (``split_raw`` keeps the phrase type). VQA-RAD has no patient ids: each image is its own
patient and study (its file name without extension). ``task`` is ``question_type``; numeric
answers (``2``) become text.
"""

from __future__ import annotations

import posixpath

from ..vqa.harmonizer import BaseVQAHarmonizer
from ..vqa.table import text, typed_format, vqa_spec
from .torch_side import torch_side

ORGAN = "CHEST"
SPEC = vqa_spec("vqa_rad_chest", "VQA-RAD (chest X-rays)",
                metadata_files=("VQA_RAD Dataset Public.json",),
                extra=("task", "split", "split_raw", "image_organ"),
                access="OSF (osf.io/89kps) or HF flaviagiammarino/vqa-rad, CC0-1.0",
                expected_note="VQA-RAD counts 2,248 questions over 315 images of every organ; "
                              "the chest X-ray subset kept here has no published count")


class VQARADChestHarmonizer(BaseVQAHarmonizer):
    """VQA-RAD chest X-ray questions (of 2,248 questions over 315 images)."""

    spec = SPEC
    metadata_description = "the VQA-RAD question file (VQA_RAD Dataset Public.json)"

    @classmethod
    def columns(cls, raw: list, *, source: str) -> dict[str, list]:
        rows = []
        for _, q in cls.entries(raw, source=source, required=("qid", "image_name")):
            if str(q.get("image_organ", "")).strip().upper() != ORGAN:
                continue
            rows.append((q, typed_format(q.get("answer_type"),
                                         where=f"{source}: question {q['qid']!r}")))
        image = [str(q["image_name"]) for q, _ in rows]
        stem = [posixpath.splitext(n)[0] for n in image]
        phrase = [text(q.get("phrase_type")) for q, _ in rows]
        return {"question_id": [str(q["qid"]) for q, _ in rows], "patient_id": stem,
                "study_id": stem, "image_paths": [[n] for n in image],
                "view_positions": [[None] for _ in rows],
                "question": [text(q.get("question")) for q, _ in rows],
                "answer": [text(q.get("answer")) for q, _ in rows],
                "answer_format": [f for _, f in rows], "options": [[] for _ in rows],
                "answer_letter": [None] * len(rows), "explanation": [None] * len(rows),
                "task": [text(q.get("question_type")) for q, _ in rows],
                "split": [None if p is None else "test" if p.startswith("test") else "train"
                          for p in phrase], "split_raw": phrase,
                "image_organ": [text(q.get("image_organ")) for q, _ in rows]}


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..vqa.dataset import VQADataset

    class VQARADChestDataset(VQADataset):
        """VQA-RAD chest X-rays; ``base_image_dir`` is ``VQA_RAD Image Folder/``."""
        harmonizer_class = VQARADChestHarmonizer

    return VQARADChestDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["VQARADChestHarmonizer", "VQARADChestDataset"]
