"""Regression targets and graded findings as text, per image.

* ``estimate_measures``: the image's known regression targets (``spec.reg_cols``, e.g. the
  bone age in months, RALO's extent and opacity scores), one line each: ``"Bone age: 132
  months"``. An image with none known is skipped (``no_measure``).
* ``grade_findings``: the severity (none, questionable, mild, moderate, severe) of each
  graded finding with a known grade, with its side where the source gives one:
  ``"Pleural effusion: moderate, right"``. An image with no known grade is skipped
  (``no_grade``). A side is written only as the source gave it (never inferred).
"""

from __future__ import annotations

import numpy as np

from ...spec import GRADE_LEVELS, grade_column, side_column
from ..records import fields_json
from .base import Draft, Rendered, Task, register_capability, register_task

MEASURE_PROMPTS = ("Estimate the following from this radiograph: {measures}.",
                   "What are the {measures} of this radiograph?",
                   "Give the {measures} this image shows.")
GRADE_PROMPTS = ("Grade the severity of each of these findings in this chest X-ray (none, "
                 "questionable, mild, moderate, severe), with its side: {findings}.",
                 "How severe is each of {findings} in this chest radiograph, and on which "
                 "side?")


def _image_level(spec) -> bool:
    return spec.row_unit == "image"


register_capability("measures", lambda spec, kw: _image_level(spec) and bool(spec.reg_cols),
                    meaning="regression targets (spec.reg_cols: a bone age, a score)")
register_capability("grades", lambda spec, kw: _image_level(spec) and bool(spec.grades),
                    meaning="graded findings (spec.grades: severity 0-4, sides)")


def _number(value: float) -> str:
    return f"{value:g}"


def _measures(ctx) -> Draft:
    from ...vocabulary.kinds import TARGETS

    cols = list(ctx.spec.reg_cols)
    values = ctx.table[cols].to_numpy(np.float64)
    known = ~np.isnan(values)
    keep = known.any(axis=1)
    pos = np.flatnonzero(keep)
    names = [TARGETS[c].name for c in cols]
    asked = ", ".join(n[0].lower() + n[1:] for n in names)

    def render(j: np.ndarray) -> Rendered:
        texts, fields = [], []
        for row in values[pos[j]].tolist():
            texts.append("\n".join(f"{n}: {_number(v)} {TARGETS[c].unit}"
                                   for n, c, v in zip(names, cols, row) if v == v))
            fields.append(fields_json({"measures": {c: v for c, v in zip(cols, row)
                                                    if v == v}}))
        return Rendered(texts, {"measures": [asked] * len(j)}, fields)

    skipped = int((~keep).sum())
    return Draft("image", pos, render, skipped={"no_measure": skipped} if skipped else {})


def _grades(ctx) -> Draft:
    from .labels import _names

    spec, t = ctx.spec, ctx.table
    names = _names()
    graded = list(spec.grades)
    grades = t[[grade_column(f) for f in graded]].to_numpy(np.float64)
    sides = {f: t[side_column(f)].to_numpy(object) for f in spec.sides}
    keep = (~np.isnan(grades)).any(axis=1)
    pos = np.flatnonzero(keep)
    asked = ", ".join(names[f][0].lower() + names[f][1:] for f in graded)

    def render(j: np.ndarray) -> Rendered:
        texts, fields = [], []
        for i in pos[j].tolist():
            lines, cells = [], {}
            for k, f in enumerate(graded):
                g = grades[i, k]
                if g != g:
                    continue
                side = sides[f][i] if f in sides and g >= 1 else None
                lines.append(f"{names[f]}: {GRADE_LEVELS[int(g)]}" + (f", {side}" if side
                                                                       else ""))
                cells[f] = {"grade": int(g), "side": side}
            texts.append("\n".join(lines))
            fields.append(fields_json({"grades": cells}))
        return Rendered(texts, {"findings": [asked] * len(j)}, fields)

    skipped = int((~keep).sum())
    return Draft("image", pos, render, skipped={"no_grade": skipped} if skipped else {})


register_task(Task(name="estimate_measures", family="labels", needs=("images", "measures"),
                   prompts=MEASURE_PROMPTS, build=_measures, slots=("measures",),
                   description="an image's regression targets as text (bone age, scores)"))
register_task(Task(name="grade_findings", family="labels", needs=("images", "grades"),
                   prompts=GRADE_PROMPTS, build=_grades, slots=("findings",),
                   description="graded findings: severity 0-4 and side, as the source gives"))

__all__ = ["GRADE_PROMPTS", "MEASURE_PROMPTS"]
