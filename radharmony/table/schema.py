"""The harmonized table: one row per image, one schema for every dataset."""

from __future__ import annotations

from itertools import repeat

import numpy as np
import pandas as pd

from ..errors import SchemaError
from ..annotations.boxes import parse_boxes
from ..cells import parse_literal
from ..spec import GRADE_LEVELS, SIDES, DatasetSpec
from .paths import check_relative_path, plainly_clean
from .questions import check_questions

#: ``DatasetSpec.column_types`` values
COLUMN_TYPES = ("Int64", "int64", "float64", "float32", "bool", "json")


def _as_object(col: pd.Series) -> pd.Series:
    """Text column as ``object`` dtype with ``None`` for missing (pandas 2 and 3 alike)."""
    out = col.astype(object)
    return out.where(col.notna(), None)


def _first_bad(bad: pd.Series) -> int:
    return int(np.flatnonzero(bad.to_numpy(dtype=bool))[0])


def _id_text(col: pd.Series, *, name: str, source: str) -> pd.Series:
    """An id column as strings; integers read back from CSV (``12.0``) lose their ``.0``.

    Only text and finite numbers are ids: lists, dicts, bytes, booleans or infinities raise.
    """
    if pd.api.types.infer_dtype(col, skipna=False) == "string":  # all str: nothing to convert
        return col.astype(object)
    if pd.api.types.is_float_dtype(col) and col.notna().all() and (col % 1 == 0).all() and \
            np.isfinite(col.to_numpy(dtype=np.float64)).all():
        col = col.astype(np.int64)
    col = _as_object(col)
    bad = col.map(lambda v: v is not None and not isinstance(v, (str, int, np.integer)) and not
                  (isinstance(v, (float, np.floating)) and np.isfinite(v)) or isinstance(v, bool))
    if bad.any():
        i = _first_bad(bad)
        raise SchemaError(f"{source}: row {i} has a {name} that is not an id",
                          expected="text or a whole number", found=f"{col.iloc[i]!r} "
                          f"({type(col.iloc[i]).__name__}), {int(bad.sum())} such row(s)",
                          fix="check the metadata entry for this image")
    return _as_object(col.map(lambda v: v if v is None or isinstance(v, str) else str(v)))


