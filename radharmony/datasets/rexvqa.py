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

from itertools import accumulate, chain, repeat
from operator import getitem, itemgetter
from typing import ClassVar

from ..errors import MetadataError
from ..spec import Identity
from ..table.harmonizer import Inputs
from ..table.read_json import decoded_all, entry_columns, extend_columns, iter_json_entries
from ..vqa.harmonizer import BaseVQAHarmonizer
from ..vqa.table import TAXONOMY, key_images, normalise_options, option_text, vqa_spec
from .rexgradient import (ACCESS as REXGRADIENT_ACCESS, EXTRA_OUTPUT_COLS, SECTIONS, VIEW_MAP,
                          raw_views, relative_paths, study_fields)
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
ACCESS = ("HuggingFace rajpurkarlab/ReXVQA (gated) for the questions; images from "
          + REXGRADIENT_ACCESS)
#: the keys read from every question
QUESTION_FIELDS = ("question", "options", "correct_answer", "correct_answer_explanation",
                   "task_name", "category", "subcategory", "StudyInstanceUid", "PatientID")
#: the study's keys, copied into each of its questions: read once per study (its first
#: question), the other copies skipped unparsed
STUDY_FIELDS = ("ImagePath", "ImageViewPosition", "AccessionNumber", "PatientSex",
                "PatientAge", "StudyDate", *(f for _, f in SECTIONS))


def split_spec(split: str):
    return vqa_spec(f"rexvqa_{split}", f"ReXVQA ({split})",
                    metadata_files=(f"{split}_vqa_data.json",),
                    extra=(*TAXONOMY, *EXTRA_OUTPUT_COLS), column_types={"study_date": "Int64"},
                    age_col="patient_age", age_format="auto", sex_col="patient_sex",
                    outputs=frozenset({"report"}), view_map=VIEW_MAP, access=ACCESS,
                    identity=Identity("rexgradient"),  # ReXGradient's PatientIDs and images
                    expected_note="the release gives about 696,000 questions over all three "
                                  "splits, rounded, and no exact count per split")


def _letter(value) -> str | None:
    return value.strip().upper() if isinstance(value, str) and value.strip() else None


class ReXVQARaw:
    """What ``read`` returns: the question ids, the question fields as columns
    (:data:`QUESTION_FIELDS`) and the study fields as columns (:data:`STUDY_FIELDS`, one value
    per study, from its first question), with each study's uid and first question id under
    ``"uid"`` and ``"question"``. Built a chunk of questions at a time (:meth:`add`)."""

    def __init__(self):
        self.ids: list = []
        self.fields: dict = {f: [] for f in QUESTION_FIELDS}
        self.studies: dict = {f: [] for f in (*STUDY_FIELDS, "uid", "question")}

    @classmethod
    def of(cls, questions: dict, *, source: str = "metadata") -> "ReXVQARaw":
        """From the question file as parsed (dicts) or as :func:`load_json` records."""
        return cls().add(questions, source=source).done()

    def add(self, questions: dict, *, source: str = "metadata") -> "ReXVQARaw":
        """Append a chunk of questions (the next of the file); its raw study fields are parsed
        here, so the chunk's buffer may be reused afterwards."""
        start, entries = len(self.ids), list(questions.values())
        self.ids += questions
        extend_columns(self.fields, entries, QUESTION_FIELDS)
        uids = self.fields["StudyInstanceUid"][start:]
        if uids and set(map(type, uids)) != {str}:
            i = next(i for i, u in enumerate(uids) if type(u) is not str)
            raise MetadataError(f"{source}: question {self.ids[start + i]!r} has no "
                                "StudyInstanceUid", expected="the study's StudyInstanceUid "
                                "(text)", found=repr(uids[i])[:80],
                                fix="re-download the question file")
        at = _first_of_each(uids)  # each study's first question in the chunk
        cols = entry_columns([entries[i] for i in at], STUDY_FIELDS)
        values = decoded_all([v for f in STUDY_FIELDS for v in cols[f]])  # one call
        n, studies = len(at), self.studies
        for k, f in enumerate(STUDY_FIELDS):
            studies[f] += values[k * n:(k + 1) * n]
        studies["uid"] += [uids[i] for i in at]
        studies["question"] += [self.ids[start + i] for i in at]
        return self

    def done(self) -> "ReXVQARaw":
        """After the last chunk: a study whose questions span chunks keeps its first's fields."""
        uids = self.studies["uid"]
        if len(set(uids)) != len(uids):
            keep = _first_of_each(uids)
            self.studies = {f: [v[i] for i in keep] for f, v in self.studies.items()}
        return self


