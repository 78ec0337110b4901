"""GEMeX-VQA (Liu et al. 2024): grounded, explainable questions on MIMIC-CXR-JPG images.

Source of truth: HF ``BoKelvin/GEMeX-VQA`` -- four JSON-lines files,
``open_ended_question.jsonl``, ``closed_ended_question.jsonl``,
``single_choice_question.jsonl``, ``multi_choice_question.jsonl``; each line one question:
``q_id, image_path`` (MIMIC-CXR-JPG's ``p10/p<subject>/s<study>/<dicom>.jpg``, relative to
``files/``), ``question, answer`` (text; a letter for single choice, a list of letters for
multiple choice), ``choices`` (``"A: ..."``), ``type, reason`` (the explanation),
``visual_regions, visual_locations`` (``[x, y, w, h]`` boxes), ``ori_report``.
``base_image_dir`` is MIMIC-CXR-JPG's root (the folder holding ``files/``).

One row per question: ``question_id`` is ``<open|closed|single|multi>_<q_id>`` (``q_id``
counts within a file); single and multiple choice are ``mcq`` with options normalised to
``"A. ..."`` and ``answer_letter`` ``"B"`` or ``"A,C"``; ``report`` is ``ori_report``;
``visual_regions`` / ``visual_locations`` are kept as shipped. Patient and study come from
the image path.
"""

from __future__ import annotations

import re

from ..errors import MetadataError
from ..table.harmonizer import Inputs
from ..table.read_json import read_jsonl
from ..vqa.harmonizer import BaseVQAHarmonizer
from ..spec import Identity
from ..vqa.table import normalise_options, option_text, vqa_spec
from .mimic import VIEW_MAP, files_path
from .torch_side import torch_side

#: file -> (question-id prefix, answer format)
FILES = {"open_ended_question.jsonl": ("open", "open"),
         "closed_ended_question.jsonl": ("closed", "closed"),
         "single_choice_question.jsonl": ("single", "mcq"),
         "multi_choice_question.jsonl": ("multi", "mcq")}
_PATH = re.compile(r"(?:^|/)p\d+/p(\d+)/s(\d+)/[^/]+$")
_LETTER = re.compile(r"^\s*\(?([A-Z])\)?\s*(?:[:.)]|$)")
SPEC = vqa_spec("gemex_vqa", "GEMeX-VQA", metadata_files=tuple(FILES),
                identity=Identity("mimic_cxr_jpg"),  # MIMIC subject ids
                extra=("task", "visual_regions", "visual_locations"),
                column_types={"visual_regions": "json", "visual_locations": "json"},
                view_map=VIEW_MAP, expected={"questions": 1_605_575, "images": 151_025},
                outputs=frozenset({"report"}),
                access="HF BoKelvin/GEMeX-VQA (licence not checked); images: mimic-cxr-jpg, "
                       "PhysioNet credentialed access")


def _letters(answer, options: list[str], where: str) -> str:
    """The answer's letter(s), ``"B"`` or ``"A,C"``: given as letters or as option texts."""
    got = []
    for a in answer if isinstance(answer, list) else [answer]:
        m = _LETTER.match(str(a))
        letter = m.group(1) if m else next((o[0] for o in options
                                            if o[3:].strip().lower() == str(a).strip().lower()),
                                           None)
        if letter is None:
            raise MetadataError(f"{where}: answer {a!r} is neither a letter nor an option",
                                expected=f"one of {[o[0] for o in options]} or its text",
                                found=repr(answer)[:80], fix="correct that question's answer")
        got.append(letter)
    return ",".join(got)


class GEMeXVQAHarmonizer(BaseVQAHarmonizer):
    """GEMeX-VQA: 1,605,575 questions over 151,025 MIMIC-CXR images."""

    spec = SPEC
    FILES = {name: prefix for name, (prefix, _) in FILES.items()}
    metadata_description = "the GEMeX-VQA question files (*_question.jsonl)"

    def read(self, inputs: Inputs) -> list:
        return self.read_files(inputs, read_jsonl)

    @classmethod
    def columns(cls, raw: list, *, source: str) -> dict[str, list]:
        cols: dict[str, list] = {c: [] for c in (
            "question_id", "patient_id", "study_id", "image_paths", "view_positions",
            "question", "answer", "answer_format", "options", "answer_letter", "explanation",
            "task", "visual_regions", "visual_locations", "report")}
        for name, lines in raw:
            prefix, fmt = FILES.get(name, ("open", "open"))
            for n, q in enumerate(lines, 1):
                if q is None:
                    continue
                where = f"{source}: {name} line {n}"
                m = _PATH.search(str(q.get("image_path", ""))) if isinstance(q, dict) else None
                if m is None:
                    raise MetadataError(f"{where} has no MIMIC image path",
                                        expected="image_path p10/p<subject>/s<study>/<dicom>"
                                                 ".jpg", found=repr(q)[:80],
                                        fix="pass the file as shipped")
                opts = normalise_options(q.get("choices"), where=where) if fmt == "mcq" else []
                letter = _letters(q.get("answer"), opts, where) if fmt == "mcq" else None
                answer = q.get("answer")
                if letter is not None:
                    answer = "; ".join(option_text(opts, x) or x for x in letter.split(","))
                row = {"question_id": f"{prefix}_{q.get('q_id')}", "patient_id": m.group(1),
                       "study_id": m.group(2), "image_paths": [files_path(q["image_path"])],
                       "view_positions": [None], "question": q.get("question"),
                       "answer": None if answer is None else str(answer),
                       "answer_format": fmt, "options": opts, "answer_letter": letter,
                       "explanation": q.get("reason"), "task": q.get("type"),
                       "visual_regions": q.get("visual_regions"),
                       "visual_locations": q.get("visual_locations"),
                       "report": q.get("ori_report")}
                for c, v in row.items():
                    cols[c].append(v)
        return cols


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..vqa.dataset import VQADataset

    class GEMeXVQADataset(VQADataset):
        """GEMeX-VQA; ``base_image_dir`` is MIMIC-CXR-JPG's root (holding ``files/``)."""
        harmonizer_class = GEMeXVQAHarmonizer

    return GEMeXVQADataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["GEMeXVQAHarmonizer", "GEMeXVQADataset"]