def _all_text(values: list) -> bool:
    """Every value a ``str`` (checked at C speed)."""
    return not values or set(map(type, values)) == {str}


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
    if df.columns.duplicated().any():
        raise SchemaError(f"{source}: column names repeat", expected="unique column names",
                          found=f"{sorted(set(df.columns[df.columns.duplicated()]))} more than "
                          "once", fix="rename or drop the repeated columns")
    wanted = list(spec.columns)
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise SchemaError(f"{source}: columns missing for dataset {spec.key!r}",
                          expected=f"columns {wanted}", found=f"{list(df.columns)}; "
                          f"missing {missing}", fix="re-create the table with "
                          f"{spec.key!r}'s harmonizer, or add the missing columns")
    # pandas >= 3 copies on write: the caller's frame is never changed, no deep copy needed
    out = df[wanted + [c for c in df.columns if c not in wanted]].reset_index(drop=True)
    for col in ("patient_id", "study_id"):  # image_path: check_relative_path below
        out[col] = _id_text(out[col], name=col, source=source)
        if col in spec.zero_pad:
            out[col] = _padded(out[col], df[col], spec.zero_pad[col])
        values = out[col].tolist()
        if _all_text(values) and all(values) and \
                not any(map(str.isspace, values)):
            continue  # every value a non-blank string (checked at C speed)
        bad = [i for i, v in enumerate(values) if not isinstance(v, str) or not v.strip()]
        if bad:
            i = bad[0]
            raise SchemaError(f"{source}: row {i} has no {col}", expected=f"a non-empty {col} "
                              "in every row", found=f"{len(bad)} empty value(s), first "
                              f"{df[col].iloc[i]!r} at row {i}", fix="fix or drop those rows")
    questions = spec.row_unit == "question"  # one row per question: its images repeat
    paths = out["image_path"].tolist()
    if not (questions and _all_text(paths)):  # questions: image_path is one of the
        # question's image_paths, each of which check_questions checks (below)
        out["image_path"] = pd.Series([p if isinstance(p, str) and plainly_clean(p) else
                                       check_relative_path(p, where=f"{source}, row {i}")
                                       for i, p in enumerate(paths)], dtype=object)
    elif out["image_path"].dtype != object:  # e.g. read back from Parquet as strings
        out["image_path"] = pd.Series(paths, dtype=object)
    per_root = spec.root_col is not None and spec.root_col in out.columns  # paths per root
    dup = pd.Series(False, index=out.index) if questions else \
        out.duplicated([spec.root_col, "image_path"], keep=False) if per_root else \
        out["image_path"].duplicated(keep=False)
    if dup.any():
        first = out.loc[dup, "image_path"].iloc[0]
        raise SchemaError(f"{source}: image_path {first!r} appears in {int(dup.sum())} rows",
                          expected="one row per image", found=f"{int(dup.sum())} rows share "
                          f"{out.loc[dup, 'image_path'].nunique()} path(s)",
                          fix="merge the duplicate rows in the harmonizer (one sample per image)")
    done = {"patient_id", "study_id", "image_path", "view_position", "report", "boxes",
            *spec.label_cols, *spec.extra_cols}  # columns already in their final type
    for col in ("view_position", "report"):
        out[col] = _as_object(out[col])
        if pd.api.types.infer_dtype(out[col], skipna=True) in ("string", "empty"):
            continue  # text or None throughout (checked at C speed)
        bad = out[col].map(lambda v: v is not None and not isinstance(v, str))
        if bad.any():
            i = _first_bad(bad)
            raise SchemaError(f"{source}: row {i} has a {col} that is not text",
                              expected="text or missing", found=f"{out[col].iloc[i]!r}"[:120]
                              + f" ({type(out[col].iloc[i]).__name__})",
                              fix="check the metadata entry for this image")
    for col in spec.label_cols:
        try:
            out[col] = pd.to_numeric(out[col]).astype(np.float32)
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{source}: label column {col!r} is not numeric",
                              expected="1, 0, -1 (uncertain) or missing", found=str(exc),
                              fix="harmonize again with this dataset's harmonizer") from None
        if np.isinf(out[col].to_numpy()).any():
            raise SchemaError(f"{source}: label column {col!r} holds an infinity",
                              expected="finite labels or missing (NaN)", found="inf",
                              fix="check the metadata entries of this label")
    kinds = _label_kinds(spec)
    for col in spec.extra_cols:
        if col in kinds:
            out[col] = kinds[col](out[col], name=col, source=source)
        elif col != "boxes":
            out[col] = _typed(out[col], spec.column_types.get(col, "text"),
                              width=spec.zero_pad.get(col), name=col, source=source)
    if "boxes" in out.columns:
        out["boxes"] = [_boxes_cell(v, where=f"{source}, row {i}")
                        for i, v in enumerate(out["boxes"])]
        out["boxes"] = out["boxes"].astype(object)
    for col in out.columns:
        if col not in done and pd.api.types.is_string_dtype(out[col]):
            out[col] = _as_object(out[col])
    if questions:
        check_questions(out, spec, source, lambda p, where: isinstance(p, str) and
                        plainly_clean(p) or check_relative_path(p, where=where))
    return out


def _label_kinds(spec: DatasetSpec) -> dict:
    """Each regression, grade and side column of ``spec`` -> the check that types it; every
    one must be among the extra columns."""
    kinds = {**dict.fromkeys(spec.reg_cols, _reg_values),
             **dict.fromkeys(spec.grade_cols, _grade_values),
             **dict.fromkeys(spec.side_cols, _side_values)}
    undeclared = [c for c in kinds if c not in spec.extra_cols]
    if undeclared:
        raise SchemaError(f"dataset {spec.key!r}: label columns outside extra_cols",
                          expected="every reg_cols, grade and side column among extra_cols",
                          found=f"{undeclared} not declared",
                          fix="add them to the DatasetSpec's extra_cols")
    return kinds


def _kind_error(source: str, name: str, expected: str, found) -> SchemaError:
    return SchemaError(f"{source}: column {name!r} holds a value out of its kind",
                       expected=expected, found=repr(found)[:120],
                       fix="harmonize again with this dataset's harmonizer")


def _reg_values(col: pd.Series, *, name: str, source: str) -> pd.Series:
    """A regression target: finite floats, NaN where unknown."""
    try:
        out = pd.to_numeric(col).astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise _kind_error(source, name, "a number or missing", exc) from None
    if np.isinf(out.to_numpy()).any():
        raise _kind_error(source, name, "a finite number or missing", "inf")
    return out


