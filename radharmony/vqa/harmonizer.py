"""The base VQA harmonizer: a dataset's question files -> the question-level table.

A VQA dataset module implements :meth:`BaseVQAHarmonizer.columns` (raw -> one list per
column, one item per question); the base turns them into the table (key image, column order)
and the one schema validation checks it (:mod:`radharmony.table.questions`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..table.harmonizer import BaseHarmonizer
from .table import question_frame


class BaseVQAHarmonizer(BaseHarmonizer):
    """One row per question; see :func:`radharmony.vqa.vqa_spec` for the columns."""

    @classmethod
    def columns(cls, raw: Any, *, source: str) -> dict[str, list]:
        """Pure: raw question files -> ``{column: values}`` (the spec's columns, plus
        ``patient_id``, ``study_id``, ``image_paths``, ``view_positions``, optional
        ``report``)."""
        raise NotImplementedError

    @classmethod
    def harmonize_raw(cls, raw: Any, *, source: str = "metadata") -> pd.DataFrame:
        return question_frame(cls.columns(raw, source=source), cls.spec, source=source)
