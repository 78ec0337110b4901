"""The label kinds beside the findings: regression targets, a finding's grade and its side.

* **Regression targets** (``reg``): a quantity per image under a canonical name with its unit
  (:data:`TARGETS`). A dataset's ``spec.reg_cols`` are these names; a merge stacks each
  target across the sources that have it and leaves it unknown (masked) elsewhere.
* **Grades** (``grade``): a finding's severity on one ordinal scale, 0-4
  (:data:`radharmony.spec.GRADE_LEVELS`: none, questionable, mild, moderate, severe). A
  dataset grades the canonical findings ``spec.grades`` in columns ``<finding>_grade``.
* **Sides** (``side``): where a finding is, ``left`` / ``right`` / ``both`` (:data:`SIDES`),
  for the findings ``spec.sides`` in columns ``<finding>_side``; None where not said.

A grade or a side belongs to exactly the finding it names: it never passes through the
hierarchy's relations (a left pleural effusion graded 3 says nothing of the grade or side of
a hydropneumothorax, nor the reverse), and a merge never fills one a source did not give.

>>> TARGETS["bone_age_months"].unit
'months'
>>> grade_presence([0, 1, 2, 4, float("nan")])
[0.0, -1.0, 1.0, 1.0, nan]
>>> side_of(left=2, right=0), side_of(left=3, right=1), side_of(left=2, right=4)
('left', 'left', 'both')
>>> side_of(left=0, right=1), side_of(left=0, right=0)
('right', None)
"""

from __future__ import annotations

from typing import NamedTuple

from ..annotations.grades import PRESENT_FROM, grade_presence, side_of
from ..spec import GRADE_LEVELS, SIDES
from .table import VocabularyError, finding_ids


class Target(NamedTuple):
    """A canonical regression target: its display name, unit, and what it measures."""

    name: str
    unit: str
    definition: str


#: canonical regression targets, by the name a ``reg_cols`` column carries
TARGETS = {
    "bone_age_months": Target("Bone age", "months", "Skeletal age read from a left-hand "
                              "radiograph (Greulich and Pyle), in months."),
    "lung_extent_score": Target("Lung extent score", "of 8", "RALO geographic extent: per "
                                "lung 0-4 (none, <25 %, 25-50 %, 50-75 %, >75 % involved by "
                                "ground glass or consolidation), summed over both lungs."),
    "lung_opacity_score": Target("Lung opacity score", "of 8", "RALO opacity: per lung 0-4 "
                                 "(none, ground glass, consolidation, mixed >50 % "
                                 "consolidation, white-out), summed over both lungs."),
}


def check_kinds(spec) -> None:
    """Raise :class:`VocabularyError` unless every ``reg_cols`` name is a canonical target and
    every graded or sided finding a canonical finding."""
    known = set(finding_ids())
    for field, names, allowed, what in (
            ("reg_cols", spec.reg_cols, TARGETS, "a regression target of TARGETS"),
            ("grades", spec.grades, known, "a canonical finding id"),
            ("sides", spec.sides, known, "a canonical finding id")):
        bad = [n for n in names if n not in allowed]
        if bad:
            raise VocabularyError(f"dataset {spec.key!r}: {field} names unknown entries",
                                  expected=f"each {what}", found=repr(bad),
                                  fix="use the canonical names (radharmony.vocabulary), or add "
                                      "the target to radharmony.vocabulary.kinds.TARGETS")


__all__ = ["GRADE_LEVELS", "PRESENT_FROM", "SIDES", "TARGETS", "Target", "check_kinds",
           "grade_presence", "side_of"]
