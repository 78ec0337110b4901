"""MIMIC-Ext-CXR-QBA (Müller et al., PhysioNet 1.0.0): 42M template questions with
full-sentence, hierarchical answers over MIMIC-CXR, read from its Parquet exports.

Source of truth: an export's metadata folder, e.g. ``exports/A_frontal/metadata/q1M/``
(``A_frontal``: 7.5M fine-tuning grade questions, ``B_frontal``: 31M pre-training grade;
sub-folders ``Ap``, ``App``, ``q1M``, ... are subsets), holding
``question_metadata.parquet`` (one row per question: ``patient_id`` ``p10000032``,
``study_id`` ``s50414267``, ``question_id`` ``D02_has_finding_001`` -- unique within a study
only -- and ``question.question_type`` (the type identifier, ``D02_has_finding``),
``question.question_strategy``, ``question.quality.rating`` (a raw code)),
``question_image_metadata.parquet`` (one row per question and image: ``image_id`` is the
MIMIC dicom id) and ``image_metadata.parquet`` (the view, in a column named
``*.view_position``); pandas wrote each with the ids as its index, so they come last. The
text is in the export's ``qa.zip`` (found up to three folders above), one
``[qa/]p1x/p1xxxxxxx/sxxxxxxxx.qa.json`` per study. The images are MIMIC-CXR-JPG's:
``base_image_dir`` is its root (the folder holding ``files/``). The release's own top-level
``metadata/`` folder (every question, frontal or not) reads the same way.

One row per question. ``question_id`` is ``<study>_<question id>``
(``s50414267_D02_has_finding_001``); ``patient_id`` / ``study_id`` drop the ``p`` / ``s``;
the images are the question's rows of ``question_image_metadata`` in file order; ``answer``
joins the texts of its top-level main answers (details and related information stay in
qa.zip); ``is_*`` / ``has_*`` questions (``B03_is_abnormal``, ``D02_has_finding``) are
closed, the others open; ``task`` is the question strategy, ``category`` the question type
as shipped, ``quality`` the raw rating code (``quality_mappings.csv`` of the release names
the grades). ``split`` is
the file's ``split`` column where it has one, else MIMIC-CXR-JPG's official split
(``mimic-cxr-2.0.0-split.csv.gz`` near ``base_image_dir``), else the patient-level split.

Bounded memory: only the id and tag columns are read, a record batch at a time, repeated ids
dictionary-encoded (:func:`radharmony.table.read_parquet.read_parquet`); qa.zip is read one
study's JSON at a time, keeping two texts per question; questions of a study that share
their images share one list.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import SHOW, MetadataError, MetadataNotFoundError, RowsDroppedWarning
from ..spec import Identity
from ..table.harmonizer import Inputs
from ..table.locate import find_optional
from ..table.read_csv import read_table
from ..table.read_parquet import column_values, parquet_names, read_parquet
from ..vqa.harmonizer import BaseVQAHarmonizer
from ..vqa.table import vqa_spec
from .mimic import SIDE_FILES, SPLIT_COLUMNS, SPLIT_MAP, VIEW_MAP
from .torch_side import torch_side

try:  # qa.json read as records of the few fields used (the boxes are skipped unparsed)
    import msgspec

    class _Answer(msgspec.Struct):
        answer_type: str | None = None
        text: str | None = None

    class _Question(msgspec.Struct):
        question_id: str
        question: str | None = None
        answers: list[_Answer] = []

    class _Study(msgspec.Struct):
        questions: list[_Question] = []

    _decode = msgspec.json.Decoder(_Study).decode
    _DecodeError: type = msgspec.DecodeError
except ImportError:  # pragma: no cover - msgspec is an optional speed-up
    msgspec = None
    _DecodeError = ValueError

QUESTIONS_FILE = "question_metadata.parquet"
SIDE = {"question_images": "question_image_metadata.parquet",
        "images": "image_metadata.parquet"}
QA_ZIP = "qa.zip"
IDS = ("patient_id", "study_id", "question_id")
#: optional question columns: harmonized name -> the shipped name (else the column whose last
#: dotted part matches, the level prefix not being pinned for every column)
TAGS = {"category": "question.question_type", "task": "question.question_strategy",
        "quality": "question.quality.rating", "split_raw": "split"}
SPLITS = {**SPLIT_MAP, "val": "valid", "valid": "valid"}
SPEC = vqa_spec("mimic_ext_cxr_qba", "MIMIC-Ext-CXR-QBA", metadata_files=(QUESTIONS_FILE,),
                identity=Identity("mimic_cxr_jpg"),  # MIMIC subject ids
                extra=("task", "category", "quality", "split", "split_raw"), view_map=VIEW_MAP,
                expected={"questions": 42_172_827, "studies": 227_239, "patients": 65_317},
                access="PhysioNet mimic-ext-cxr-qba 1.0.0, credentialed access (images: "
                       "mimic-cxr-jpg)")


def _tag(names: list[str], name: str) -> str | None:
    """The shipped column ``name``, else the one whose last dotted part is ``name``'s."""
    last = name.rsplit(".", 1)[-1]
    return name if name in names else \
        next((n for n in names if n.rsplit(".", 1)[-1] == last and n not in IDS), None)


