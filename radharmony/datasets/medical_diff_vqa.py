"""Medical-Diff-VQA (PhysioNet, MIMIC-CXR based): ~700k questions over main/reference study
pairs, among them "difference" questions comparing a study with a prior one.

Source of truth: ``mimic_pair_questions.csv`` (``study_id, subject_id, ref_id,
question_type, question, answer, split``; ``question_type`` one of abnormality, location,
level, view, type, presence, difference; ``ref_id`` the pair's reference -- a *prior* study of
the same patient) and, beside it, ``mimic_all.csv`` (``subject_id, study_id``, 14 labels,
``dicom_id, view, split, study_date, study_order``), which maps each study to its one image.
The images are MIMIC-CXR-JPG's: ``base_image_dir`` is its root (the folder holding
``files/``).

One row per question; ``question_id`` is the row's number in the file (0-based, the file has
no id); ``task`` is ``question_type``; ``answer_format`` is closed for yes/no answers;
``ref_study_id`` is the pair's reference for every row, ``ref_image_paths`` is set for the
difference questions (their samples carry ``ref_img``). A pair whose reference study belongs
to another patient, or a study missing from ``mimic_all.csv``, is refused naming the row.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import MetadataError, MetadataNotFoundError
from ..table.harmonizer import Inputs
from ..table.locate import find_optional
from ..table.read_csv import read_table, require_columns
from ..vqa.harmonizer import BaseVQAHarmonizer
from ..spec import Identity
from ..vqa.table import REFERENCE, answer_format, vqa_spec
from .mimic import VIEW_MAP, image_file
from .torch_side import torch_side

QUESTION_COLUMNS = ("study_id", "subject_id", "ref_id", "question_type", "question", "answer",
                    "split")
STUDY_COLUMNS = ("subject_id", "study_id", "dicom_id", "view", "study_date")
STUDIES_FILE = "mimic_all.csv"
SPLIT_MAP = {"train": "train", "val": "valid", "valid": "valid", "test": "test"}
SPEC = vqa_spec("medical_diff_vqa", "Medical-Diff-VQA",
                identity=Identity("mimic_cxr_jpg"),  # MIMIC subject ids
                metadata_files=("mimic_pair_questions.csv",),
                extra=("task", *REFERENCE, "split", "split_raw", "study_date"),
                column_types={"study_date": "Int64"}, view_map=VIEW_MAP,
                expected={"questions": 700_703},
                access="PhysioNet medical-diff-vqa 1.0.0, credentialed access (MIMIC-CXR "
                       "images: mimic-cxr-jpg)")


class MedicalDiffVQAHarmonizer(BaseVQAHarmonizer):
    """Medical-Diff-VQA: 700,703 questions over 164,324 main/reference study pairs."""

    spec = SPEC
    metadata_description = "the Medical-Diff-VQA questions (mimic_pair_questions.csv)"

    def inputs(self, path: Path) -> Inputs:
        return Inputs(path, {"studies": find_optional((STUDIES_FILE,), path.parent,
                                                      self.base_image_dir)})

    def read(self, inputs: Inputs) -> dict:
        studies = inputs.file("studies")
        if studies is None:
            raise MetadataNotFoundError(f"{STUDIES_FILE} (each study's image)",
                                        [inputs.metadata.with_name(STUDIES_FILE)],
                                        fix=f"put {STUDIES_FILE} beside "
                                            f"{inputs.metadata.name}")
        ids = {"study_id": str, "subject_id": str, "ref_id": str, "dicom_id": str}
        return {"questions": read_table(inputs.metadata, description=self.metadata_description,
                                        columns=QUESTION_COLUMNS, dtype=ids,
                                        keep_default_na=False, na_values=[""]),
                "studies": read_table(studies, description=STUDIES_FILE,
                                      columns=STUDY_COLUMNS, dtype=ids)}

    @classmethod
    def columns(cls, raw: dict, *, source: str) -> dict[str, list]:
        q, st = raw["questions"], raw["studies"]
        require_columns(q, QUESTION_COLUMNS, source=source, description="the questions")
        require_columns(st, STUDY_COLUMNS, source=source, description=STUDIES_FILE)
        st = st.drop_duplicates("study_id").set_index("study_id")
        subject_of, dates = st["subject_id"].to_dict(), st["study_date"]
        image = {s: image_file(r.subject_id, s, r.dicom_id) for s, r in st.iterrows()}
        view = {s: v if isinstance(v, str) and v else None for s, v in st["view"].items()}
        for i, (study, subject, ref) in enumerate(zip(q["study_id"], q["subject_id"],
                                                      q["ref_id"])):
            for role, s in (("study", study), ("reference study", ref)):
                if s not in subject_of:
                    raise MetadataError(f"{source}: row {i}: {role} {s!r} is not in "
                                        f"{STUDIES_FILE}", expected="every study listed "
                                        f"there with its image", found=f"study {s!r}",
                                        fix=f"use the {STUDIES_FILE} of the same release")
            if subject_of[ref] != subject:
                raise MetadataError(f"{source}: row {i}: the reference study {ref!r} belongs "
                                    f"to patient {subject_of[ref]!r}, not to {subject!r}",
                                    expected="a prior study of the same patient",
                                    found=f"study {study!r} (patient {subject!r}) paired with "
                                          f"{ref!r} (patient {subject_of[ref]!r})",
                                    fix="correct ref_id in that row, or drop the row")
        diff = (q["question_type"].astype(str).str.strip().str.lower() == "difference").tolist()
        answers = [None if pd.isna(a) else str(a) for a in q["answer"]]
        split_raw = [None if pd.isna(s) else str(s) for s in q["split"]]
        n = len(q)
        return {"question_id": [str(i) for i in range(n)], "patient_id": q["subject_id"].tolist(),
                "study_id": q["study_id"].tolist(),
                "image_paths": [[image[s]] for s in q["study_id"]],
                "view_positions": [[view[s]] for s in q["study_id"]],
                "question": q["question"].tolist(), "answer": answers,
                "answer_format": [answer_format(a) for a in answers],
                "options": [[] for _ in range(n)],
                "answer_letter": [None] * n, "explanation": [None] * n,
                "task": q["question_type"].tolist(), "ref_study_id": q["ref_id"].tolist(),
                "ref_image_paths": [[image[r]] if d else None for r, d in zip(q["ref_id"],
                                                                              diff)],
                "split_raw": split_raw,
                "split": [SPLIT_MAP.get(s.strip().lower()) if s else None for s in split_raw],
                "study_date": pd.to_numeric(q["study_id"].map(dates), errors="coerce")
                .astype("Int64").tolist()}


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..vqa.dataset import VQADataset

    class MedicalDiffVQADataset(VQADataset):
        """Medical-Diff-VQA; ``base_image_dir`` is MIMIC-CXR-JPG's root (holding ``files/``)."""
        harmonizer_class = MedicalDiffVQAHarmonizer

    return MedicalDiffVQADataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["MedicalDiffVQAHarmonizer", "MedicalDiffVQADataset"]
