"""MIMIC-CXR-VQA (Bae et al., EHRXQA on PhysioNet): ~378k template questions on MIMIC-CXR-JPG.

Source of truth: ``train.json``, ``valid.json``, ``test.json`` -- JSON lists, one object per
question: ``split, idx, image_id, question, content_type`` (anatomy / attribute / presence /
abnormality / plane / gender / size), ``semantic_type`` (verify / choose / query),
``template, template_program, template_arguments, answer`` (a list), ``subject_id,
study_id, image_path`` (``files/p10/.../<dicom>.jpg``). The images are MIMIC-CXR-JPG's:
``base_image_dir`` is its root (the folder holding ``files/``).

One row per question, one image each. ``question_id`` is ``<split>_<idx>`` (``idx`` counts
within a file); ``answer`` joins the answer list with ``", "`` (an empty list: no answer);
``verify`` questions are closed, the others open. ``task`` is ``semantic_type``,
``category`` ``content_type``, ``subcategory`` the ``template``.
"""

from __future__ import annotations

from ..vqa.harmonizer import BaseVQAHarmonizer
from ..spec import Identity
from ..vqa.table import TAXONOMY, vqa_spec
from .mimic import VIEW_MAP, files_path
from .torch_side import torch_side

FILES = {"train.json": "train", "valid.json": "valid", "test.json": "test"}
SPEC = vqa_spec("mimic_cxr_vqa", "MIMIC-CXR-VQA", metadata_files=("train.json",),
                identity=Identity("mimic_cxr_jpg"),  # MIMIC subject ids
                extra=(*TAXONOMY, "split", "split_raw", "image_id"), view_map=VIEW_MAP,
                access="PhysioNet ehrxqa 1.0.0 (MIMIC-CXR-VQA), credentialed access; images: "
                       "mimic-cxr-jpg 2.0.0",
                expected_note="the release gives about 378,000 questions (48 templates), "
                              "rounded: no exact count")


def _answer(value) -> str | None:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or None
    return None if value is None else str(value)


class MIMICCXRVQAHarmonizer(BaseVQAHarmonizer):
    """MIMIC-CXR-VQA: about 378k questions of 48 templates over MIMIC-CXR-JPG images."""

    spec = SPEC
    FILES = FILES
    metadata_description = "the MIMIC-CXR-VQA question files (train.json beside valid/test)"

    @classmethod
    def columns(cls, raw: list, *, source: str) -> dict[str, list]:
        rows = list(cls.entries(raw, source=source, required=("idx", "image_path",
                                                               "subject_id", "study_id")))
        get = [(name, q.get) for name, q in rows]
        n = len(rows)
        return {"question_id": [f"{FILES.get(name, name)}_{g('idx')}" for name, g in get],
                "patient_id": [str(g("subject_id")) for _, g in get],
                "study_id": [str(g("study_id")) for _, g in get],
                "image_paths": [[files_path(g("image_path"))] for _, g in get],
                "view_positions": [[None] for _ in rows],
                "question": [g("question") for _, g in get],
                "answer": [_answer(g("answer")) for _, g in get],
                "answer_format": ["closed" if g("semantic_type") == "verify" else "open"
                                  for _, g in get],
                "options": [[] for _ in rows], "answer_letter": [None] * n,
                "explanation": [None] * n, "task": [g("semantic_type") for _, g in get],
                "category": [g("content_type") for _, g in get],
                "subcategory": [g("template") for _, g in get],
                "split": [FILES.get(name) for name, _ in get],
                "split_raw": [g("split") for _, g in get],
                "image_id": [g("image_id") for _, g in get]}


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..vqa.dataset import VQADataset

    class MIMICCXRVQADataset(VQADataset):
        """MIMIC-CXR-VQA; ``base_image_dir`` is MIMIC-CXR-JPG's root (holding ``files/``)."""
        harmonizer_class = MIMICCXRVQAHarmonizer

    return MIMICCXRVQADataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["MIMICCXRVQAHarmonizer", "MIMICCXRVQADataset"]
