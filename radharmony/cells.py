"""Nested table cells (lists, dicts) <-> JSON text: one codec for every file a table goes into.

Saved harmonizers, the table cache and the CLI's CSV output all store nested cells (``boxes``,
``rle``, spans) as JSON text and read them back with :func:`decode_json_columns`. Text written by
``DataFrame.to_csv`` (Python literals) is read by :func:`parse_literal`, as data only.
"""

from __future__ import annotations

import ast
import json
import re

import numpy as np
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
    """``df`` with the JSON text of ``cols`` parsed back (missing stays None), in place. Each
    distinct text is parsed once; every row still gets its own value (no two rows share a list
    or dict)."""
    for c in cols:
        df[c] = pd.Series(_decode_column(df[c].to_numpy(object)), index=df.index, dtype=object)
    return df


def _decode_column(values) -> list:
    """The cells of ``values`` parsed (:func:`_loads`). A column of text (and missing cells) is
    factorized: each distinct text parsed once, each row given a fresh copy of its value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pd.api.types.infer_dtype(values, skipna=True) != "string":  # bytes, objects: per cell
        return [_loads(v) for v in values]
    # by object first (a dictionary column shares one str per distinct text), then by text
    by_object = pd.factorize(np.fromiter(map(id, values), np.int64, len(values)))[0]
    first = np.unique(by_object, return_index=True)[1]
    by_text, distinct = pd.factorize(values[first])
    codes = by_text[by_object]  # first-seen order: the first bad text raises as before
    try:
        long = pc.match_substring_regex(pa.array(distinct, type=pa.large_string()),
                                        _LONG_NUMBER).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # text that is not valid UTF-8
        return [_loads(v) for v in values]
    repeated = np.bincount(codes[codes >= 0], minlength=len(distinct)) > 1
    make = [_fresh(_loads(t, bool(f)), t, bool(f), bool(r))
            for t, f, r in zip(distinct.tolist(), long, repeated)]
    make.append(_missing)  # code -1: a missing cell
    return [make[k]() for k in codes.tolist()]


def _fresh(value, text: str, long: bool, repeated: bool):
    """A function giving ``value`` (the parse of ``text``), a new copy at each call where
    ``repeated``: a shallow copy of a flat list or dict (its items are immutable), the value
    itself when it is immutable, else a new parse."""
    kind = type(value)
    if kind in _IMMUTABLE or not repeated:
        return lambda: value
    items = value if kind is list else value.values() if kind is dict else None
    if items is not None and all(type(x) in _IMMUTABLE for x in items):
        return value.copy
    return lambda: _loads(text, long)


#: JSON values that are never changed in place: rows may share them
_IMMUTABLE = (str, int, float, bool, type(None))


def _missing() -> None:
    """A missing cell's value."""
    return None


#: 19 digits in a row: an integer orjson might read as a float (past 64 bits)
_LONG_DIGITS = re.compile(r"\d{19}")
#: where a JSON number of 19 digits or more may start: at the start of the text, or after
#: ``[``, ``,``, ``:`` or white space (and a minus sign). A digit run inside a string (a DICOM
#: UID in a path: after ``/`` or ``.``) does not match, unless the string itself holds such a
#: character before it: then the cell only takes the slower, exact test.
_LONG_NUMBER = r"(?:^|[\[,:\s])-?\d{19}"


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
