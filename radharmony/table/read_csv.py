"""Reading CSV metadata tables as shipped (plain, ``.gz`` or ``.zip``), with four-part errors.

Two readers: :func:`read_table` (pandas, columns checked for presence) and
:func:`read_csv_table` for headers a plain CSV reader splits wrongly: NIH writes
``OriginalImage[Width,Height]`` (one name over two fields) and its box file's header has more
fields than its rows. It reads the header's *logical* names (commas inside ``[...]`` kept),
compares them with the names a dataset spec declares in real order, and returns every field as
text (only empty fields are missing), so harmonizers see the file untransformed.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import MetadataError, MetadataNotFoundError
from .guard import _non_utf8_line


def _not_utf8(path, exc: UnicodeDecodeError, fix: str) -> MetadataError:
    """The error for bytes that are not UTF-8, naming the line (file offsets)."""
    line = _non_utf8_line(Path(path))
    return MetadataError(f"{path}{' at ' + line if line else ''} cannot be read as text",
                         expected="UTF-8 text, as the dataset ships it",
                         found=f"bytes that are not UTF-8 ({exc.reason}, e.g. Latin-1 text)",
                         fix=fix)


def read_table(path: str | Path, *, description: str, columns: Iterable[str] = (),
               **read_csv_kwargs) -> pd.DataFrame:
    """``pd.read_csv(path)`` that transforms nothing; checks that ``columns`` are present.

    Any parser failure becomes a :class:`MetadataError` naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise MetadataNotFoundError(description, [path], fix="check the path argument")
    try:
        df = pd.read_csv(path, **read_csv_kwargs)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc, "re-download the file") from None
    except (ValueError, OSError, EOFError) as exc:
        raise MetadataError(f"{path} could not be read as {description}",
                            expected="the CSV table as the dataset ships it",
                            found=f"{type(exc).__name__}: {str(exc)[:200]}",
                            fix="re-download the file") from None
    require_columns(df, columns, source=str(path), description=description)
    return df


def require_columns(df: pd.DataFrame, columns: Iterable[str], *, source: str,
                    description: str = "the metadata table") -> None:
    """Raise :class:`MetadataError` unless every name in ``columns`` is a column of ``df``."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise MetadataError(f"{source}: columns missing from {description}",
                            expected=f"columns {list(columns)}",
                            found=f"{list(df.columns)[:20]}; missing {missing}",
                            fix="pass the file the dataset ships (exact header spelling)")


def lists_by(ids: pd.Index, keys, values) -> list[list]:
    """For each id in ``ids``, the ``values`` whose ``keys`` equal it, in row order.

    The vectorized form of ``groupby(keys).agg(list).reindex(ids)``: a stable sort and one split,
    no per-group pandas objects. Ids without values get an empty list; keys not in ``ids`` are
    ignored.
    """
    codes = ids.get_indexer(pd.Index(keys))
    vals = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    keep = codes >= 0
    codes, vals = codes[keep], vals[keep]
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(1, len(ids)))
    return [part.tolist() for part in np.split(vals[order], bounds)]


def records(**columns) -> list[dict]:
    """``[{name: value, ...}, ...]`` from equal-length columns (plain Python scalars): the fast
    form of ``DataFrame(columns).to_dict("records")``."""
    names = list(columns)
    values = [np.asarray(v, dtype=object).tolist() if not isinstance(v, list) else v
              for v in columns.values()]
    return [dict(zip(names, row)) for row in zip(*values)]


def numeric_columns(df: pd.DataFrame, columns: Iterable[str], *, source: str) -> pd.DataFrame:
    """``df[columns]`` as float64 (empty cells NaN); a non-numeric value raises
    :class:`MetadataError` naming the column and row (never coerced silently)."""
    out = {}
    for col in columns:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna().to_numpy() & df[col].notna().to_numpy() & \
            (df[col].astype(str).str.strip() != "").to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise MetadataError(f"{source}: column {col!r} holds a non-number at row {i}",
                                expected="numbers or empty cells",
                                found=f"{df[col].iloc[i]!r} ({int(bad.sum())} such rows)",
                                fix="re-download the file; do not edit it by hand")
        out[col] = values.astype(np.float64).to_numpy()
    return pd.DataFrame(out, index=df.index)


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
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc, fix) from None
    except (ValueError, OSError) as exc:
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
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc, fix) from None
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
