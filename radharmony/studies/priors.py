"""Priors: each study's previous study of the same patient, by date.

The date is the table's study date column (:data:`DATE_COLUMNS`, the spec's
``study_date_col`` first): ``YYYYMMDD`` numbers or text, ISO dates, or -- CheXpert-Plus's
``patient_report_date_order`` -- an order without dates (then ``prior_days`` is None). A
``study_time`` column breaks ties within a day (a day with an untimed study keeps its
ties). The prior is the latest study of the same patient whose (date, time) is strictly
earlier: never a study from the future, never another patient's, and, because it is looked
up among the studies of the dataset at hand (splits group by patient), never across a
split. A study whose date is missing or cannot be read has no prior and is no one's prior
(counted in one warning naming the first studies).
"""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pandas as pd

from ..errors import SHOW, RadHarmonyError, StudyWarning

#: columns read as a study's date or order, best first (after ``spec.study_date_col``)
DATE_COLUMNS = ("study_date", "patient_report_date_order")
#: columns that hold an order, not a date (``prior_days`` is None)
ORDER_COLUMNS = frozenset({"patient_report_date_order"})
TIME_COLUMN = "study_time"


def date_column(df: pd.DataFrame, spec) -> str | None:
    """The column a study's date is read from, or None when the table has none."""
    for c in (getattr(spec, "study_date_col", None), *DATE_COLUMNS):
        if c is not None and c in df.columns:
            return c
    return None


def parse_date(value) -> dt.date | float | None:
    """A date from ``YYYYMMDD`` (number or text) or ISO text; None when missing.

    Raises ValueError when ``value`` is present but not a date.

    >>> parse_date(20191127), parse_date("2019-11-27"), parse_date(None)
    (datetime.date(2019, 11, 27), datetime.date(2019, 11, 27), None)
    """
    if value is None or value is pd.NA or isinstance(value, float) and np.isnan(value):
        return None
    text = str(value).strip()
    if text.endswith(".0"):
        text = text[:-2]
    if not text:
        return None
    if len(text) == 8 and text.isdigit():
        return dt.date(int(text[:4]), int(text[4:6]), int(text[6:]))
    return dt.date.fromisoformat(text[:10])


def find_priors(first_rows: np.ndarray, patients: np.ndarray, study_ids: np.ndarray,
                df: pd.DataFrame, spec, *, owner: str = "dataset"
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(prior, days)`` per study: the index of its prior study (-1: none) and the days
    between them (NaN when none or when the column is an order, not a date)."""
    n = len(first_rows)
    prior, days = np.full(n, -1, np.int64), np.full(n, np.nan)
    col = date_column(df, spec)
    if col is None:
        raise RadHarmonyError(f"{owner}: prior=True needs a study date",
                              expected=f"one of the columns {list(DATE_COLUMNS)} in the table",
                              found="none of them", fix="use prior=False for this dataset")
    raw = df[col].to_numpy(object)[first_rows]
    is_order = col in ORDER_COLUMNS
    keys: list = []
    bad, missing = [], []
    for i, v in enumerate(raw):
        try:
            d = _order_value(v) if is_order else parse_date(v)
            if d is None:
                missing.append(i)
        except (TypeError, ValueError, OverflowError):
            bad.append(i)
            d = None
        keys.append(d)
    times = df[TIME_COLUMN].to_numpy(object)[first_rows] if TIME_COLUMN in df.columns \
        else np.full(n, np.nan, object)
    if bad or missing:
        named = [f"{study_ids[i]} ({raw[i]!r})" for i in bad[:SHOW]] + \
            [f"{study_ids[i]} (no {col})" for i in missing[:SHOW]]
        warnings.warn(f"{owner}: {len(bad)} studies have a {col} that cannot be read as a "
                      f"date and {len(missing)} have none; they get no prior and are no "
                      f"study's prior, first: {named}", StudyWarning, stacklevel=4)
    by_patient: dict = {}
    for i, d in enumerate(keys):
        if d is not None:
            t = times[i]
            t = -1.0 if t is None or t is pd.NA or isinstance(t, float) and np.isnan(t) \
                else float(t)
            by_patient.setdefault(str(patients[i]), []).append(((d, t), str(study_ids[i]), i))
    for studies in by_patient.values():
        # a day with an untimed study is not ordered within: its times are dropped, so none
        # of that day's studies is another's prior (a guessed order could pick a later one)
        untimed = {k[0] for k, _, _ in studies if k[1] < 0}
        if untimed:
            studies = [((k[0], -1.0 if k[0] in untimed else k[1]), s, i) for k, s, i in studies]
        studies.sort()
        before = last = None  # the last study of the previous date, and of this one
        for key, _, i in studies:
            if last is None or key != last[0]:
                before = last
            if before is not None:
                prior[i] = before[1]
                if not is_order:
                    days[i] = (key[0] - before[0][0]).days
            last = (key, i)
    return prior, days


def _order_value(v) -> float | None:
    if v is None or v is pd.NA or isinstance(v, float) and np.isnan(v):
        return None
    return float(v)
