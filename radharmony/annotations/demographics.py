"""Age and sex, harmonized: ages in years from the encodings datasets use, sex as M / F / None.

* DICOM Age String (AS): ``nnnD``, ``nnnW``, ``nnnM``, ``nnnY`` (``"007Y"``, ``"002D"``);
* plain numbers (years), as numbers or strings;
* a birth year with a study date (PadChest ``PatientBirth`` with ``StudyDate_DICOM``): the
  difference of the years (the birth date is not published, so the age is the age reached
  during the study year, up to one year above the exact age).
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError

DAYS_PER_YEAR = 365.25
AS_UNITS = {"D": 1 / DAYS_PER_YEAR, "W": 7 / DAYS_PER_YEAR, "M": 1 / 12, "Y": 1.0}
FORMATS = ("auto", "dicom_as", "years", "birth_year")
_AS = re.compile(r"^\s*(\d{1,3})\s*([DWMY])\s*$", re.IGNORECASE)
SEX_VALUES = {"m": "M", "male": "M", "man": "M", "f": "F", "female": "F", "woman": "F"}
MAX_AGE_YEARS = 125.0


class DemographicsError(RadHarmonyError, ValueError):
    """An age or sex value that cannot be read."""


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and np.isnan(x)) or x is pd.NA or \
        (isinstance(x, str) and x.strip().lower() in {"", "nan", "none", "null", "unknown"})


def _one_age(x, fmt: str) -> float:
    if _missing(x):
        return np.nan
    if isinstance(x, str):
        m = _AS.match(x)
        if m:
            return int(m.group(1)) * AS_UNITS[m.group(2).upper()]
        if fmt == "dicom_as":
            raise ValueError(x)
        return float(x.strip())
    if fmt == "dicom_as":
        raise ValueError(x)
    return float(x)


def parse_age_years(values: Iterable, *, format: str = "auto", study_date: Iterable | None = None,
                    source: str = "ages") -> np.ndarray:
    """Ages in years (float, NaN where missing or implausible, i.e. negative or over 125).

    ``format``: ``"auto"`` (DICOM AS strings and plain numbers, mixed), ``"dicom_as"`` (AS
    strings only), ``"years"`` (numbers only) or ``"birth_year"`` (``values`` are birth years;
    ``study_date`` gives the study's ``YYYYMMDD`` date or year, one per value).

    >>> parse_age_years(["007Y", "002D", "003M", "001W", 58, None]).round(4).tolist()
    [7.0, 0.0055, 0.25, 0.0192, 58.0, nan]
    >>> parse_age_years([1940, 1985.0], format="birth_year", study_date=[20140118, 2016]).tolist()
    [74.0, 31.0]
    """
    if format not in FORMATS:
        raise DemographicsError(f"{source}: unknown age format", expected=f"one of {FORMATS}",
                                found=repr(format), fix="pass format='auto'")
    values = list(values)
    if format == "birth_year":
        if study_date is None:
            raise DemographicsError(f"{source}: birth years need the study dates",
                                    expected="study_date=, one per value", found="None",
                                    fix="pass the StudyDate column as study_date=")
        birth = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(float)
        date = pd.to_numeric(pd.Series(list(study_date), dtype=object),
                             errors="coerce").to_numpy(float)
        if len(date) != len(birth):
            raise DemographicsError(f"{source}: study_date has another length",
                                    expected=f"{len(birth)} dates", found=f"{len(date)}",
                                    fix="pass one study date per birth year")
        year = np.where(date > 9999, np.floor(date / 10_000), date)
        ages = year - birth
    else:
        fmt = "dicom_as" if format == "dicom_as" else "auto"
        codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
        out = []  # each distinct value read once: ages repeat across a table's rows
        for x in uniques:
            try:
                if format == "years" and isinstance(x, str) and _AS.match(x):
                    raise ValueError(x)
                out.append(_one_age(x, fmt))
            except (TypeError, ValueError):
                expected = "a number of years" if format == "years" else \
                    "a DICOM age string such as '007Y' or a number of years"
                raise DemographicsError(f"{source}: an age cannot be read", expected=expected,
                                        found=repr(x), fix="pass format= matching the column"
                                        ) from None
        ages = np.append(np.asarray(out, dtype=float), np.nan)[codes]  # code -1: missing
    return np.where((ages >= 0) & (ages <= MAX_AGE_YEARS), ages, np.nan)


def normalize_sex(values: Iterable, *, source: str = "sex") -> list[str | None]:
    """``"M"``, ``"F"`` or None (missing, ``"O"``, ``"U"``, ``"Unknown"``) for each value.

    >>> normalize_sex(["M", "female", " F ", "Unknown", None, "O"])
    ['M', 'F', 'F', None, None, None]
    """
    codes, uniques = pd.factorize(pd.Series(list(values), dtype=object), use_na_sentinel=True)
    out: list[str | None] = []
    for x in uniques:  # each distinct value once
        if _missing(x):
            out.append(None)
            continue
        if not isinstance(x, str):
            raise DemographicsError(f"{source}: a sex value is not text",
                                    expected="'M', 'F', 'Male', 'Female', 'O', 'U' or missing",
                                    found=repr(x), fix="pass the raw sex column")
        key = x.strip().lower()
        if key in SEX_VALUES:
            out.append(SEX_VALUES[key])
        elif key in {"o", "u", "other", "unknown", "x"}:
            out.append(None)
        else:
            raise DemographicsError(f"{source}: an unknown sex value",
                                    expected="'M', 'F', 'Male', 'Female', 'O', 'U' or missing",
                                    found=repr(x), fix="map the value before calling")
    return np.array(out + [None], dtype=object)[codes].tolist()  # code -1: missing


def table_demographics(df: pd.DataFrame, spec) -> tuple[np.ndarray, np.ndarray]:
    """``(age_years float array, sex object array of "M"/"F"/None)`` for a harmonized table,
    read from the columns ``spec`` names (``age_col`` in ``age_format``, ``study_date_col``
    for birth years, ``sex_col``); NaN / None throughout for a column the spec does not name
    or the table lacks.

    >>> from radharmony.spec import DatasetSpec
    >>> spec = DatasetSpec(key="x", title="x", age_col="patient_age", age_format="dicom_as",
    ...                    sex_col="patient_sex")
    >>> t = pd.DataFrame({"patient_age": ["045Y", None], "patient_sex": ["F", "O"]})
    >>> age, sex = table_demographics(t, spec)
    >>> age.tolist(), sex.tolist()
    ([45.0, nan], ['F', None])
    """
    n = len(df)
    age = np.full(n, np.nan)
    sex = np.full(n, None, dtype=object)
    where = f"dataset {spec.key!r}"
    col = getattr(spec, "age_col", None)
    if col is not None and col in df.columns:
        fmt = spec.age_format
        dates = None
        if fmt == "birth_year":
            dcol = spec.study_date_col
            dates = df[dcol].to_numpy(object) if dcol in df.columns else np.full(n, None)
        values = df[col]
        if fmt in ("years", "birth_year") and pd.api.types.is_numeric_dtype(values):
            values = values.to_numpy(float, na_value=np.nan)
            age = values if fmt == "years" else parse_age_years(
                values, format=fmt, study_date=dates, source=f"{where}, column {col!r}")
            age = np.where((age >= 0) & (age <= MAX_AGE_YEARS), age, np.nan)
        else:
            age = parse_age_years(values.to_numpy(object), format=fmt, study_date=dates,
                                  source=f"{where}, column {col!r}")
    col = getattr(spec, "sex_col", None)
    if col is not None and col in df.columns:
        sex = np.array(normalize_sex(df[col].to_numpy(object), source=f"{where}, column {col!r}"),
                       dtype=object)
    return age, sex
