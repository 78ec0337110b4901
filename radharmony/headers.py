"""Reading a dataset's CSV metadata exactly as shipped, with its header checked.

Several public CSVs have headers a plain CSV reader splits wrongly: NIH writes
``OriginalImage[Width,Height]`` (one name over two fields) and its box file's header has more
fields than its rows. :func:`read_csv_table` reads the header's *logical* names (commas inside
``[...]`` kept), compares them with the names a dataset spec declares in real order, and returns
every field as text (only empty fields are missing), so harmonizers see the file untransformed.
"""

from __future__ import annotations

import os
import warnings
from typing import Mapping, Sequence

import pandas as pd

from .errors import MetadataError


def logical_names(fields: Sequence[str]) -> list[str]:
    """Header fields -> logical names: fields between ``[`` and ``]`` are joined back with
    commas (``["A[x", "y]"]`` -> ``["A[x,y]"]``); trailing empty names are dropped."""
    names: list[str] = []
    open_ = False
    for f in fields:
        f = "" if f is None or f != f else str(f)
        if open_:
            names[-1] += "," + f
        else:
            names.append(f)
        open_ = names[-1].count("[") > names[-1].count("]")
    while names and names[-1] == "":
        names.pop()
    return names


def field_names(name: str) -> list[str]:
    """The fields one logical name spans: ``"A[x,y]"`` -> ``["A[x]", "A[y]"]``, else ``[name]``."""
    head, sep, rest = name.partition("[")
    if not sep or "," not in rest:
        return [name]
    return [f"{head}[{part}]" for part in rest.rstrip("]").split(",")]


def check_cells(ok: pd.Series, column: pd.Series, *, source: str, what: str, expected: str,
                fix: str = "pass the table as released") -> None:
    """Raise :class:`MetadataError` naming the first row where ``ok`` is False (``what`` says
    what is wrong with ``column``'s cell there)."""
    bad = ~ok.fillna(False).to_numpy(dtype=bool)
    if bad.any():
        row = int(bad.argmax())
        raise MetadataError(f"{source}, row {row}: {what} ({int(bad.sum())} rows)",
                            expected=expected, found=repr(column.iloc[row]), fix=fix)


def read_csv_table(path: str | os.PathLike, columns: Sequence[str], *, description: str,
                   aliases: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Read ``path`` (plain, ``.gz`` or ``.zip``) whose header must be ``columns`` in order.

    ``aliases`` maps a declared name to other spellings seen in released versions; such a
    column is returned under its declared name. A bracketed name spanning several fields
    becomes one column per field (:func:`field_names`). An empty leading or inner name becomes
    ``"Unnamed: <i>"``; fields past the header's last name (trailing commas) must be empty and
    are dropped. Every value is text; only empty fields are missing.
    """
    aliases = aliases or {}
    fix = f"pass {description} as released (re-download it if it was edited)"
    try:
        head = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise MetadataError(f"{path} cannot be read as CSV", expected=description,
                            found=f"{type(exc).__name__}: {exc}", fix=fix) from None
    found = logical_names(head.iloc[0].tolist())
    ok = len(found) == len(columns) and all(
        f == c or f in aliases.get(c, ()) for f, c in zip(found, columns))
    if not ok:
        diff = next((i for i, (f, c) in enumerate(zip(found, columns))
                     if f != c and f not in aliases.get(c, ())), min(len(found), len(columns)))
        raise MetadataError(f"{path}: header does not match {description}",
                            expected=f"{len(columns)} columns {list(columns)}",
                            found=f"{len(found)} columns {found}; first difference at "
                                  f"column {diff}", fix=fix)
    names: list[str] = []
    for i, c in enumerate(columns):
        names += field_names(c) if c else [f"Unnamed: {i}"]
    width = head.shape[1]
    trailing = [f"Unnamed: {i}" for i in range(len(names), max(width, len(names)))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)  # a row longer than names
            df = pd.read_csv(path, header=None, skiprows=1, names=names + trailing, dtype=str,
                             keep_default_na=False, na_values=[""], index_col=False)
    except (ValueError, pd.errors.ParserWarning, OSError, EOFError) as exc:
        raise MetadataError(f"{path} cannot be parsed as {description}",
                            expected=f"{len(names)} fields per row",
                            found=str(exc).strip().rstrip("."),
                            fix=fix) from None
    extra = [c for c in trailing if df[c].notna().any()]
    if extra:
        row = int(df[extra[0]].notna().to_numpy().argmax())
        raise MetadataError(f"{path}: data row {row + 1} has more fields than the header",
                            expected=f"{len(names)} fields per row",
                            found=f"a value {df.at[row, extra[0]]!r} past the last column",
                            fix=fix)
    return df.drop(columns=trailing)
