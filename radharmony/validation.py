"""Checking inputs up front, and turning faults in metadata into clear errors.

Two halves, both dataset-independent:

* **Metadata guards** used by :meth:`BaseHarmonizer.harmonize`: an unexpected exception in a
  dataset's ``read`` or ``harmonize_raw`` becomes a :class:`~radharmony.errors.MetadataError`
  naming the file and the entry (JSON key, list item, table row, or line) at fault, found by
  re-running the pure ``harmonize_raw`` on halves of the raw metadata; identical repeated
  image references are merged with a :class:`~radharmony.errors.RowsDroppedWarning`.
* **Image checks**: :func:`validate_dataset` (also ``dataset.validate()``) checks every image
  of a dataset for path safety, existence, non-emptiness and decodability, with a progress bar
  and optional worker processes, and returns a :class:`ValidationReport`;
  :func:`drop_missing` implements ``on_missing="drop"``.
"""

from __future__ import annotations

import gzip
import json
import os
import warnings
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from .errors import (ImageReadError, MetadataError, PathSafetyError, RadHarmonyError,
                     RowsDroppedWarning)

#: How many problem paths a warning or a summary lists.
SHOW = 5
_FIX_METADATA = ("re-download or re-extract the file; if it is intact, report this as a "
                 "radharmony bug, quoting this message")


