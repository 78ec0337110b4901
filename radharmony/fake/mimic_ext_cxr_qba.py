"""A MIMIC-Ext-CXR-QBA replica in the shipped on-disk form, over a MIMIC-CXR-JPG replica.

Layout (PhysioNet ``mimic-ext-cxr-qba/1.0.0`` beside MIMIC-CXR-JPG's root)::

    <root>/files/...                                   MIMIC-CXR-JPG (radharmony.fake.mimic),
                                                       the frontal images the export names
    <root>/mimic-ext-cxr-qba/exports/A_frontal/
        qa.zip                                         qa/p1x/p1xxxxxxx/sxxxxxxxx.qa.json per study
        metadata/{question,question_image,image}_metadata.parquet     every question
        metadata/q1M/{question,question_image,image}_metadata.parquet  a subset (every other)

Confirmed, with sources:

- [PN] the PhysioNet project page (physionet.org/content/mimic-ext-cxr-qba, v1.0.0; a copy
  is in the public code index): the release's folders (``metadata/`` with ``.csv.gz`` and
  ``.parquet`` copies of each level's file, ``qa.zip``, ``scene_data.zip``, ``exports/``,
  ``quality_mappings.csv``); the exports ``A_frontal`` / ``B_frontal``, each with a
  ``metadata`` folder, ``qa.zip`` and a scene-graph zip, and the metadata sub-folders
  ``Ap``, ``App``, ``q1M``, ``Ap_q1M``, ``App_q1M``; the index columns of each level
  (questions: ``patient_id, study_id, question_id``; question-image pairs: those and
  ``image_id``; images: ``patient_id, study_id, image_id``) and the fields each level
  carries (questions: quality rating, ``question_type``, ``question_strategy``,
  ``contains_report_answers``, ``contains_template_answers``, ``num_answers``;
  question-image pairs: ``localization_quality``; images: ``view_position``,
  ``patient_orientation``, size, ``localization_quality``); quality values stored as raw
  codes that ``quality_mappings.csv`` maps to their grades; the qa.json form
  (``patient_id``, ``study_id``, ``questions[]`` with ``question_id, question_type,
  question_strategy, variables, obs_ids, contains_report_answers,
  contains_template_answers, extraction_quality, question_img_localization_quality,
  question, answers[], question_quality``; each answer ``answer_id, answer_type``
  (main_answer / details / related_information) ``, answer_level, text, name_tag, ...,
  localization{image_id: {bboxes, ...}}, sub_answers, from_report, ...``); the four
  strategies (indication, abnormal, region_abnormal, finding) and the type identifiers
  (``A_indication``, ``B01_describe_all`` ... ``D07_where_is_device``); exports hold
  frontal images only and no study without one.
- [HF] a public Hugging Face viewer preview of one shipped Parquet file, the answer-image
  level (fast.hugflare.com/datasets/KYAGABA/MIC_EXT_SELF_VERSION_PRIVATE): written by pandas
  with the level's ids as the index, so they come *last*; ids as strings with their
  prefixes (``p10000032``, ``s50414267``, question ids ``B09_describe_abnormal_subcat_006``,
  ``D02_has_finding_001`` -- unique within a study only, numbered with gaps in a subset);
  ``image_id`` the MIMIC dicom id; the other columns flattened with dots under a level
  prefix (``answer_img.has_bboxes``, ``answer_img.quality.localization_quality``, int64
  quality codes such as 4).
- [RH] the reference library (f10409/RadHarmony ``harmonizer/mimic_ext_cxr_qba``) reads the
  question columns ``question.question_type`` and ``question.quality.rating``.
- [AN] a third-party reader of the real files (code index ids 40316584, 60812608813: a
  MIMIC-CXR VQA dataset module whose question-type table lists the 20 most frequent types it
  counted, in [PN]'s proportions): ``question_type`` holds the type *identifier*
  (``D02_has_finding``, ``A_indication``), not the bare name of [PN]'s JSON example; its
  quality dicts hold integer codes, each the position in its criterion's levels, worst first
  (``extraction_quality: {region_extract_quality: 4, localization_quality: 1, ...}``).

Probable, not confirmed: qa.zip's members under a top ``qa/`` folder (the reference library
and third-party readers, code index ids 792254083 and 40316584, expect ``qa/p1x/...``; [PN]
lists the paths below it; the reader
accepts both, ``member_prefix`` picks one); the level prefixes ``question.`` for every
question column (``question.question_strategy``, ...) and ``question_img.`` for the
question-image columns (by analogy with ``answer_img.`` and the qa.json field
``question_img_localization_quality``).

Assumed (not seen): ``image.`` as the image level's prefix (``image.view_position``; a
third-party note says ``img.``; the reader matches any prefix), the order of the non-index
columns, the form of the image size (not written), which integer codes the ratings use,
and the indication question's id (``A_indication_001``).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from . import register_fake
from .mimic import studies, write_mimic

#: (question type identifier -- qa.json's ``question_type`` --, strategy, question, main
#: answer, detail answers)
QUESTIONS = [
    ("A_indication", "indication", "Chest pain and dyspnea. Evaluate for infiltrate.",
     "There is no infiltrate.", ["No focal consolidation is seen."]),
    ("B01_describe_all", "abnormal", "Describe the given study.",
     "There is a small left pleural effusion.", []),
    ("B03_is_abnormal", "abnormal", "Is the study abnormal?",
     "Yes, there are abnormal findings.", ["There is a small left pleural effusion."]),
    ("C01_describe_region", "region_abnormal", "Describe the left lung.",
     "There is atelectasis in the left lower lobe.", []),
    ("D02_has_finding", "finding", "Is there pleural effusion?",
     "Yes, there is pleural effusion.", ["There is a small left pleural effusion."]),
    ("D02_has_finding", "finding", "Is there pneumothorax?",
     "No, there is no pneumothorax.", []),
    ("D03_where_is_finding", "finding", "Where is the atelectasis?",
     "The atelectasis is in the left lower lobe.", []),
]
#: per-criterion quality codes: the position in the criterion's levels, worst first
EXTRACTION = {"region_extract_quality": 4, "entity_extract_quality": 2,
              "sentence_name_quality": 2, "change_quality": 3, "general_issue_level": 5,
              "localization_quality": 3}
FRONTAL = ("PA", "AP")
SUBSET = "A_frontal"


def qba_questions(subject: str, study: str, dicoms: list[str], *, start: int = 0) -> list:
    """The qa.json ``questions`` of one study (prefixed ids) over its frontal ``dicoms``."""
    out, seen = [], {}
    for k, (ident, strategy, question, main, details) in enumerate(QUESTIONS):
        seen[ident] = seen.get(ident, 0) + 1
        box = {d: {"image_id": d, "localization_reference_ids": ["left lung"],
                   "bboxes": [[136.0, 402.0, 898.0, 1678.0]], "instance_mask_ids": ["left lung"],
                   "missing_localization": [], "is_fallback": False, "localization_quality": 4}
               for d in dicoms}

        def answer(aid, kind, text, level=0, subs=()):
            return {"answer_id": aid, "answer_type": kind, "answer_level": level, "text": text,
                    "name_tag": text.rstrip("."), "laterality": "left", "regions": ["left lung"],
                    "obs_entities": ["pleural effusion"], "positiveness": "pos",
                    "modifiers": [["severity", "small"]], "localization": box,
                    "sub_answers": list(subs), "from_report": True,
                    "extraction_quality": EXTRACTION,
                    "answer_quality": {"entailment": 6}}

        subs = [answer(2 + j, "details", d, level=1) for j, d in enumerate(details)]
        answers = [answer(1, "main_answer", main, subs=subs)]
        if k % 3 == 0:  # related information beside the main answer: not part of the answer
            answers.append(answer(9, "related_information", "The heart size is normal."))
        out.append({"question_id": f"{ident}_{seen[ident]:03d}",
                    "question_type": ident, "question_strategy": strategy,
                    "variables": {}, "obs_ids": ["O01"], "contains_report_answers": True,
                    "contains_template_answers": k % 2 == 1, "extraction_quality": EXTRACTION,
                    "question_img_localization_quality": {d: 4 for d in dicoms},
                    "question": question, "answers": answers,
                    "question_quality": {"question_clarity": 6}})
    return out


def write_metadata(folder: Path, rows: list[tuple], *, row_group_size: int | None = None
                   ) -> Path:
    """The three Parquet files from ``rows`` = ``(subject, study, question, dicoms, views)``
    (ids prefixed), each indexed by its level's ids as pandas writes them."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    q, qi, img, seen = [], [], [], set()
    for subject, study, question, dicoms, views in rows:
        q.append({"patient_id": subject, "study_id": study, "question_id": question["question_id"],
                  "question.question_type": question["question_type"],
                  "question.question_strategy": question["question_strategy"],
                  "question.contains_report_answers": question["contains_report_answers"],
                  "question.contains_template_answers": question["contains_template_answers"],
                  "question.num_answers": len(question["answers"]),
                  "question.quality.rating": 5 + len(q) % 2})
        for d, v in zip(dicoms, views):
            qi.append({"patient_id": subject, "study_id": study,
                       "question_id": question["question_id"], "image_id": d,
                       "question_img.has_bboxes": True,
                       "question_img.quality.localization_quality": 4})
            if d not in seen:
                seen.add(d)
                img.append({"patient_id": subject, "study_id": study, "image_id": d,
                            "image.view_position": v, "image.patient_orientation": "['L', 'F']",
                            "image.quality.localization_quality": 4})
    for name, table, index in (
            ("question_metadata", q, ["patient_id", "study_id", "question_id"]),
            ("question_image_metadata", qi, ["patient_id", "study_id", "question_id", "image_id"]),
            ("image_metadata", img, ["patient_id", "study_id", "image_id"])):
        pd.DataFrame(table).set_index(index).to_parquet(folder / f"{name}.parquet",
                                                        row_group_size=row_group_size)
    return folder


