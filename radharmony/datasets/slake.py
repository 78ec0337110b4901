"""SLAKE (Liu et al. 2021, cc-by-4.0): the English chest X-ray questions.

Source of truth: HF ``BoKelvin/SLAKE`` ``train.json``, ``validation.json`` (``validate.json``
in the original release) and ``test.json`` -- JSON lists, one object per question: ``img_id,
img_name, question, answer, q_lang, location, modality, answer_type, base_type,
content_type, triple, qid``; ``imgs.zip`` extracted to ``imgs/xmlab<N>/source.jpg``
(``base_image_dir`` = ``imgs/``).

Kept: ``modality == "X-Ray"`` and ``q_lang == "en"`` (the Chinese rows ask the same questions
again). The three files are one table with ``split`` (``train`` / ``valid`` / ``test``;
``split_raw`` the file's name). SLAKE has no patient ids: each image (``img_id``) is its own
patient and study. ``task`` is ``content_type``, ``category`` is ``location``.
"""

from __future__ import annotations

from ..vqa.harmonizer import BaseVQAHarmonizer
from ..vqa.table import text, typed_format, vqa_spec
from .torch_side import torch_side

#: split file -> split, in reading order (``validate.json`` is the original release's name)
FILES = {"train.json": "train", "validation.json": "valid", "validate.json": "valid",
         "test.json": "test"}
SPEC = vqa_spec("slake_chest", "SLAKE (English chest X-ray questions)",
                metadata_files=("train.json",), extra=("task", "category", "split", "split_raw"),
                access="HF BoKelvin/SLAKE (cc-by-4.0); original at med-vqa.com/slake",
                expected_note="SLAKE counts 14,028 questions (English and Chinese, every "
                              "modality) over 642 images; the English chest X-ray subset kept "
                              "here has no published count")


class SLAKEChestHarmonizer(BaseVQAHarmonizer):
    """SLAKE: 14,028 questions (English and Chinese) over 642 images; X-ray English kept."""

    spec = SPEC
    metadata_description = "the SLAKE question files (train.json beside validation/test)"
    FILES = FILES

    @classmethod
    def columns(cls, raw: list, *, source: str) -> dict[str, list]:
        rows = []
        for name, q in cls.entries(raw, source=source, required=("qid", "img_id", "img_name")):
            if q.get("modality") != "X-Ray" or q.get("q_lang") != "en":
                continue
            rows.append((name, q, typed_format(q.get("answer_type"), where=f"{source}: {name} "
                                               f"question {q['qid']!r}")))
        ids = [str(q["img_id"]) for _, q, _ in rows]
        n = len(rows)
        return {"question_id": [str(q["qid"]) for _, q, _ in rows], "patient_id": ids,
                "study_id": ids, "image_paths": [[str(q["img_name"])] for _, q, _ in rows],
                "view_positions": [[None] for _ in rows],
                "question": [text(q.get("question")) for _, q, _ in rows],
                "answer": [text(q.get("answer")) for _, q, _ in rows],
                "answer_format": [f for _, _, f in rows], "options": [[] for _ in rows],
                "answer_letter": [None] * n, "explanation": [None] * n,
                "task": [text(q.get("content_type")) for _, q, _ in rows],
                "category": [text(q.get("location")) for _, q, _ in rows],
                "split": [FILES.get(name) for name, _, _ in rows],
                "split_raw": [name.rsplit(".", 1)[0] for name, _, _ in rows]}


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..vqa.dataset import VQADataset

    class SLAKEChestDataset(VQADataset):
        """SLAKE English X-ray questions; ``base_image_dir`` is the extracted ``imgs/``."""
        harmonizer_class = SLAKEChestHarmonizer

    return SLAKEChestDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["SLAKEChestHarmonizer", "SLAKEChestDataset"]
