"""Faults in metadata -> errors naming the file and the entry at fault.

An unexpected exception in a dataset's ``read`` or ``harmonize_raw`` becomes a
:class:`~radharmony.errors.MetadataError` naming the file and the entry (JSON key, list item,
table row, or line) at fault, found by re-running the pure ``harmonize_raw`` on halves of the
raw metadata (:func:`locate_entry`); identical repeated image references are merged with a
:class:`~radharmony.errors.RowsDroppedWarning` (:func:`merge_duplicate_rows`).
"""

from __future__ import annotations

import gzip
import json
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import SHOW, MetadataError, RadHarmonyError, RowsDroppedWarning, shorten

_FIX_METADATA = ("re-download or re-extract the file; if it is intact, report this as a "
                 "radharmony bug, quoting this message")


# -- metadata: reading --------------------------------------------------------------------------
def _file_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _non_utf8_line(path: Path) -> str | None:
    """``"line N"`` of the first byte sequence that is not UTF-8 (file offsets, not chunks)."""
    try:
        _file_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = _file_bytes(path).count(b"\n", 0, exc.start) + 1
        return f"line {line} (byte {exc.start})"
    except Exception:  # unreadable or bad gzip: the caller reports the original exception
        return None
    return None


def read_error(exc: Exception, path: Path, *, description: str) -> MetadataError:
    """The :class:`MetadataError` for an unexpected exception while reading ``path``."""
    where, found = "", f"{type(exc).__name__}: {shorten(exc)}"
    try:
        size = path.stat().st_size
    except OSError:
        size = None
    if size == 0:
        found = "an empty file (0 bytes)"
    elif isinstance(exc, json.JSONDecodeError):
        where = f" at line {exc.lineno} column {exc.colno}"
        found = f"invalid JSON ({exc.msg})"
    elif isinstance(exc, UnicodeDecodeError):
        line = _non_utf8_line(path)
        where = f" at {line}" if line else ""
        found = f"bytes that are not UTF-8 ({shorten(exc.reason)})"
    elif isinstance(exc, (EOFError, gzip.BadGzipFile, zlib.error)):
        found = f"a truncated or corrupt gzip stream ({type(exc).__name__}: {shorten(exc)})"
    elif isinstance(exc, KeyError):
        found = f"no key or column {exc.args[0]!r}" if exc.args else found
    return MetadataError(f"{path}{where} cannot be read", expected=f"{description}, complete "
                         "and in the format the dataset ships", found=found, fix=_FIX_METADATA)


# -- metadata: harmonizing ----------------------------------------------------------------------
def _entries(raw: Any) -> tuple[int, Callable[[int, int], Any], Callable[[int], str]] | None:
    """``(n, take(lo, hi), describe(i))`` when ``raw`` is a collection of entries."""
    if isinstance(raw, pd.DataFrame):
        first = raw.columns[0] if len(raw.columns) else None

        def describe(i: int) -> str:
            cell = f" ({first}={raw.iloc[i, 0]!r})" if first is not None else ""
            return shorten(f"row {i}{cell}", 200)
        return len(raw), lambda a, b: raw.iloc[a:b], describe
    if isinstance(raw, (dict, list)):
        values = raw.values() if isinstance(raw, dict) else raw
        if any(isinstance(v, (pd.DataFrame, np.ndarray)) for v in values):
            return None  # a bundle of several tables, not entries
        if isinstance(raw, dict):
            keys = list(raw)
            return (len(keys), lambda a, b: {k: raw[k] for k in keys[a:b]},
                    lambda i: f"entry {shorten(repr(keys[i]), 200)}")
        return (len(raw), lambda a, b: raw[a:b],
                lambda i: f"item {i} (line {i + 1} if one item per line): {shorten(repr(raw[i]))}")
    return None


def locate_entry(raw: Any, run: Callable[[Any], Any], exc_type: type) -> str | None:
    """The first entry of ``raw`` on which ``run`` alone raises ``exc_type``, by bisection.

    None when ``raw`` is not a collection of entries, when even no entry fails (the fault is
    in the file's structure, e.g. a missing column) or when only a combination fails.
    """
    parts = _entries(raw)
    if parts is None or parts[0] == 0:
        return None
    n, take, describe = parts

    def fails(lo: int, hi: int) -> bool:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run(take(lo, hi))
        except exc_type:
            return True
        except Exception:
            return False
        return False

    if fails(0, 0):
        return None
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(lo, mid):
            hi = mid
        elif fails(mid, hi):
            lo = mid
        else:
            return None
    return describe(lo) if n > 1 or fails(0, 1) else None


def harmonize_error(exc: Exception, path: Path, entry: str | None, *, description: str
                    ) -> RadHarmonyError:
    """``exc`` raised while harmonizing ``path`` as a radharmony error naming file and entry."""
    at = f" (metadata {entry})" if entry else ""
    if isinstance(exc, RadHarmonyError):
        return type(exc)(exc.what + at, expected=exc.expected, found=exc.found, fix=exc.fix)
    found = f"{type(exc).__name__}: {shorten(exc)}"
    if isinstance(exc, KeyError) and exc.args:
        found = f"no key or column {exc.args[0]!r} ({found})"
    return MetadataError(f"{path}: {entry or 'the file'} cannot be harmonized",
                         expected=f"{description}, with every entry in the form the dataset "
                         "ships", found=found, fix=_FIX_METADATA)


def _cell_key(v: Any) -> str | None:
    if v is None or isinstance(v, float) and np.isnan(v) or v is pd.NA or v is pd.NaT:
        return None
    return repr(v)


def merge_duplicate_rows(df: Any, *, source: str) -> Any:
    """Drop rows repeating another row entirely (same image, same values), with a warning.

    Repeated image paths whose rows differ are left for :func:`radharmony.table.schema.validate`
    to refuse (the harmonizer must merge them).
    """
    if not isinstance(df, pd.DataFrame) or "image_path" not in df.columns or df.empty:
        return df
    paths = df["image_path"]
    try:
        repeated = paths.duplicated(keep=False) & paths.notna()
    except TypeError:  # unhashable paths: validate() names them
        return df
    if not repeated.any():
        return df
    keys = df[repeated].map(_cell_key)
    drop = keys.index[keys.duplicated(keep="first")]
    if len(drop) == 0:
        return df
    first = list(dict.fromkeys(df.loc[drop, "image_path"].astype(str)))[:SHOW]
    warnings.warn(f"{source}: {len(drop)} repeated image reference(s) with identical values "
                  f"merged, e.g. {first}; the table has {len(df) - len(drop)} rows for "
                  f"{len(df)} references.", RowsDroppedWarning, stacklevel=4)
    return df.drop(index=drop)


def naming_file(exc: RadHarmonyError, path: Path) -> RadHarmonyError:
    """``exc`` when its message names ``path``'s file, else the same error led by the path."""
    if path.name in str(exc) or type(exc).__init__ is not RadHarmonyError.__init__:
        return exc
    return type(exc)(f"{path}: {exc.what}", expected=exc.expected, found=exc.found, fix=exc.fix)
