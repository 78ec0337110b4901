"""ReXVQA (Rajpurkar Lab): ~696k multiple-choice questions over ReXGradient-160K's studies.

Source of truth: HF ``rajpurkarlab/ReXVQA`` ``metadata/<split>_vqa_data.json`` -- one JSON
object keyed by question id; each question carries ``question``, ``options``
(``["A. ...", ...]``), ``correct_answer`` (a letter), ``correct_answer_explanation``,
``task_name`` (the skill), ``category``, ``subcategory``, the study's ids and its
``ImagePath`` list in ReXGradient's own form (``../deid_png/<PatientID>/<Accession>/studies/
<StudyInstanceUid>/.../instances/<SOP>.png``), so the images are ReXGradient's
(``base_image_dir`` = the extracted ``deid_png/``) and the paths, views and study fields are
read with :mod:`radharmony.datasets.rexgradient`'s helpers. Each split's questions are over the
same ReXGradient split, so no patient crosses ``rexvqa_train`` / ``_valid`` / ``_test``.

One row per question; ``task`` is ``task_name``. A question whose image files are absent is
counted and named when the dataset is built (``on_missing="drop"`` leaves it out).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ..errors import MetadataError
from ..table.harmonizer import Inputs
from ..table.read_json import entry_columns, load_json
from ..vqa.dataset import VQADataset
from ..vqa.harmonizer import BaseVQAHarmonizer
from ..vqa.table import TAXONOMY, normalise_options, option_text, vqa_spec
from .rexgradient import (ACCESS as REXGRADIENT_ACCESS, EXTRA_OUTPUT_COLS, SECTIONS, VIEW_MAP,
                          raw_views, relative_paths, study_fields)

# -- declarative spec ----------------------------------------------------------------------------
ACCESS = ("HuggingFace rajpurkarlab/ReXVQA (gated) for the questions; images from "
          + REXGRADIENT_ACCESS)
#: the keys of a question the harmonizer reads
FIELDS = ("question", "options", "correct_answer", "correct_answer_explanation", "task_name",
          "category", "subcategory", "StudyInstanceUid", "PatientID", "AccessionNumber",
          "ImagePath", "ImageViewPosition", "PatientSex", "PatientAge", "StudyDate",
          *(f for _, f in SECTIONS))


def split_spec(split: str):
    return vqa_spec(f"rexvqa_{split}", f"ReXVQA ({split})",
                    metadata_files=(f"{split}_vqa_data.json",),
                    extra=(*TAXONOMY, *EXTRA_OUTPUT_COLS), column_types={"study_date": "Int64"},
                    age_col="patient_age", age_format="auto", sex_col="patient_sex",
                    outputs=frozenset({"report"}), view_map=VIEW_MAP, access=ACCESS)


def _letter(value) -> str | None:
    return value.strip().upper() if isinstance(value, str) and value.strip() else None


# -- harmonizer -----------------------------------------------------------------------------------
class _ReXVQAHarmonizer(BaseVQAHarmonizer):
    split: ClassVar[str]

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return f"the ReXVQA {self.split} question file ({self.split}_vqa_data.json)"

    def inputs(self, path: Path) -> Inputs:
        return Inputs(path)

    def read(self, inputs: Inputs) -> dict:
        """The question file as read (questions as records of :data:`FIELDS`); a repeated
        question id is refused naming it."""
        raw = load_json(inputs.metadata, counted=("correct_answer",), entry_fields=FIELDS)
        if not isinstance(raw, dict):
            raise MetadataError(f"{inputs.metadata} has the wrong top-level type",
                                expected="a JSON object keyed by question id",
                                found=type(raw).__name__, fix="re-download the question file")
        return raw

    @classmethod
    def columns(cls, raw: dict, *, source: str) -> dict[str, list]:
        entries = list(raw.values())
        field = entry_columns(entries, FIELDS).__getitem__
        paths, views, options, letters, answers = [], [], [], [], []
        for qid, p, v, opts, letter in zip(raw, field("ImagePath"), field("ImageViewPosition"),
                                          field("options"), field("correct_answer")):
            if isinstance(p, str):
                p = [p]
            if not isinstance(p, list) or not p:
                raise MetadataError(f"{source}: question {qid!r} has no ImagePath list",
                                    expected="a non-empty list of ../deid_png/... paths",
                                    found=repr(p)[:80], fix="re-download the question file")
            v = [None] * len(p) if v is None else v
            if not isinstance(v, list) or len(v) != len(p):
                raise MetadataError(f"{source}: question {qid!r} has {len(p)} ImagePath values "
                                    "but ImageViewPosition does not match",
                                    expected=f"{len(p)} view positions", found=repr(v)[:80],
                                    fix="re-download the question file")
            paths.append(relative_paths(p))
            views.append(raw_views(v))
            o = opts if type(opts) is list and all(
                type(x) is str and x[1:3] == ". " and x[0] == "ABCDEFGH"[k]
                for k, x in enumerate(opts)) else normalise_options(
                    opts, where=f"{source}: question {qid!r}")  # shipped form: no parse
            options.append(o)
            letter = _letter(letter)
            letters.append(letter)
            answers.append(option_text(o, letter) if letter else None)
        study = study_fields(field, list(raw), source=source)
        return {"question_id": list(raw), "patient_id": field("PatientID"),
                "study_id": field("StudyInstanceUid"), "image_paths": paths,
                "view_positions": views, "question": field("question"), "answer": answers,
                "answer_format": ["mcq"] * len(paths), "options": options,
                "answer_letter": letters, "explanation": field("correct_answer_explanation"),
                "task": field("task_name"), "category": field("category"),
                "subcategory": field("subcategory"), **study}


# -- thin split classes ----------------------------------------------------------------------------
class ReXVQATrainHarmonizer(_ReXVQAHarmonizer):
    """ReXVQA train questions (over ReXGradient-160K train)."""
    split, spec = "train", split_spec("train")


class ReXVQAValidHarmonizer(_ReXVQAHarmonizer):
    """ReXVQA validation questions (over ReXGradient-160K valid)."""
    split, spec = "valid", split_spec("valid")


class ReXVQATestHarmonizer(_ReXVQAHarmonizer):
    """ReXVQA test questions (over ReXGradient-160K public test)."""
    split, spec = "test", split_spec("test")


class ReXVQATrainDataset(VQADataset):
    """ReXVQA train; ``base_image_dir`` is ReXGradient's extracted ``deid_png/``."""
    harmonizer_class = ReXVQATrainHarmonizer


class ReXVQAValidDataset(VQADataset):
    """ReXVQA validation; ``base_image_dir`` is ReXGradient's extracted ``deid_png/``."""
    harmonizer_class = ReXVQAValidHarmonizer


class ReXVQATestDataset(VQADataset):
    """ReXVQA test; ``base_image_dir`` is ReXGradient's extracted ``deid_png/``."""
    harmonizer_class = ReXVQATestHarmonizer


__all__ = [f"ReXVQA{s}{k}" for s in ("Train", "Valid", "Test") for k in ("Harmonizer", "Dataset")]
