"""Checking a dataset's images up front.

* :func:`validate_dataset` (also ``dataset.validate()``) checks every image
  of a dataset for path safety, existence, non-emptiness and decodability, with a progress bar
  and optional worker processes, and returns a :class:`ValidationReport`;
  :func:`drop_missing` implements ``on_missing="drop"``.
* :func:`~radharmony.data.shared.shared_files` (:mod:`radharmony.data.shared`) finds one image
  file reachable from rows of several patients (a hard link or a symlink inside the dataset),
  keyed by the file's identity (device and inode), not its path: such an image could land on
  both sides of a patient split.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .shared import describe_shared, file_id, shared_files
from ..errors import (SHOW, ImageReadError, PathSafetyError, RadHarmonyError, RowsDroppedWarning,
                      shorten)

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
PROBLEMS = ("unsafe_path", "missing", "not_a_file", "empty", "undecodable", "shared_image")


def check_image(base_image_dir: str | os.PathLike, rel: str, *, decode: bool = True,
                min_side: int | None = None) -> tuple[str, str] | None:
    """``(problem, message)`` for one image, or None when it passes.

    Path safety (``..``, absolute, symlinks leaving the root), existence, a regular file,
    non-empty, then either a full decode (``decode=True``) or the header checks only
    (format from the leading bytes, header intact, size guards).
    """
    return _check_image(base_image_dir, rel, decode=decode, min_side=min_side)[0]


def _check_image(base_image_dir, rel, *, decode, min_side):
    """:func:`check_image`'s answer and the file's ``(st_dev, st_ino)`` (None: no file)."""
    from ..imaging.read import check_header, read_image, safe_path, sniff

    try:
        full = safe_path(base_image_dir, rel)
    except PathSafetyError as exc:
        return ("unsafe_path", str(exc)), None
    try:
        st = os.stat(full)
    except FileNotFoundError:
        return ("missing", f"no file at {full}"), None
    except OSError as exc:
        return ("missing", f"{full}: {exc}"), None
    if not os.path.isfile(full):
        return ("not_a_file", f"{full} is not a regular file"), None
    ident = file_id(st)
    if st.st_size == 0:
        return ("empty", f"{full} is empty (0 bytes)"), ident
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
        return ("undecodable", str(exc)), ident
    return None, ident


def _check_chunk(args: tuple) -> tuple[list[tuple[int, str, str]], list[tuple[int, tuple]]]:
    base, items, decode, min_side = args
    out, idents = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # colour warnings: one per process is noise here
        for i, rel in items:
            res, ident = _check_image(base, rel, decode=decode, min_side=min_side)
            if res is not None:
                out.append((i, *res))
            if ident is not None:
                idents.append((i, ident))
    return out, idents


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
                   chunk_size: int = 64, group_col: str | None = "patient_id"
                   ) -> ValidationReport:
    """Check every ``image_path`` of ``df`` under ``base_image_dir`` (see :func:`check_image`),
    and that no file is reached from rows of two ``group_col`` values (:func:`shared_files`;
    every row of such a file is listed as ``shared_image``).

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
    identities: list = [None] * len(rels)
    with tqdm(total=len(rels), desc=f"validating {name}", unit="img", disable=not progress) \
            as bar:
        if num_workers == 0:
            results = map(_check_chunk, chunks)
            pool = None
        else:
            pool = ProcessPoolExecutor(max_workers=num_workers)
            results = pool.map(_check_chunk, chunks)
        try:
            for chunk, (res, idents) in zip(chunks, results):
                found += res
                for i, ident in idents:
                    identities[i] = ident
                bar.update(len(chunk[1]))
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    ids = df["sample_id"].to_numpy(dtype=object) if "sample_id" in df.columns else \
        np.asarray(rels, dtype=object)
    if group_col is not None and group_col in df.columns:
        groups = df[group_col].to_numpy(dtype=object)
        for rows in shared_files(identities, groups):
            text = describe_shared(rows, ids, groups, group_col)
            found += [(r, "shared_image", f"{rels[r]} is one file with the images of {text} "
                          f"(a hard link or a symlink): it crosses {group_col}s") for r in rows]
    problems = pd.DataFrame({"sample_id": [ids[i] for i, _, _ in found],
                             "image_path": [rels[i] for i, _, _ in found],
                             "problem": [p for _, p, _ in found],
                             "message": [m for _, _, m in found]})
    return ValidationReport(name, base, len(rels), decode, problems)


def validate_dataset(dataset, *, decode: bool = True, num_workers: int = 0,
                     progress: bool = True) -> ValidationReport:
    """Check every image of a built dataset up front; see :func:`validate_table`."""
    size = getattr(getattr(dataset, "default_transform", None), "size", None)
    spec = getattr(dataset, "spec", None)
    return validate_table(dataset.harmonized_df, dataset.base_image_dir,
                          name=type(dataset).__name__, decode=decode, num_workers=num_workers,
                          progress=progress, min_side=size,
                          group_col=getattr(spec, "group_col", "patient_id"))


def validate_split(harmonizer, *, decode: bool = False, num_workers: int = 0,
                   progress: bool = True, first_n: int = 10) -> dict:
    """Validate one split from its metadata up: read and harmonize (every fault a metadata
    problem naming file and entry), the schema (kept going past a fault, so that every unsafe
    path is listed), then every image (:func:`validate_table`).

    Returns a JSON-ready report ``{"key", "root", "metadata", "ok", "rows", "checked",
    "problems": {kind: count}, "first": {kind: [{"image_path", "detail"}]}}``.
    """
    from ..table.guard import read_error
    from ..table.schema import validate

    root = harmonizer.base_image_dir
    report: dict = {"key": harmonizer.spec.key, "root": str(root), "images_decoded": decode,
                    "rows": 0, "checked": 0, "problems": {}, "first": {}}

    def add(kind: str, path: str | None, detail: str) -> None:
        report["problems"][kind] = report["problems"].get(kind, 0) + 1
        first = report["first"].setdefault(kind, [])
        if len(first) < first_n:
            first.append({"image_path": path, "detail": detail})

    try:
        meta = harmonizer.resolve_metadata_path()
        report["metadata"] = str(meta)
        try:
            raw = harmonizer.read(harmonizer.inputs(meta))
        except RadHarmonyError:
            raise
        except Exception as exc:  # the shared guard's message: file, line, expected, found
            raise read_error(exc, meta, description=harmonizer.metadata_description) from None
        df = harmonizer.harmonize_raw(raw, source=str(meta))
    except RadHarmonyError as exc:
        add("metadata", None, str(exc))
        report["ok"] = False
        return report
    report["rows"] = len(df)
    try:
        validate(df, harmonizer.spec, source=str(meta))
    except PathSafetyError:
        pass  # every unsafe path is listed by the per-file check below
    except RadHarmonyError as exc:
        add("schema", None, str(exc))
    paths = pd.DataFrame({"image_path": [p if isinstance(p, str) else "" for p in
                                         df["image_path"]]})
    files = validate_table(paths, root, name=harmonizer.spec.key, decode=decode,
                           num_workers=num_workers, progress=progress)
    report["checked"] = files.checked
    for row in files.problems.itertuples():
        add(row.problem, row.image_path or None, row.message)
    report["ok"] = not report["problems"]
    return report


__all__ = ["PROBLEMS", "ValidationReport", "check_image", "describe_shared", "drop_missing",
           "shared_files", "validate_dataset", "validate_split", "validate_table"]