def shorten(text: object, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


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

    Repeated image paths whose rows differ are left for :func:`radharmony.schema.validate`
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


def _naming_file(exc: RadHarmonyError, path: Path) -> RadHarmonyError:
    """``exc`` when its message names ``path``'s file, else the same error led by the path."""
    if path.name in str(exc) or type(exc).__init__ is not RadHarmonyError.__init__:
        return exc
    return type(exc)(f"{path}: {exc.what}", expected=exc.expected, found=exc.found, fix=exc.fix)


def guarded_harmonize(harmonizer, path: Path) -> pd.DataFrame:
    """``read`` -> ``harmonize_raw`` -> merge repeats -> ``validate``, every fault a radharmony
    error naming ``path`` and, where one is at fault, the entry."""
    from .schema import validate

    source, description = str(path), harmonizer.metadata_description
    try:
        raw = harmonizer.read(path)
    except MemoryError:
        raise
    except RadHarmonyError as exc:
        named = _naming_file(exc, path)
        if named is exc:
            raise
        raise named from None
    except Exception as exc:
        raise read_error(exc, path, description=description) from exc

    def run(part: Any) -> pd.DataFrame:
        df = harmonizer.harmonize_raw(part, source=source)
        return validate(merge_duplicate_rows(df, source=source), harmonizer.spec, source=source)

    try:
        df = run(raw)
    except MemoryError:
        raise
    except Exception as exc:
        # the dataset's own MetadataError already names the entry; others are located here
        entry = None if isinstance(exc, MetadataError) else locate_entry(raw, run, type(exc))
        if not isinstance(exc, RadHarmonyError):
            raise harmonize_error(exc, path, entry, description=description) from exc
        named = _naming_file(exc if entry is None else
                             harmonize_error(exc, path, entry, description=description), path)
        if named is exc:
            raise
        raise named from None
    if df.empty:
        warnings.warn(f"{path} holds no image references: the table is empty.", UserWarning,
                      stacklevel=3)
    return df


# -- images --------------------------------------------------------------------------------------
def drop_missing(df: pd.DataFrame, base_image_dir: str | os.PathLike, *, owner: str
                 ) -> pd.DataFrame:
    """``df`` without the rows whose image file is absent, warning with the count and the
    first paths (``on_missing="drop"``). Raises when no image at all is present."""
    base = os.fspath(base_image_dir)
    present = np.fromiter((os.path.isfile(os.path.join(base, p)) for p in df["image_path"]),
                          dtype=bool, count=len(df))
    if present.all():
        return df
    absent = df["image_path"][~present]
    if not present.any():
        raise ImageReadError(f"{owner}: none of the {len(df)} image files exist under "
                             f"base_image_dir {base}", expected="the folder the table's "
                             "image_path values are relative to",
                             found=f"no file at e.g. {list(absent[:SHOW])}",
                             fix="check base_image_dir (and that the images are extracted)")
    warnings.warn(f"{owner}: dropped {len(absent)} of {len(df)} rows whose image file is absent "
                  f"under {base} (on_missing='drop'), first: {list(absent[:SHOW])}",
                  RowsDroppedWarning, stacklevel=3)
    return df[present]


#: Problem kinds a :class:`ValidationReport` lists, in the order they are checked.
PROBLEMS = ("unsafe_path", "missing", "not_a_file", "empty", "undecodable")


def check_image(base_image_dir: str | os.PathLike, rel: str, *, decode: bool = True,
                min_side: int | None = None) -> tuple[str, str] | None:
    """``(problem, message)`` for one image, or None when it passes.

    Path safety (``..``, absolute, symlinks leaving the root), existence, a regular file,
    non-empty, then either a full decode (``decode=True``) or the header checks only
    (format from the leading bytes, header intact, size guards).
    """
    from .imaging import check_header, read_image, safe_path, sniff

    try:
        full = safe_path(base_image_dir, rel)
    except PathSafetyError as exc:
        return "unsafe_path", str(exc)
    try:
        st = os.stat(full)
    except FileNotFoundError:
        return "missing", f"no file at {full}"
    except OSError as exc:
        return "missing", f"{full}: {exc}"
    if not os.path.isfile(full):
        return "not_a_file", f"{full} is not a regular file"
    if st.st_size == 0:
        return "empty", f"{full} is empty (0 bytes)"
    try:
        if decode:
            read_image(full, min_side=min_side)
        else:
            with open(full, "rb") as fh:
                head = fh.read(132)
            kind = sniff(head)
            if kind is None:
                read_image(full)  # raises the standard "not a PNG, JPEG or DICOM" error
            check_header(full, kind, head)
    except ImageReadError as exc:
        return "undecodable", str(exc)
    return None


def _check_chunk(args: tuple) -> list[tuple[int, str, str]]:
    base, items, decode, min_side = args
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # colour warnings: one per process is noise here
        for i, rel in items:
            res = check_image(base, rel, decode=decode, min_side=min_side)
            if res is not None:
                out.append((i, *res))
    return out


@dataclass
class ValidationReport:
    """What :func:`validate_dataset` found: one row per problem image in :attr:`problems`
    (``sample_id``, ``image_path``, ``problem`` -- one of :data:`PROBLEMS` -- ``message``)."""

    name: str
    base_image_dir: str
    checked: int
    decoded: bool
    problems: pd.DataFrame = field(repr=False)

    @property
    def ok(self) -> bool:
        return self.problems.empty

    def counts(self) -> dict[str, int]:
        """Problem kind -> number of images, every kind listed."""
        c = self.problems["problem"].value_counts()
        return {k: int(c.get(k, 0)) for k in PROBLEMS}

    def paths(self, problem: str | None = None) -> list[str]:
        """Image paths with ``problem`` (all problems when None)."""
        p = self.problems
        return list(p["image_path"] if problem is None else p.loc[p["problem"] == problem,
                                                                  "image_path"])

    def raise_if_problems(self) -> None:
        """Raise :class:`ImageReadError` summarising the problems, if any."""
        if not self.ok:
            first = self.problems.iloc[0]
            raise ImageReadError(f"{self.name}: {len(self.problems)} of {self.checked} images "
                                 f"failed validation under {self.base_image_dir}",
                                 expected="every image present, inside the root and decodable",
                                 found=f"{self._count_text()}; first: {first['message']}",
                                 fix="re-extract the images, or build the dataset with "
                                     "on_missing='drop' to skip absent ones")

    def _count_text(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in self.counts().items() if n) or "no problems"

    def __str__(self) -> str:
        how = "decoded" if self.decoded else "header-checked"
        lines = [f"{self.name}: {self.checked} images {how} under {self.base_image_dir}: "
                 f"{self._count_text()}"]
        lines += [f"  {r.problem}: {r.sample_id}: {shorten(r.message, 200)}"
                  for r in self.problems.head(SHOW).itertuples()]
        if len(self.problems) > SHOW:
            lines.append(f"  ... and {len(self.problems) - SHOW} more (report.problems)")
        return "\n".join(lines)


def validate_table(df: pd.DataFrame, base_image_dir: str | os.PathLike, *,
                   name: str = "dataset", decode: bool = True, num_workers: int = 0,
                   progress: bool = True, min_side: int | None = None,
                   chunk_size: int = 64) -> ValidationReport:
    """Check every ``image_path`` of ``df`` under ``base_image_dir`` (see :func:`check_image`).

    Args:
        name: how the dataset is named in the report.
        decode: fully decode each image (slow, thorough) or check headers only (fast).
        num_workers: worker processes; 0 checks in this process.
        progress: show a tqdm progress bar.
        min_side: decode JPEGs at reduced scale down to this side (as the pipeline does).
    """
    from tqdm.auto import tqdm

    if not isinstance(num_workers, int) or num_workers < 0:
        raise RadHarmonyError("num_workers must be a whole number >= 0", expected="0 (this "
                              "process) or a number of worker processes",
                              found=repr(num_workers), fix="pass num_workers=4, for example")
    base = os.fspath(base_image_dir)
    rels = list(df["image_path"])
    chunks = [(base, list(enumerate(rels))[i:i + chunk_size], decode, min_side)
              for i in range(0, len(rels), chunk_size)]
    found: list[tuple[int, str, str]] = []
    with tqdm(total=len(rels), desc=f"validating {name}", unit="img", disable=not progress) \
            as bar:
        if num_workers == 0:
            results = map(_check_chunk, chunks)
            pool = None
        else:
            pool = ProcessPoolExecutor(max_workers=num_workers)
            results = pool.map(_check_chunk, chunks)
        try:
            for chunk, res in zip(chunks, results):
                found += res
                bar.update(len(chunk[1]))
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    ids = df["sample_id"].to_numpy(dtype=object) if "sample_id" in df.columns else \
        np.asarray(rels, dtype=object)
    problems = pd.DataFrame({"sample_id": [ids[i] for i, _, _ in found],
                             "image_path": [rels[i] for i, _, _ in found],
                             "problem": [p for _, p, _ in found],
                             "message": [m for _, _, m in found]})
    return ValidationReport(name, base, len(rels), decode, problems)


def validate_dataset(dataset, *, decode: bool = True, num_workers: int = 0,
                     progress: bool = True) -> ValidationReport:
    """Check every image of a built dataset up front; see :func:`validate_table`."""
    size = getattr(getattr(dataset, "default_transform", None), "size", None)
    return validate_table(dataset.harmonized_df, dataset.base_image_dir,
                          name=type(dataset).__name__, decode=decode, num_workers=num_workers,
                          progress=progress, min_side=size)


__all__ = ["PROBLEMS", "ValidationReport", "check_image", "drop_missing", "guarded_harmonize",
           "validate_dataset", "validate_table"]
