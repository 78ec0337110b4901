"""A finding's severity and side from report text: :func:`report_grades`.

The labeler's mention pass (:mod:`radharmony.reports.labeler`) decides each mention 1 / 0 /
-1; this module reads, for each mention, the words of its clause (the sentence cut at the
labeler's terminators, never reaching back past the previous mention):

* **severity** (:data:`SEVERITY`): the worst severity word before the mention (up to
  :data:`REACH_BEFORE` characters), else the first right after it (:data:`REACH_AFTER`:
  "effusion is small"); "mild to moderate" takes the worse. A positive mention gets that
  grade (``mild`` 2, ``moderate`` 3, ``severe`` 4 of :data:`radharmony.spec.GRADE_LEVELS`;
  unknown without a word), an uncertain one ``questionable`` (1), a negated one ``none`` (0);
* **side** (:data:`SIDE_WORDS`), for the findings that have one (:data:`LATERAL`): every
  side word before the mention, else the first after it, under the same reach; "right and left",
  "bilateral", "bibasilar" are ``both``. Only positive and uncertain mentions give a side.

Per report and finding: the grade of the deciding mentions (any positive -> the worst
positive grade; else any uncertain -> 1; else 0) and the union of their sides. A grade or a
side belongs to the finding its mention names; nothing passes to parents.

>>> t = report_grades(["FINDINGS: Small left pleural effusion. Mild to moderate cardiomegaly. "
...                    "No pneumothorax."], findings=["pleural_effusion", "cardiomegaly",
...                    "pneumothorax"])
>>> r = t.iloc[0]
>>> float(r["pleural_effusion_grade"]), r["pleural_effusion_side"], float(r["cardiomegaly_grade"])
(2.0, 'left', 3.0)
>>> float(r["pneumothorax_grade"]), r["pneumothorax_side"]  # negated: none, no side
(0.0, None)
"""

from __future__ import annotations

import re

import numpy as np

from ..spec import GRADE_LEVELS

#: severity word -> grade (index of GRADE_LEVELS)
SEVERITY = {**dict.fromkeys(("mild", "mildly", "small", "smaller", "tiny", "trace", "minimal",
                             "minimally", "minor", "slight", "slightly", "subtle"), 2),
            **dict.fromkeys(("moderate", "moderately", "medium"), 3),
            **dict.fromkeys(("severe", "severely", "large", "larger", "extensive", "massive",
                             "marked", "markedly", "huge", "substantial"), 4)}
#: side word -> side; "right and left" / "left and right" are both
SIDE_WORDS = {"left": "left", "right": "right", "bilateral": "both", "bilaterally": "both",
              "bibasilar": "both", "bibasal": "both", "biapical": "both", "both": "both"}
#: findings a report may give a side for (canonical ids)
LATERAL = frozenset(("pleural_effusion", "pneumothorax", "hydropneumothorax", "atelectasis",
                     "lung_opacity", "consolidation", "pneumonia", "infiltration", "nodule",
                     "mass", "lung_lesion", "rib_fracture", "clavicle_fracture",
                     "pleural_thickening", "edema", "granuloma"))
REACH_BEFORE, REACH_AFTER = 60, 40
_SEVERITY = re.compile(r"\b(?:" + "|".join(sorted(SEVERITY, key=len, reverse=True)) +
                       r")\b(?:\s*(?:-|to|or)\s*(" + "|".join(SEVERITY) + r")\b)?")
_SIDE = re.compile(r"\b(?:(?:right|left)\s+(?:and|&)\s+(?:left|right)|" +
                   "|".join(sorted(SIDE_WORDS, key=len, reverse=True)) + r")\b(?:-sided)?")
_BITS = {"left": 1, "right": 2, "both": 3}
_SIDE_OF = {1: "left", 2: "right", 3: "both"}
QUESTIONABLE = GRADE_LEVELS.index("questionable")
_RANK = {1.0: 2, -1.0: 1, 0.0: 0}  # the deciding value: positive, else uncertain, else negated


def sentence_words(low: str, ss: int, se: int) -> tuple[list, list]:
    """The severity and side words of the sentence ``[ss, se)`` of ``low``, found once for
    all its mentions: ``(start, end, grade)`` and ``(start, end, side bits)`` each."""
    sev = []
    for m in _SEVERITY.finditer(low, ss, se):
        g = SEVERITY[m.group(0).split()[0].split("-")[0]]
        sev.append((m.start(), m.end(), max(g, SEVERITY[m.group(1)]) if m.group(1) else g))
    side = []
    for m in _SIDE.finditer(low, ss, se):
        word = m.group(0).removesuffix("-sided")
        side.append((m.start(), m.end(), 3 if " " in word else _BITS[SIDE_WORDS[word]]))
    return sev, side


def _pick(words: list, start: int, ms: int, me: int, end: int) -> list:
    """The values of ``words`` between ``start`` (or :data:`REACH_BEFORE` characters back)
    and the mention ``[ms, me)``; else that of the first one after it in ``[me, end)`` (up to
    :data:`REACH_AFTER` characters); [] when neither."""
    lo = max(start, ms - REACH_BEFORE)
    before = [v for s, e, v in words if s >= lo and e <= ms]
    if before:
        return before
    hi = min(end, me + REACH_AFTER)
    for s, e, v in words:
        if s >= me:
            return [v] if e <= hi else []
    return []


def mention_kinds(words: tuple[list, list], start: int, ms: int, me: int, end: int, *,
                  lateral: bool) -> tuple[float, int]:
    """``(severity grade or NaN, side bits 0-3)`` of the mention ``[ms, me)`` in its window
    ``[start, end)``, from its sentence's :func:`sentence_words`: the worst severity and every
    side its words give ("moderate right and small left effusions": moderate, both; see the
    module doc)."""
    sev, side = words
    grades = _pick(sev, start, ms, me, end) if sev else ()
    bits = 0
    if lateral and side:
        for b in _pick(side, start, ms, me, end):
            bits |= b
    return (float(max(grades)) if grades else np.nan), bits


class KindNotes:
    """A report's per-finding notes: the deciding value's grades and side bits."""

    def __init__(self):
        self.by_finding: dict[str, list] = {}  # finding -> [value, grade, bits]

    def add(self, finding: str, value: float, grade: float, bits: int) -> None:
        if value == 0.0:
            grade, bits = 0.0, 0
        elif value == -1.0:
            grade = float(QUESTIONABLE)
        old = self.by_finding.get(finding)
        rank = _RANK
        if old is None or rank[value] > rank[old[0]]:
            self.by_finding[finding] = [value, grade, bits]
        elif rank[value] == rank[old[0]]:
            old[1] = grade if old[1] != old[1] else old[1] if grade != grade else max(old[1],
                                                                                    grade)
            old[2] |= bits

    def row(self, template: list, slots: dict) -> list:
        """The report's cells: ``template`` (every cell unknown) with the noted findings'
        grade and side put in their ``slots`` (finding -> (grade cell, side cell or None))."""
        out = list(template)
        for f, (_, grade, bits) in self.by_finding.items():
            slot = slots.get(f)
            if slot is not None:
                out[slot[0]] = grade
                if slot[1] is not None and bits:
                    out[slot[1]] = _SIDE_OF[bits]
        return out


__all__ = ["LATERAL", "REACH_AFTER", "REACH_BEFORE", "SEVERITY", "SIDE_WORDS", "KindNotes"]
