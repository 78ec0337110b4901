"""Each report's grades and sides as a table: the labeler's mention pass with the grade and side
words of :mod:`radharmony.reports.grades` noted per mention."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError, check_choice
from ..spec import grade_column, side_column
from .findings import FINDINGS
from .grades import LATERAL, KindNotes
from .labeler import PROBABLE, _items, _label_item, _Labeler
from .rules import resolve_rules


def report_grades(texts, *, findings=None, rules=None, probable: str = "uncertain"
                  ) -> pd.DataFrame:
    """Each report's grade (0-4, NaN not said) and side (``left`` / ``right`` / ``both``,
    None not said) of ``findings`` (default: every finding the labeler knows), as the
    columns ``<finding>_grade`` and, for the findings of :data:`LATERAL`, ``<finding>_side``.

    ``texts``, ``rules`` and ``probable`` are those of
    :func:`radharmony.reports.label_reports`; the index is kept.
    """
    check_choice("probable", probable, tuple(PROBABLE))
    findings = tuple(FINDINGS if findings is None else findings)
    unknown = [f for f in findings if f not in FINDINGS]
    if unknown:
        raise RadHarmonyError("report_grades: findings the labeler does not know",
                              expected=f"ids of radharmony.reports.FINDINGS", found=repr(unknown),
                              fix="pass canonical ids such as 'pleural_effusion'")
    cols, slots = [], {}
    for f in findings:
        slots[f] = (len(cols), len(cols) + 1 if f in LATERAL else None)
        cols += [grade_column(f), side_column(f)] if f in LATERAL else [grade_column(f)]
    template = [None] * len(cols)
    for g, _ in slots.values():
        template[g] = np.nan
    labeler = _Labeler(resolve_rules(rules), False, probable, kinds=True)
    items, index = _items(texts)
    rows, memo = [], {}
    for row, item in enumerate(items):
        if type(item) is str and item in memo:
            rows.append(memo[item])
            continue
        labeler.notes = KindNotes()
        _label_item(labeler, item, row, index)
        rows.append(labeler.notes.row(template, slots))
        if type(item) is str:
            memo[item] = rows[-1]
    out = pd.DataFrame(rows, columns=cols, index=index, dtype=object)
    for f in findings:
        out[grade_column(f)] = out[grade_column(f)].astype(np.float32)
    return out


__all__ = ["report_grades"]
