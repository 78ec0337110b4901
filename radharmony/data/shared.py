"""One image file reachable from rows of two patients (a hard link, or a symlink inside the
dataset): such an image can land on both sides of a patient split.

A file is known by its identity, ``(st_dev, st_ino)`` (:func:`file_id`), not by its path, and
every place that reads the identities asks here:

* :func:`shared_files` groups a whole table's identities at once, for
  :meth:`~radharmony.data.dataset.BaseRadiologicalDataset.validate`, which lists every row of
  every such file;
* :class:`SharedImageWatch` rides on the identities a dataset build reads anyway -- the file
  table's one ``lstat`` per row as a sample is first read (an epoch, cached or not,
  ``cache_keys()``, ``pre_cache()``), shared by every split, fold and filter of the build -- and warns once per
  build, naming both patients and the file, at the first row of a second patient that reaches
  a file already seen. No file is ``stat``-ed for it.

In DataLoader worker processes each worker sees only the rows it reads, and warns for what it
finds there.
"""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np

from ..errors import SharedImageWarning


def file_id(st: os.stat_result) -> tuple[int, int]:
    """The identity of the file behind ``st``: ``(device, inode)``, whatever path reaches it."""
    return st.st_dev, st.st_ino


def shared_files(identities, groups) -> list[list[int]]:
    """The rows of each file reached from rows of more than one group: ``identities`` holds
    one hashable file identity per row (:func:`file_id`; None: not checked), ``groups``
    each row's patient. Rows of one file listed in row order, files in order of first row."""
    by_file: dict = {}
    for i, ident in enumerate(identities):
        if ident is not None:
            by_file.setdefault(ident, []).append(i)
    return [rows for rows in by_file.values()
            if len(rows) > 1 and len({groups[r] for r in rows}) > 1]


def describe_shared(rows: list[int], ids, groups, col: str) -> str:
    """``'<sample_id> (<col> '<group>'), ...'`` for the rows of one shared file."""
    return ", ".join(f"{ids[r]} ({col} {groups[r]!r})" for r in rows)


class SharedImageWatch:
    """The first row of every file identity a dataset build has read; warns
    (:class:`~radharmony.errors.SharedImageWarning`) once, when a row of another patient
    reaches a file already seen.

    Args:
        owner: how the dataset is named in the warning.
        ids: every row's ``sample_id``.
        groups: every row's patient (the spec's ``group_col``).
        col: the name of that column.
    """

    def __init__(self, owner: str, ids, groups, col: str):
        self.owner, self.ids, self.groups, self.col = owner, ids, groups, col
        self.first: dict[tuple[int, int], int] = {}
        self.warned = False
        self._lock = threading.Lock()

    @classmethod
    def of(cls, ds) -> "SharedImageWatch | None":
        """The watch over ``ds``'s rows (None when its table has no patient column)."""
        col = getattr(getattr(ds, "spec", None), "group_col", "patient_id")
        df = ds.harmonized_df
        if col not in df.columns:
            return None
        return cls(type(ds).__name__, np.asarray(ds.sample_ids, dtype=object),
                   df[col].to_numpy(dtype=object), col)

    def __getstate__(self):
        return {**self.__dict__, "_lock": None}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def note(self, row: int, ident: tuple[int, int], path) -> None:
        """Row ``row`` reads the file ``ident`` (:func:`file_id`) at ``path``."""
        first = self.first.setdefault(ident, row)
        if first == row or self.warned or self.groups[first] == self.groups[row]:
            return
        with self._lock:
            if self.warned:
                return
            self.warned = True
        text = describe_shared([first, row], self.ids, self.groups, self.col)
        warnings.warn(f"{self.owner}: the image file {path} is reachable from rows of two "
                      f"{self.col}s: {text} (a hard link or a symlink inside the dataset). Such "
                      "an image can land on both sides of a patient split; remove the link or "
                      "the duplicate row (dataset.validate() lists every such file; this "
                      "warning is given once per dataset).", SharedImageWarning, stacklevel=4)

    def forget(self, row: int, ident: tuple[int, int]) -> None:
        """Row ``row`` no longer reads ``ident`` (its file was replaced)."""
        if self.first.get(ident) == row:
            del self.first[ident]


__all__ = ["SharedImageWatch", "describe_shared", "file_id", "shared_files"]
