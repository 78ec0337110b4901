"""Reading CSV metadata tables as shipped (plain, ``.gz`` or ``.zip``), with four-part errors."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from .errors import MetadataError, MetadataNotFoundError


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
    except (ValueError, UnicodeDecodeError, OSError, EOFError) as exc:
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


def find_optional(names: Iterable[str], *near: str | Path | None) -> Path | None:
    """The first existing file called one of ``names`` in or near the folders ``near`` (the
    folder itself, its ``metadata/`` sub-folders and up to three ancestors), else None."""
    from .discovery import search_dirs

    for base in near:
        for d in search_dirs(base):
            for name in names:
                if (d / name).is_file():
                    return d / name
    return None


def canonical_views(values, view_map) -> np.ndarray:
    """Raw view names -> canonical ones via ``view_map`` (exact, after strip/upper-casing);
    unmapped names stay as written (stripped), missing or empty ones become None."""
    s = pd.Series(values, dtype=object)
    key = s.map(lambda v: v.strip().upper() if isinstance(v, str) else None)
    out = key.map(lambda k: view_map.get(k, k) if k else None)
    return out.to_numpy(dtype=object)


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