def _text(value) -> str:
    """A rating as text: ``5`` (also when nulls made the column float) -> ``"5"``."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _study_questions(data: bytes) -> list[tuple[str, str | None, list]]:
    """``(question_id, question, [(answer_type, text), ...])`` of one qa.json."""
    if msgspec is not None:
        return [(q.question_id, q.question, [(a.answer_type, a.text) for a in q.answers])
                for q in _decode(data).questions]
    return [(q["question_id"], q.get("question"), [(a.get("answer_type"), a.get("text"))
                                                   for a in q.get("answers") or ()])
            for q in json.loads(data).get("questions") or ()]


def _answer(answers: list) -> str | None:
    """The texts of the top-level main answers (all top-level texts when none is marked)."""
    main = [t for kind, t in answers if kind == "main_answer" and t] or \
        [t for _, t in answers if t]
    return " ".join(main) or None


def read_qa_text(path: Path, studies, question_ids) -> tuple[list, list]:
    """``(question texts, answer texts)`` of the questions named by the Arrow columns
    ``studies`` / ``question_ids`` (None where qa.zip lacks them): each study's qa.json read
    once, in study order, keeping two texts per question (repeated questions share one)."""
    from tqdm.auto import tqdm

    study = pd.Categorical(studies.to_pandas())
    qids = question_ids.to_pylist()
    questions, answers, same = [None] * len(qids), [None] * len(qids), {}
    order = np.argsort(study.codes, kind="stable")
    bounds = np.searchsorted(study.codes[order], np.arange(len(study.categories) + 1))
    try:
        z = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise MetadataError(f"{path} cannot be opened as a zip", expected="the export's qa.zip",
                            found=f"{type(exc).__name__}: {exc}", fix="download it again") from None
    with z:
        member = {n.rsplit("/", 1)[-1][:-len(".qa.json")]: n for n in z.namelist()
                  if n.endswith(".qa.json")}
        for k, name in enumerate(tqdm(study.categories, unit="study", desc="reading qa.zip",
                                      leave=False, disable=len(study.categories) < 5000)):
            if name not in member:
                continue
            try:
                found = {q: (t, a) for q, t, a in _study_questions(z.read(member[name]))}
            except (_DecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
                raise MetadataError(f"{path}: {member[name]} is not a study's questions",
                                    expected="{patient_id, study_id, questions: [...]}",
                                    found=f"{type(exc).__name__}: {exc}",
                                    fix="download qa.zip again") from None
            for i in order[bounds[k]:bounds[k + 1]].tolist():
                hit = found.get(qids[i])
                if hit is not None:
                    questions[i] = same.setdefault(hit[0], hit[0])
                    answers[i] = _answer(hit[1])
    return questions, answers


def _closed(question_type) -> str:
    name = str(question_type)
    name = name.split("_", 1)[1] if name[:1].isupper() and "_" in name else name
    return "closed" if name.startswith(("is_", "has_")) else "open"


class MIMICExtCXRQBAHarmonizer(BaseVQAHarmonizer):
    """MIMIC-Ext-CXR-QBA: 42,172,827 questions over 227,239 MIMIC-CXR studies."""

    spec = SPEC
    metadata_description = "the MIMIC-Ext-CXR-QBA question metadata (question_metadata.parquet)"

    def inputs(self, path: Path) -> Inputs:
        files = {role: path.with_name(name) if path.with_name(name).is_file() else None
                 for role, name in SIDE.items()}
        files["qa"] = find_optional((QA_ZIP,), path.parent)
        files["split"] = None if self.base_image_dir is None else \
            find_optional(SIDE_FILES["split"], self.base_image_dir)
        return Inputs(path, files)

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        for role in ("question_images", "qa"):
            if inputs.file(role) is None:
                name = SIDE.get(role, QA_ZIP)
                near = [path.parent, *path.parents[1:4]] if role == "qa" else [path.parent]
                raise MetadataNotFoundError(f"{name} of the export", [d / name for d in near],
                                            fix=f"keep {name} of the same export beside "
                                                f"{path.name}" if role != "qa" else
                                                "keep the export's qa.zip in its folder "
                                                "(exports/<subset>/qa.zip)")
        names = parquet_names(path, description=self.metadata_description)
        tags = {k: _tag(names, v) for k, v in TAGS.items()}
        shipped = [c for c in tags.values() if c]
        questions = read_parquet(path, [*IDS, *shipped], description=self.metadata_description,
                                 dictionary=["patient_id", "study_id", *shipped])
        images = read_parquet(inputs.file("question_images"), ["study_id", "question_id",
                                                               "image_id"],
                              description=SIDE["question_images"],
                              dictionary=["study_id", "image_id"])
        views = None
        if inputs.file("images") is not None:
            col = _tag(parquet_names(inputs.file("images"), description=SIDE["images"]),
                       "view_position")
            if col is not None:
                t = read_parquet(inputs.file("images"), ["image_id", col],
                                 description=SIDE["images"])
                views = dict(zip(t.column(0).to_pylist(), t.column(1).to_pylist()))
        split = inputs.file("split")
        return {"questions": questions, "tags": tags, "images": images, "views": views,
                "text": read_qa_text(inputs.file("qa"), questions.column("study_id"),
                                     questions.column("question_id")),
                "split": None if split is None else read_table(
                    split, description=SIDE_FILES["split"][0], columns=SPLIT_COLUMNS,
                    dtype=str)}

    @classmethod
    def columns(cls, raw: dict, *, source: str) -> dict[str, list]:
        q, tags, qi = raw["questions"], raw["tags"], raw["images"]
        n = q.num_rows
        study = column_values(q.column("study_id"))
        qid = [f"{s}_{x}" for s, x in zip(study, q.column("question_id").to_pylist())]
        paths, views = cls._images(q, qi, study, raw["views"] or {})
        out = {c: column_values(q.column(tags[c])) if tags[c] else [None] * n
               for c in ("task", "category", "split_raw")}
        if tags["quality"]:
            out["quality"] = column_values(q.column(tags["quality"]), _text)
        else:
            out["quality"] = [None] * n
        if tags["split_raw"] is None and raw["split"] is not None:
            of = dict(zip(raw["split"]["study_id"], raw["split"]["split"]))
            out["split_raw"] = column_values(q.column("study_id"), lambda s: of.get(s.removeprefix("s")))
        questions, answers = raw["text"]
        missing = [i for i, t in enumerate(questions) if t is None and paths[i]]
        if missing:
            warnings.warn(f"{source}: {len(missing)} of {n} questions have no text in qa.zip "
                          f"(kept, question None); first: {[qid[i] for i in missing[:SHOW]]}",
                          RowsDroppedWarning, stacklevel=2)
        cols = {"question_id": qid,
                "patient_id": column_values(q.column("patient_id"), lambda p: p.removeprefix("p")),
                "study_id": column_values(q.column("study_id"), lambda s: s.removeprefix("s")),
                "image_paths": paths, "view_positions": views,
                "question": questions, "answer": answers,
                "answer_format": column_values(q.column(tags["category"]), _closed)
                if tags["category"] else ["open"] * n,
                "options": [[] for _ in range(n)], "answer_letter": [None] * n,
                "explanation": [None] * n, **out,
                "split": [SPLITS.get(s.strip().lower()) if isinstance(s, str) else None
                          for s in out["split_raw"]]}
        imageless = [i for i, ps in enumerate(paths) if not ps]
        if not imageless:
            return cols
        warnings.warn(f"{source}: {len(imageless)} of {n} questions have no row in "
                      f"{SIDE['question_images']} (no image) and were dropped; first: "
                      f"{[qid[i] for i in imageless[:SHOW]]}", RowsDroppedWarning, stacklevel=2)
        keep = np.ones(n, bool)
        keep[imageless] = False
        return {c: np.asarray(v, dtype=object)[keep].tolist() if c not in
                ("image_paths", "view_positions", "options") else
                [x for x, k in zip(v, keep) if k] for c, v in cols.items()}

    @staticmethod
    def _images(q, qi, study: list, views: dict) -> tuple[list, list]:
        """Each question's image paths and views, in ``question_image_metadata``'s order; the
        questions of a study with the same images share one list of each."""
        import pyarrow.compute as pc

        def keys(t):
            return pc.binary_join_element_wise(t.column("study_id").cast("string"),
                                               t.column("question_id").cast("string"), "/")

        pos = pc.index_in(keys(qi), value_set=keys(q)).to_numpy(zero_copy_only=False)
        pos = np.nan_to_num(pos.astype(float), nan=-1).astype(np.int64)
        order = np.argsort(pos, kind="stable")
        bounds = np.searchsorted(pos[order], np.arange(q.num_rows + 1))
        image = pd.Categorical(qi.column("image_id").to_pandas())
        names, codes = image.categories.tolist(), image.codes[order]
        patients = q.column("patient_id").to_pylist()
        paths, view_lists, shared = [], [], {}
        for i in range(q.num_rows):
            ids = tuple(codes[bounds[i]:bounds[i + 1]].tolist())
            key = (study[i], ids)
            hit = shared.get(key)
            if hit is None:
                p = patients[i]
                hit = shared[key] = (
                    [f"files/{p[:3]}/{p}/{study[i]}/{names[c]}.jpg" for c in ids],
                    [views.get(names[c]) for c in ids])
            paths.append(hit[0])
            view_lists.append(hit[1])
        return paths, view_lists


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..vqa.dataset import VQADataset

    class MIMICExtCXRQBADataset(VQADataset):
        """MIMIC-Ext-CXR-QBA; ``base_image_dir`` is MIMIC-CXR-JPG's root (holding ``files/``),
        ``csv_path`` an export's ``question_metadata.parquet``."""
        harmonizer_class = MIMICExtCXRQBAHarmonizer

    return MIMICExtCXRQBADataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["MIMICExtCXRQBADataset", "MIMICExtCXRQBAHarmonizer"]