def _grade_values(col: pd.Series, *, name: str, source: str) -> pd.Series:
    """A grade: 0-4 (the index of :data:`GRADE_LEVELS`), NaN where unknown."""
    try:
        out = pd.to_numeric(col).astype(np.float32)
    except (TypeError, ValueError) as exc:
        raise _kind_error(source, name, "a grade 0-4 or missing", exc) from None
    v = out.to_numpy()
    bad = ~np.isnan(v) & ~np.isin(v, np.arange(len(GRADE_LEVELS), dtype=np.float32))
    if bad.any():
        raise _kind_error(source, name, f"a grade 0-{len(GRADE_LEVELS) - 1} "
                          f"({', '.join(GRADE_LEVELS)}) or missing", v[bad][0])
    return out


def _side_values(col: pd.Series, *, name: str, source: str) -> pd.Series:
    """A side: one of :data:`SIDES`, None where not said."""
    out = _text(col, None)
    bad = out.map(lambda v: v is not None and v not in SIDES)
    if bad.any():
        raise _kind_error(source, name, f"one of {SIDES} or missing", out[bad].iloc[0])
    return out


def _padded(text: pd.Series, raw: pd.Series, width: int) -> pd.Series:
    """Ids that arrived as numbers (a CSV reader's doing) zero-padded back to ``width``."""
    if raw.dtype == object and all(type(v) is str for v in raw.tolist()):
        return text
    numeric = raw.map(lambda v: not isinstance(v, (str, bool)) and v is not None and
                      v == v).to_numpy(dtype=bool)
    return text.where(~numeric, text.map(lambda v: v if v is None else v.zfill(width)))


def _typed(col: pd.Series, kind: str, *, width: int | None, name: str, source: str
           ) -> pd.Series:
    """Extra column ``name`` in its declared type (see ``DatasetSpec.column_types``)."""
    try:
        if kind == "text":
            return _text(col, width)
        if kind == "json":
            return _nested(col)
        if kind in ("float64", "float32"):
            return pd.to_numeric(col).astype(kind)
        if kind in ("Int64", "int64"):
            return pd.to_numeric(col).astype(kind)
        if kind == "bool":
            if pd.api.types.is_bool_dtype(col):
                return col
            flags = col.map(lambda v: {"true": True, "false": False, "1": True, "0": False}
                            .get(str(v).strip().lower()))
            if flags.isna().any():
                raise ValueError(f"not a truth value: {col[flags.isna()].iloc[0]!r}")
            return flags.astype(bool)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"{source}: column {name!r} is not {kind}",
                          expected=f"{kind} values (or missing)",
                          found=f"{type(exc).__name__}: {exc}"[:200],
                          fix="pass the table as the harmonizer wrote it") from None
    raise SchemaError(f"column_types[{name!r}] names an unknown type",
                      expected=f"one of {COLUMN_TYPES}", found=repr(kind),
                      fix="correct the dataset's DatasetSpec")


def _text(col: pd.Series, width: int | None) -> pd.Series:
    """Text with None for missing; numbers a CSV reader made of digits become text again
    (``12.0`` -> ``"12"``, zero-padded to ``width``)."""
    if col.dtype == object and pd.api.types.infer_dtype(col, skipna=False) == "string":
        return col  # all text, nothing missing (one C-level pass)
    if col.dtype == object and pd.api.types.infer_dtype(col, skipna=True) in ("string",
                                                                               "empty"):
        return col.where(col.notna(), None) if col.hasnans else col

    def one(v):
        if v is None or isinstance(v, str) or isinstance(v, bool):
            return v
        if isinstance(v, (int, np.integer)):
            v = str(v)
        elif isinstance(v, (float, np.floating)):
            if v != v:
                return None
            v = str(int(v)) if float(v).is_integer() else repr(float(v))
        else:
            return v
        return v.zfill(width) if width else v

    return pd.Series([one(v) for v in _as_object(col).tolist()], index=col.index,
                     dtype=object)


