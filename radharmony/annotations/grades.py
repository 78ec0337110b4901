"""Graded findings: a grade 0-4 (:data:`radharmony.spec.GRADE_LEVELS`) as a presence label,
and the side of a finding graded on each side (see :mod:`radharmony.vocabulary.kinds`).

>>> grade_presence([0, 1, 2, 4, float("nan")])
[0.0, -1.0, 1.0, 1.0, nan]
"""

from __future__ import annotations

import numpy as np

from ..spec import GRADE_LEVELS

#: the grade from which a finding counts as present (``mild``); ``questionable`` is uncertain
PRESENT_FROM = GRADE_LEVELS.index("mild")
QUESTIONABLE = GRADE_LEVELS.index("questionable")


def grade_presence(grades) -> list[float]:
    """The presence label (1 / 0 / -1 uncertain / NaN) each grade 0-4 implies: ``none`` 0,
    ``questionable`` -1, ``mild`` and worse 1, unknown NaN."""
    g = np.asarray(grades, dtype=np.float64)
    out = np.where(g >= PRESENT_FROM, 1.0, np.where(g == QUESTIONABLE, -1.0, 0.0))
    return np.where(np.isnan(g), np.nan, out).tolist()


def side_of(*, left, right) -> str | None:
    """The side of a finding graded on each side (``left`` / ``right`` / ``both``): the sides
    where it is present (``mild`` or worse), else the sides where it is ``questionable``;
    None when it is on neither side or a grade is unknown."""
    if left != left or right != right:  # NaN: not said
        return None
    worst = max(left, right)
    cut = PRESENT_FROM if worst >= PRESENT_FROM else QUESTIONABLE
    on = (left >= cut, right >= cut)
    return {(True, False): "left", (False, True): "right", (True, True): "both"}.get(on)


__all__ = ["PRESENT_FROM", "QUESTIONABLE", "grade_presence", "side_of"]
