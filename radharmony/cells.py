"""Nested table cells (lists, dicts) <-> JSON text: one codec for every file a table goes into.

Saved harmonizers, the table cache and the CLI's CSV output all store nested cells (``boxes``,
``rle``, spans) as JSON text and read them back with :func:`decode_json_columns`. Text written by
``DataFrame.to_csv`` (Python literals) is read by :func:`parse_literal`, as data only.
"""

from __future__ import annotations

import ast
import json
import re

import orjson
import pandas as pd


def parse_literal(text: str):
    """Nested cell text -> value: JSON, else a Python literal as ``DataFrame.to_csv`` writes lists
    and dicts. Parsed as data only (``json`` / ``ast.literal_eval``): never executes code."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise ValueError(f"neither JSON nor a Python literal: {text[:60]!r} "
                         f"({type(exc).__name__})") from None


def json_columns(df: pd.DataFrame) -> list[str]:
    """The object columns of ``df`` that hold a list or dict in some row."""
    return [c for c in df.columns if df[c].dtype == object and
            df[c].map(lambda v: isinstance(v, (list, dict))).any()]


def encode_json_columns(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``(copy of df with nested cells as JSON text, names of those columns)``."""
    cols = json_columns(df)
    if not cols:
        return df, cols
    return df.assign(**{c: df[c].map(lambda v: None if v is None else json.dumps(v))
                        for c in cols}), cols


def decode_json_columns(df: pd.DataFrame, cols) -> pd.DataFrame:
    """``df`` with the JSON text of ``cols`` parsed back (missing stays None), in place."""
    for c in cols:
        values = df[c].to_numpy(object)
        long = _long_number_cells(values)
        df[c] = pd.Series([_loads(v, bool(f)) for v, f in zip(values, long)], index=df.index,
                          dtype=object)
    return df


#: 19 digits in a row: an integer orjson might read as a float (past 64 bits)
_LONG_DIGITS = re.compile(r"\d{19}")
#: where a JSON number of 19 digits or more may start: at the start of the text, or after
#: ``[``, ``,``, ``:`` or white space (and a minus sign). A digit run inside a string (a DICOM
#: UID in a path: after ``/`` or ``.``) does not match, unless the string itself holds such a
#: character before it: then the cell only takes the slower, exact test.
_LONG_NUMBER = r"(?:^|[\[,:\s])-?\d{19}"


def _long_number_cells(values):
    """Per cell, whether its text may hold a JSON number of 19 digits or more (one vectorized
    regular expression over the column; every cell when the column is not all text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        text = pa.array(values, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return [True] * len(values)
    return pc.fill_null(pc.match_substring_regex(text, _LONG_NUMBER), False).to_numpy(
        zero_copy_only=False)


def _loads(value, long: bool = True):
    """One cell's JSON text -> its value (orjson, ~2x faster; the standard library's parser for
    what orjson refuses and ``json`` reads: ``NaN``, ``Infinity``, and text holding a long
    number (``long``: see :data:`_LONG_NUMBER`) whose orjson value holds a float: an integer
    past 64 bits, which orjson reads as a float)."""
    if not isinstance(value, str):
        return None
    try:
        out = orjson.loads(value)
    except orjson.JSONDecodeError:
        return json.loads(value)
    if long and _has_float(out) and _LONG_DIGITS.search(value):
        return json.loads(value)
    return out


def _has_float(value) -> bool:
    """Whether a parsed JSON value is or holds a float (iterative: any nesting depth)."""
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is float:
            return True
        if kind is list:
            stack.extend(v)
        elif kind is dict:
            stack.extend(v.values())
    return False
