"""Questions on a volume's labels other than findings, one record per (volume, question):

* ``ct_locate_abnormality``: RAD-ChestCT's "where is X?" from its abnormality x location
  matrix: one question per present abnormality, the target its locations (``other_location``
  alone locates nothing: not asked).
* ``ct_exam_question``: exam triage questions declared by the source columns they read
  (:data:`EXAM_QUESTIONS`: RSNA PE's exam labels, the RSNA 2023 abdominal trauma organ grades).
* ``ct_level_findings``: vertebra / disc levels with a finding (:data:`LEVEL_GROUPS`: cervical
  fractures C1-C7, lumbar stenosis per disc level), from the columns a source declares.

A question whose cells are unknown (NaN) is not asked; a volume with none is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import fields_json
from .base import Draft, Rendered, Task, register_capability, register_task
from .volumes import volume_level

LOCATE_PROMPTS = ("Where is the {abnormality} in this chest CT?",
                  "Locate the {abnormality} in this CT volume.",
                  "In which locations does this chest CT show {abnormality}?")
EXAM_PROMPTS = ("{question}", "{question}\nAnswer with one of: {choices}.",
                "Look at this CT volume. {question}")
LEVEL_PROMPTS = ("At which levels is there {finding}?",
                 "Name the {levels} levels with {finding} in this scan.",
                 "List the levels showing {finding}, or answer none.")


# -- where is X? (RAD-ChestCT) --------------------------------------------------------------
register_capability("locations", lambda spec, kw: volume_level(spec) and
                    "abnormality_locations" in spec.columns,
                    meaning="an abnormality x location matrix (RAD-ChestCT)")


def _words(name: str) -> str:
    return name.replace("_", " ")


def _locate(ctx) -> Draft:
    cells = ctx.table["abnormality_locations"].tolist()
    row, ab, locs = [], [], []
    for r, pairs in enumerate(cells):
        by: dict = {}
        for a, loc in pairs or ():
            by.setdefault(a, []).append(loc)
        for a in sorted(by):
            located = sorted(x for x in by[a] if x != "other_location")
            if located:
                row.append(r)
                ab.append(a)
                locs.append(located)
    row_a = np.asarray(row, np.int64)
    ids = ctx.units("image").ids
    none = len(cells) - len(set(row))

    def render(j: np.ndarray) -> Rendered:
        js = j.tolist()
        return Rendered([", ".join(map(_words, locs[k])) for k in js],
                        {"abnormality": [_words(ab[k]) for k in js]},
                        [fields_json({"abnormality": ab[k], "locations": locs[k]})
                         for k in js])

    return Draft("image", row_a, render,
                 item=lambda j: [f"{ids[row_a[k]]}|{ab[k]}" for k in j.tolist()],
                 skipped={"no_located_abnormality": none} if none else {})


register_task(Task(name="ct_locate_abnormality", family="vqa", needs=("volumes", "locations"),
                   prompts=LOCATE_PROMPTS, build=_locate, slots=("abnormality",),
                   description="where is X? an abnormality's locations in a CT volume "
                               "(RAD-ChestCT)"))


# -- exam triage questions ---------------------------------------------------------------------
@dataclass(frozen=True)
class ExamQuestion:
    """A closed question on a volume's exam labels: ``columns`` (0 / 1 / NaN cells) and the
    ``answers`` when each is 1 (in order; the first column at 1 answers). A single column is a
    yes / no question. ``when``: a column that must be 1 for the question to be asked."""

    id: str
    question: str
    columns: tuple
    answers: tuple = ("yes",)
    when: str | None = None

    @property
    def choices(self) -> tuple:
        return ("yes", "no") if len(self.columns) == 1 else self.answers


#: the questions, by the columns a source names (RSNA PE's exam labels; the RSNA 2023 abdominal
#: trauma organ one-hot columns ``<organ>_healthy / _low / _high``)
EXAM_QUESTIONS = (
    ExamQuestion("pe_present", "Is there a pulmonary embolism?", ("pe_positive_exam",)),
    ExamQuestion("pe_chronicity", "Is the pulmonary embolism acute, chronic, or acute and "
                 "chronic?", ("chronic_pe", "acute_and_chronic_pe", "pe_positive_exam"),
                 ("chronic", "acute and chronic", "acute"), when="pe_positive_exam"),
    ExamQuestion("pe_central", "Is the pulmonary embolism central?", ("central_pe",),
                 when="pe_positive_exam"),
    ExamQuestion("pe_left", "Is there pulmonary embolism on the left?", ("leftsided_pe",),
                 when="pe_positive_exam"),
    ExamQuestion("pe_right", "Is there pulmonary embolism on the right?", ("rightsided_pe",),
                 when="pe_positive_exam"),
    ExamQuestion("rv_lv", "Is the right-to-left ventricular diameter ratio 1 or more?",
                 ("rv_lv_ratio_gte_1",), when="pe_positive_exam"),
    *(ExamQuestion(f"{organ}_injury", f"Grade the {organ} injury: none, low grade or high "
                   "grade?", (f"{organ}_healthy", f"{organ}_low", f"{organ}_high"),
                   ("none", "low grade", "high grade")) for organ in ("liver", "spleen",
                                                                    "kidney")),
    ExamQuestion("bowel_injury", "Is there a bowel injury?", ("bowel_injury",)),
    ExamQuestion("extravasation", "Is there active extravasation?",
                 ("extravasation_injury",)),
)


def _questions_of(spec) -> list:
    cols = set(spec.columns)
    return [q for q in EXAM_QUESTIONS if set(q.columns) <= cols and
            (q.when is None or q.when in cols)]


register_capability("exam_labels", lambda spec, kw: volume_level(spec) and
                    bool(_questions_of(spec)),
                    meaning="exam-level labels with triage questions (tasks.volumes."
                            "EXAM_QUESTIONS' columns)")


def _asked(ctx, rows: list, asked: list, answers: list, *, target, slots: dict, fields,
           none_reason: str) -> Draft:
    """The draft of questions ``asked[k]`` (an :class:`ExamQuestion` or a :class:`LevelGroup`)
    on table rows ``rows[k]`` answered ``answers[k]``, a volume's questions together:
    ``target(answer)``, ``slots`` (name -> ``f(asked)``), ``fields(asked, answer)``."""
    order = np.argsort(np.asarray(rows, np.int64), kind="stable")
    row = np.asarray(rows, np.int64)[order]
    asked, answers = [asked[k] for k in order], [answers[k] for k in order]
    ids = ctx.units("image").ids
    none = len(ctx.table) - len(np.unique(row))

    def render(j: np.ndarray) -> Rendered:
        js = j.tolist()
        return Rendered([target(answers[k]) for k in js],
                        {name: [f(asked[k]) for k in js] for name, f in slots.items()},
                        [fields_json(fields(asked[k], answers[k])) for k in js])

    return Draft("image", row, render,
                 item=lambda j: [f"{ids[row[k]]}|{asked[k].id}" for k in j.tolist()],
                 skipped={none_reason: int(none)} if none else {})


def _exam(ctx) -> Draft:
    t = ctx.table
    rows, qs, answers = [], [], []
    for q in _questions_of(ctx.spec):
        v = np.column_stack([t[c].to_numpy(np.float64, na_value=np.nan) for c in q.columns])
        ok = ~np.isnan(v).any(axis=1)
        if q.when is not None:
            ok &= t[q.when].to_numpy(np.float64, na_value=np.nan) == 1.0
        if len(q.columns) == 1:
            a = np.where(v[:, 0] == 1.0, "yes", "no")
        else:
            hit = v == 1.0
            ok &= hit.any(axis=1)
            a = np.asarray(q.answers, dtype=object)[hit.argmax(axis=1)]
        r = np.flatnonzero(ok)
        rows += r.tolist()
        qs += [q] * len(r)
        answers += a[r].tolist()
    return _asked(ctx, rows, qs, answers, target=str,
                  slots={"question": lambda q: q.question,
                         "choices": lambda q: ", ".join(q.choices)},
                  fields=lambda q, a: {"question_id": q.id, "answer": a,
                                       "choices": list(q.choices)},
                  none_reason="no_exam_label")


register_task(Task(name="ct_exam_question", family="vqa", needs=("volumes", "exam_labels"),
                   prompts=EXAM_PROMPTS, build=_exam, slots=("question", "choices"),
                   description="exam triage questions (PE presence, side, chronicity, RV/LV; "
                               "trauma organ grades)"))


# -- vertebra / disc levels --------------------------------------------------------------------
@dataclass(frozen=True)
class LevelGroup:
    """Levels with a finding: ``columns`` (one per level, in anatomical order), ``levels``
    (their names), a cell ``positive`` when it is among ``positive`` (numbers or text)."""

    id: str
    finding: str
    kind: str
    columns: tuple
    levels: tuple
    positive: tuple = (1.0,)


_DISCS = ("l1_l2", "l2_l3", "l3_l4", "l4_l5", "l5_s1")
#: the level groups, by the columns a source names (RSNA 2022 cervical fracture ``C1``-``C7``;
#: RSNA 2024 lumbar ``<condition>_<level>`` severities ``Normal/Mild`` / ``Moderate`` /
#: ``Severe``)
LEVEL_GROUPS = (
    LevelGroup("cervical_fracture", "a fracture", "vertebra",
               tuple(f"C{k}" for k in range(1, 8)), tuple(f"C{k}" for k in range(1, 8))),
    *(LevelGroup(f"{cond}_moderate_or_severe", f"moderate or severe {_words(cond)}", "disc",
                 tuple(f"{cond}_{d}" for d in _DISCS), tuple(d.upper().replace("_", "-")
                                                              for d in _DISCS),
                 ("Moderate", "Severe"))
      for cond in ("spinal_canal_stenosis", "left_neural_foraminal_narrowing",
                   "right_neural_foraminal_narrowing", "left_subarticular_stenosis",
                   "right_subarticular_stenosis")),
)


def _groups_of(spec) -> list:
    cols = set(spec.columns)
    return [g for g in LEVEL_GROUPS if set(g.columns) <= cols]


register_capability("levels", lambda spec, kw: volume_level(spec) and bool(_groups_of(spec)),
                    meaning="per-level labels of the spine (tasks.volumes.LEVEL_GROUPS' "
                            "columns)")


def _levels(ctx) -> Draft:
    t = ctx.table
    rows, gs, found = [], [], []
    for g in _groups_of(ctx.spec):
        cells = t[list(g.columns)].to_numpy(object)
        known = np.array([[v is not None and v == v for v in r] for r in cells], bool) \
            .reshape(cells.shape)
        for r in np.flatnonzero(known.all(axis=1)).tolist():
            rows.append(r)
            gs.append(g)
            found.append([lv for lv, v in zip(g.levels, cells[r]) if v in g.positive])
    return _asked(ctx, rows, gs, found, target=lambda f: ", ".join(f) or "none",
                  slots={"finding": lambda g: g.finding, "levels": lambda g: g.kind},
                  fields=lambda g, f: {"group": g.id, "levels": f},
                  none_reason="no_level_labels")


register_task(Task(name="ct_level_findings", family="vqa", needs=("volumes", "levels"),
                   prompts=LEVEL_PROMPTS, build=_levels, slots=("finding", "levels"),
                   description="the vertebra or disc levels with a finding (cervical "
                               "fractures, lumbar stenosis)"))

__all__ = ["EXAM_QUESTIONS", "ExamQuestion", "LEVEL_GROUPS", "LevelGroup"]