def _nested(col: pd.Series) -> pd.Series:
    """Lists and dicts; their text (JSON, or the Python literal ``to_csv`` writes) parsed
    back as data only; missing is None."""
    values = col.tolist()
    kinds = set(map(type, values))  # one C-level pass
    if not any(issubclass(k, (str, float)) for k in kinds):
        return col.astype(object)
    return pd.Series([parse_literal(v) if isinstance(v, str) else
                      None if isinstance(v, float) and v != v else v for v in values],
                     index=col.index, dtype=object)


def _boxes_cell(value, *, where: str) -> list[dict]:
    try:
        return parse_boxes(value)
    except (TypeError, ValueError, KeyError) as exc:
        raise SchemaError(f"{where}: boxes cell cannot be read", expected="a list of box "
                          "dicts, its JSON text, or missing", found=f"{type(exc).__name__}: "
                          f"{exc}"[:200], fix="check the metadata entries of this image's boxes"
                          ) from None


def canonical_views(values, view_map) -> np.ndarray:
    """Raw view names -> canonical ones via ``view_map`` (exact, after strip/upper-casing);
    unmapped names stay as written (stripped), missing or empty ones become None."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(values, dtype=object), dtype=object))
    canon = np.empty(len(uniques) + 1, dtype=object)  # each distinct name once; last: missing
    for i, v in enumerate(uniques):
        k = v.strip().upper() if isinstance(v, str) else None
        canon[i] = view_map.get(k, v.strip()) if k else None
    return canon[codes]


def view_lists(lists, view_map, *, shared: bool = False) -> list[list]:
    """Each row's list of raw view names (a question's images) mapped by
    :func:`canonical_views`, each distinct list mapped once; a missing list is ``[]``. Every
    row gets a list of its own unless ``shared`` (rows of one distinct list then share it:
    for read-only use)."""
    seen: dict = {}
    out = []
    for v in lists:
        k = tuple(v) if v is not None and len(v) else ()
        mapped = seen.get(k)
        if mapped is None:
            mapped = seen[k] = canonical_views(list(k), view_map).tolist() if k else []
        out.append(mapped if shared else list(mapped))
    return out


def sample_ids(df: pd.DataFrame, spec: DatasetSpec) -> np.ndarray:
    """Deterministic ``"<key>:<native id>"`` for every row (native id from ``spec.id_col``;
    an ``image_path`` id loses its file extension, ``.`` + 2-5 ASCII letters/digits, unless
    that would make two ids equal -- ``I.png``, ``I.PNG``, ``I.jpg`` -- in which case those
    rows keep their whole path; the result depends only on the set of paths)."""
    prefix, strip_ext = spec.key + ":", spec.id_col == "image_path"
    values = df[spec.id_col].tolist()
    if pd.api.types.infer_dtype(values, skipna=False) != "string":  # checked at C speed
        values = [v if type(v) is str else str(v) for v in values]
    if not strip_ext:
        return np.array([prefix + v for v in values], dtype=object)
    out, stripped = [], False
    suffix = _extension(values[0]) if values else None
    if suffix is not None and all(map(str.endswith, values, repeat(suffix))):  # one extension
        cut = len(suffix)  # (a path ending in ".png" has its extension's dot right there)
        out, stripped = [prefix + v[:-cut] for v in values], True
    else:
        for v in values:
            ext = _extension(v)
            if ext is not None:
                v, stripped = v[:-len(ext)], True
            out.append(prefix + v)
    if stripped and len(set(out)) < len(out):  # nothing stripped: ids are the paths
        out = _unique_ids(out, [prefix + v for v in values])
    return np.array(out, dtype=object)


def _extension(path: str) -> str | None:
    """``path``'s file extension with its dot (``".png"``): a dot within the last 6
    characters followed by 2-5 ASCII letters/digits; None when there is none."""
    i = path.rfind(".", max(0, len(path) - 6))
    if i >= 0:
        ext = path[i + 1:]
        if len(ext) >= 2 and ext.isascii() and ext.isalnum():
            return path[i:]
    return None


def _unique_ids(stripped: list[str], whole: list[str]) -> list[str]:
    """``stripped``, with every member of a colliding group replaced by its ``whole`` id
    (repeated until no collision is left or only equal whole ids remain)."""
    from collections import Counter

    final, expand = list(stripped), set()
    while True:
        dups = {k for k, c in Counter(final).items() if c > 1}
        new = {i for i, f in enumerate(final) if f in dups} - expand
        if not new:
            return final
        expand |= new
        final = [whole[i] if i in expand else stripped[i] for i in range(len(stripped))]
