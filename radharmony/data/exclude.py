"""``exclude=``: sample ids a user chose to leave out of a dataset (e.g. an audit's list).

The ids come as an iterable of ``sample_id`` strings or a text file of them (one a line;
blank lines and ``#`` comments skipped, as :meth:`radharmony.audit.AuditReport.
write_exclusions` writes it). Ids of other datasets are ignored (one list serves every dataset
of a merge); the rows left out are counted and named in a warning, never silently.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from ..errors import SHOW, RadHarmonyError, RowsDroppedWarning


def read_exclusions(exclude) -> set[str]:
    """The sample ids ``exclude`` names (a path or an iterable of strings)."""
    if isinstance(exclude, (str, os.PathLike)):
        path = Path(exclude)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RadHarmonyError(f"exclude={str(path)!r} cannot be read",
                                  expected="a text file of sample ids, one a line",
                                  found=f"{type(exc).__name__}: {exc.strerror or exc}",
                                  fix="write it with AuditReport.write_exclusions(path), or "
                                      "pass a list of sample ids") from None
        return {s.strip() for s in text.splitlines() if s.strip() and not s.lstrip()
                .startswith("#")}
    try:
        ids = set(exclude)
    except TypeError:
        ids = None
    if ids is None or not all(isinstance(s, str) for s in ids):
        raise RadHarmonyError("exclude= must name sample ids", expected="a list of sample_id "
                              "strings or the path of a file of them",
                              found=type(exclude).__name__, fix="pass exclude=['nih_cxr14:"
                              "00000001_000', ...] or exclude='exclude.txt'")
    return ids


def excluded_rows(sample_ids: np.ndarray, exclude, *, owner: str) -> np.ndarray:
    """Boolean mask of the rows to keep, warning with the count and the first ids left out."""
    ids = read_exclusions(exclude)
    drop = np.fromiter((s in ids for s in sample_ids), dtype=bool, count=len(sample_ids))
    if drop.any():
        warnings.warn(f"{owner}: left out {int(drop.sum())} of {len(sample_ids)} rows named by "
                      f"exclude= ({len(ids)} ids given), first: "
                      f"{sample_ids[drop][:SHOW].tolist()}", RowsDroppedWarning, stacklevel=3)
    return ~drop


__all__ = ["excluded_rows", "read_exclusions"]