def _first_of_each(values: list) -> list[int]:
    """The index of each distinct value's first occurrence, in order of first occurrence."""
    first = dict(zip(reversed(values), range(len(values) - 1, -1, -1)))  # last write: first
    return list(map(first.__getitem__, dict.fromkeys(values)))


# -- harmonizer -----------------------------------------------------------------------------------
class _ReXVQAHarmonizer(BaseVQAHarmonizer):
    split: ClassVar[str]

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return f"the ReXVQA {self.split} question file ({self.split}_vqa_data.json)"

    def read(self, inputs: Inputs) -> ReXVQARaw:
        """The question file: question fields as columns, study fields once per study, read
        a chunk of questions at a time (the file's bytes are never all held); a repeated
        question id is refused naming it."""
        out = ReXVQARaw()
        for part in iter_json_entries(inputs.metadata, reuse_buffer=True,
                                      entry_fields=QUESTION_FIELDS + STUDY_FIELDS,
                                      raw_fields=STUDY_FIELDS):
            if not isinstance(part, dict):
                raise MetadataError(f"{inputs.metadata} has the wrong top-level type",
                                    expected="a JSON object keyed by question id",
                                    found=type(part).__name__,
                                    fix="re-download the question file")
            out.add(part, source=str(inputs.metadata))  # its raw fields parsed
            del part  # (before the next chunk is read into the same buffer)
        out.done()
        if len(set(out.ids)) != len(out.ids):
            seen: set = set()
            again = next(q for q in out.ids if q in seen or seen.add(q))
            raise MetadataError(f"{inputs.metadata}: a JSON object repeats a key",
                                expected="each question id once", found=f"question id "
                                f"{again!r} twice", fix="merge or rename the repeated question")
        return out

    @classmethod
    def columns(cls, raw, *, source: str) -> dict[str, list]:
        """From ``read``'s result or the question file as parsed (a dict). A study's image
        list, views, key image and study fields are built once and shared by its questions."""
        if isinstance(raw, dict):
            raw = ReXVQARaw.of(raw, source=source)
        field, studies = raw.fields.__getitem__, raw.studies
        paths, views = _images(studies["question"], studies["ImagePath"],
                               studies["ImageViewPosition"], source)
        study = study_fields(studies.__getitem__, studies["question"], source=source)
        keys = key_images(paths, views, VIEW_MAP)
        pos = {uid: j for j, uid in enumerate(studies["uid"])}
        at = list(map(pos.__getitem__, field("StudyInstanceUid")))
        fast = _as_shipped(field("options"), field("correct_answer"))
        options, letters, answers = fast or ([], [], [])
        for qid, opts, letter in zip(raw.ids, field("options"), field("correct_answer")) \
                if fast is None else ():
            # as shipped ("A. ..."): kept (the schema checks every option); else normalised
            o = opts if type(opts) is list and opts and type(opts[0]) is str and \
                opts[0][:3] == "A. " else normalise_options(opts, where=f"{source}: question "
                                                                        f"{qid!r}")
            letter = letter if type(letter) is str and len(letter) == 1 and letter.isupper() \
                else _letter(letter)
            options.append(o)
            letters.append(letter)
            k = ord(letter) - 65 if letter and len(letter) == 1 else -1  # "B" -> o[1] ...
            answers.append(o[k][3:] if 0 <= k < len(o) and o[k][:3] == letter + ". " else
                           option_text(o, letter) if letter else None)
        take = _taker(at)
        return {"question_id": raw.ids, "patient_id": field("PatientID"),
                "study_id": field("StudyInstanceUid"),
                "image_paths": take(paths), "image_path": take(keys[0]),
                "view_position": take(keys[1]), "view_positions": take(views),
                "question": field("question"),
                "answer": answers, "answer_format": ["mcq"] * len(at), "options": options,
                "answer_letter": letters, "explanation": field("correct_answer_explanation"),
                "task": field("task_name"), "category": field("category"),
                "subcategory": field("subcategory"), **{c: take(v) for c, v in study.items()}}