def write_mimic_ext_cxr_qba(root: str | Path, *, n_subjects: int = 6, seed: int = 0,
                            images: bool = True, member_prefix: str = "qa/") -> Path:
    """Write the replica under ``root`` (MIMIC-CXR-JPG's ``files/`` included) and return
    ``root``; qa.zip's members go under ``member_prefix`` (``""``: at the top)."""
    root = Path(write_mimic(root, n_subjects=n_subjects, seed=seed, images=images))
    export = root / "mimic-ext-cxr-qba" / "exports" / SUBSET
    export.mkdir(parents=True, exist_ok=True)
    rows = []
    with zipfile.ZipFile(export / "qa.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for s in studies(root):
            frontal = [(d, v) for d, v in zip(s["dicoms"], s["views"]) if v in FRONTAL]
            if not frontal:  # the exports leave out studies without a frontal image
                continue
            subject, study = f"p{s['subject']}", f"s{s['study']}"
            dicoms, views = [d for d, _ in frontal], [v for _, v in frontal]
            questions = qba_questions(subject, study, dicoms)
            z.writestr(f"{member_prefix}{subject[:3]}/{subject}/{study}.qa.json",
                       json.dumps({"patient_id": subject, "study_id": study,
                                   "questions": questions}, indent=1))
            rows += [(subject, study, q, dicoms, views) for q in questions]
    write_metadata(export / "metadata", rows)
    write_metadata(export / "metadata" / "q1M", rows[::2])
    used = {d for *_, dicoms, _ in rows for d in dicoms}  # the exports' frontal images only
    for jpg in (root / "files").rglob("*.jpg"):
        if jpg.stem not in used:
            jpg.unlink()
    return root


def write_export(export: str | Path, n_studies: int, *, seed: int = 0) -> Path:
    """A metadata-only export of ``n_studies`` synthetic studies (``len(QUESTIONS)``
    questions each over one or two frontal images; no image files) under ``export`` --
    ``qa.zip`` and ``metadata/`` -- for benchmarks at scale; returns the questions file."""
    import numpy as np

    export = Path(export)
    rng = np.random.default_rng(seed)
    rows = []
    export.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(export / "qa.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for k in range(n_studies):
            subject, study = f"p{10000000 + k // 3}", f"s{50000000 + k}"
            dicoms = ["-".join(f"{int(x):08x}" for x in rng.integers(0, 2**32, 5))
                      for _ in range(1 + k % 2)]
            views = list(FRONTAL[:len(dicoms)])
            questions = qba_questions(subject, study, dicoms)
            z.writestr(f"qa/{subject[:3]}/{subject}/{study}.qa.json", json.dumps(
                {"patient_id": subject, "study_id": study, "questions": questions}))
            rows += [(subject, study, q, dicoms, views) for q in questions]
    return write_metadata(export / "metadata", rows, row_group_size=1 << 17) / \
        "question_metadata.parquet"


@register_fake("mimic_ext_cxr_qba")
def make(root: Path) -> dict:
    """Contract-suite maker: the A_frontal export's q1M subset over a six-patient replica."""
    base = write_mimic_ext_cxr_qba(root)
    return {"base_image_dir": base, "csv_path": base / "mimic-ext-cxr-qba" / "exports" /
            SUBSET / "metadata" / "q1M" / "question_metadata.parquet"}
