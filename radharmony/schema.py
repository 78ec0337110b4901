"""The harmonized table: one row per image, one schema for every dataset."""

from __future__ import annotations

import json
import posixpath

import numpy as np
import pandas as pd

from .errors import PathSafetyError, SchemaError
from .spec import DatasetSpec

#: Columns every harmonized table starts with, in this order.
REQUIRED_COLUMNS = ("patient_id", "study_id", "image_path", "view_position", "report")
#: Columns that identify a row and may never be missing.
ID_COLUMNS = ("patient_id", "study_id", "image_path")


def _as_object(col: pd.Series) -> pd.Series:
    """Text column as ``object`` dtype with ``None`` for missing (pandas 2 and 3 alike)."""
    out = col.astype(object)
    return out.where(col.notna(), None)


def _id_text(col: pd.Series) -> pd.Series:
    """An id column as strings; integers read back from CSV (``12.0``) lose their ``.0``."""
    if pd.api.types.is_float_dtype(col) and col.notna().all() and (col % 1 == 0).all():
        col = col.astype(np.int64)
    return _as_object(col.map(lambda v: v if v is None or isinstance(v, str) else str(v)))


def parse_literal(text: str):
    """Nested cell text -> value: JSON, else a Python literal as ``DataFrame.to_csv`` writes
    lists and dicts. Parsed as data only (``json`` / ``ast.literal_eval``): never executes code."""
    try:
        return json.loads(text)
    except ValueError:
        import ast

        return ast.literal_eval(text)


def check_relative_path(path: object, *, where: str) -> str:
    """``path`` if it is a clean relative POSIX path inside the image root, else raise."""
    if not isinstance(path, str) or not path:
        raise SchemaError(f"{where}: image_path is not a path", expected="a non-empty string",
                          found=repr(path), fix="check the metadata entry for this image")
    norm = posixpath.normpath(path.replace("\\", "/"))
    if posixpath.isabs(norm) or norm.startswith("../") or norm == ".." or (
            len(norm) > 1 and norm[1] == ":"):
        raise PathSafetyError(f"{where}: image_path {path!r} leaves base_image_dir",
                              expected="a path relative to base_image_dir without '..'",
                              found=f"{'an absolute' if posixpath.isabs(norm) else 'an escaping'}"
                                    f" path", fix="correct the metadata entry; radharmony never "
                                                  "reads files outside the dataset")
    return norm


def validate(df: pd.DataFrame, spec: DatasetSpec, *, source: str = "harmonized table"
             ) -> pd.DataFrame:
    """Check ``df`` against the standard schema and return a normalized copy.

    Required columns come first in :data:`REQUIRED_COLUMNS` order, then ``spec.label_cols``
    and ``spec.extra_cols``, then any further columns the caller added. Id columns are
    non-empty strings, ``image_path`` is relative and unique, text columns hold ``None`` for
    missing, label columns are float (``NaN`` = not mentioned). Raises :class:`SchemaError`.
    """
    if not isinstance(df, pd.DataFrame):
        raise SchemaError(f"{source}: not a table", expected="a pandas DataFrame",
                          found=type(df).__name__, fix="pass the DataFrame a harmonizer returned")
    wanted = list(spec.columns)
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise SchemaError(f"{source}: columns missing for dataset {spec.key!r}",
                          expected=f"columns {wanted}", found=f"{list(df.columns)}; "
                          f"missing {missing}", fix="re-create the table with "
                          f"{spec.key!r}'s harmonizer, or add the missing columns")
    out = df[wanted + [c for c in df.columns if c not in wanted]].reset_index(drop=True).copy()
    for col in ID_COLUMNS:
        out[col] = _id_text(out[col])
        bad = out[col].map(lambda v: not isinstance(v, str) or v.strip() == "")
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise SchemaError(f"{source}: row {i} has no {col}", expected=f"a non-empty {col} "
                              "in every row", found=f"{int(bad.sum())} empty value(s), first "
                              f"{df[col].iloc[i]!r} at row {i}", fix="fix or drop those rows")
    out["image_path"] = [check_relative_path(p, where=f"{source}, row {i}")
                         for i, p in enumerate(out["image_path"])]
    dup = out["image_path"].duplicated(keep=False)
    if dup.any():
        first = out.loc[dup, "image_path"].iloc[0]
        raise SchemaError(f"{source}: image_path {first!r} appears in {int(dup.sum())} rows",
                          expected="one row per image", found=f"{int(dup.sum())} rows share "
                          f"{out.loc[dup, 'image_path'].nunique()} path(s)",
                          fix="merge the duplicate rows in the harmonizer (one sample per image)")
    for col in ("view_position", "report"):
        out[col] = _as_object(out[col])
    for col in spec.label_cols:
        try:
            out[col] = pd.to_numeric(out[col]).astype(np.float32)
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{source}: label column {col!r} is not numeric",
                              expected="1, 0, -1 (uncertain) or missing", found=str(exc),
                              fix="harmonize again with this dataset's harmonizer") from None
    if "boxes" in out.columns:
        from .boxes import parse_boxes

        out["boxes"] = out["boxes"].map(parse_boxes).astype(object)
    for col in out.columns:
        if pd.api.types.is_string_dtype(out[col]) and col != "boxes":
            out[col] = _as_object(out[col])
    return out


def sample_ids(df: pd.DataFrame, spec: DatasetSpec) -> np.ndarray:
    """Deterministic ``"<key>:<native id>"`` for every row (native id from ``spec.id_col``)."""
    native = df[spec.id_col].astype(str)
    if spec.id_col == "image_path":
        native = native.str.replace(r"\.[A-Za-z0-9]{2,5}$", "", regex=True)
    return (spec.key + ":" + native).to_numpy(dtype=object)