_INDEX = {chr(65 + k): k for k in range(26)}
_PREFIX = {c: f"{c}. " for c in _INDEX}


def _as_shipped(options, letters) -> tuple[list, list, list] | None:
    """``(options, letters, answers)`` at C speed when every question is as shipped (options
    ``"A. ..."`` lists, its letter one of them, the option at the letter's place starting
    ``"<letter>. "``); None when one may not be (the per-question loop then decides)."""
    try:
        if not options or set(map(type, options)) != {list} or \
                not set(letters) <= _INDEX.keys() or \
                not all(map(str.startswith, map(itemgetter(0), options), repeat("A. "))):
            return None
        chosen = list(map(getitem, options, map(_INDEX.__getitem__, letters)))
        if not all(map(str.startswith, chosen, map(_PREFIX.__getitem__, letters))):
            return None
    except (TypeError, IndexError):
        return None
    return list(options), list(letters), list(map(itemgetter(slice(3, None)), chosen))


def _taker(at: list):
    """``take(values)`` = ``[values[j] for j in at]``, at C speed."""
    if len(at) < 2:
        return lambda values: [values[j] for j in at]
    get = itemgetter(*at)
    return lambda values: list(get(values))


def _images(qids: list, paths: list, views: list, source: str) -> tuple[list, list]:
    """Each study's ``(image paths relative to deid_png/, raw views)``, checked; whole
    columns at once when every study has a list of text paths and as many views."""
    lens = list(map(len, paths)) if set(map(type, paths)) <= {list} else None
    if lens is not None and all(lens) and set(map(type, views)) <= {list} and \
            list(map(len, views)) == lens:
        flat, flat_views = relative_paths(list(chain.from_iterable(paths))), \
            raw_views(list(chain.from_iterable(views)))
        ends = list(accumulate(lens))
        return list(map(flat.__getitem__, map(slice, [0, *ends[:-1]], ends))), \
            list(map(flat_views.__getitem__, map(slice, [0, *ends[:-1]], ends)))
    pairs = [_one_study_images(q, p, v, source) for q, p, v in zip(qids, paths, views)]
    return [p for p, _ in pairs], [v for _, v in pairs]


def _one_study_images(qid, p, v, source: str) -> tuple[list, list]:
    """A question's ``(image paths relative to deid_png/, raw views)``, checked."""
    if isinstance(p, str):
        p = [p]
    if not isinstance(p, list) or not p:
        raise MetadataError(f"{source}: question {qid!r} has no ImagePath list",
                            expected="a non-empty list of ../deid_png/... paths",
                            found=repr(p)[:80], fix="re-download the question file")
    v = [None] * len(p) if v is None else v
    if not isinstance(v, list) or len(v) != len(p):
        raise MetadataError(f"{source}: question {qid!r} has {len(p)} ImagePath values but "
                            "ImageViewPosition does not match",
                            expected=f"{len(p)} view positions", found=repr(v)[:80],
                            fix="re-download the question file")
    return relative_paths(p), raw_views(v)


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


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..vqa.dataset import VQADataset

    class ReXVQATrainDataset(VQADataset):
        """ReXVQA train; ``base_image_dir`` is ReXGradient's extracted ``deid_png/``."""
        harmonizer_class = ReXVQATrainHarmonizer

    class ReXVQAValidDataset(VQADataset):
        """ReXVQA validation; ``base_image_dir`` is ReXGradient's extracted ``deid_png/``."""
        harmonizer_class = ReXVQAValidHarmonizer

    class ReXVQATestDataset(VQADataset):
        """ReXVQA test; ``base_image_dir`` is ReXGradient's extracted ``deid_png/``."""
        harmonizer_class = ReXVQATestHarmonizer

    return ReXVQATrainDataset, ReXVQAValidDataset, ReXVQATestDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = [f"ReXVQA{s}{k}" for s in ("Train", "Valid", "Test") for k in ("Harmonizer", "Dataset")]
