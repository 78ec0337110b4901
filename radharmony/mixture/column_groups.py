"""A mixture's records by group, for the sampler's draw by rate without a per-record array:
``OUT/columns/rows_by_group.npy``, written with the columns (:mod:`~radharmony.mixture.columns`)
and memory-mapped, shared by every rank and DataLoader worker on a machine.

A group is the records of one ``(split, source, task)``. The file holds every record's row
(``int64``, its position among all records) once, group after group, each group's rows in
file order; ``columns.json``'s ``groups`` names the file and lists each group as
``[split, source, task, start, stop]`` (its slice of the file), the groups ordered by their
codes (split, then source, then task: the order the values first appear in the records).
Drawing a record by rate is then drawing a group by its share (a few hundred numbers at
most) and a record inside it uniformly: one row of the mapped file, whatever the number of
records.

:func:`write_groups` writes the file from the columns' codes a chunk at a time (a counting
sort: memory holds one chunk, the file's pages are the page cache's);
:class:`GroupRows` is a dataset's groups (its split, tasks and sources) and turns a row
back into the dataset's position.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: the rows of every record, group after group
GROUPS_FILE = "rows_by_group.npy"
#: the records a chunk of the writing holds
_CHUNK = 1 << 20
#: the columns whose codes make a group, in the order they sort it
GROUPED = ("split", "source", "task")


def _keys(codes: list, widths: tuple, a: int, b: int) -> np.ndarray:
    """One key per record of rows ``a:b`` ordering them by their groups' codes (-1, a null,
    first), in the narrowest unsigned type holding every key (a stable sort of 16 bits is a
    radix sort)."""
    key = np.zeros(b - a, np.int64)
    for col, width in zip(codes, widths):
        key = key * width + np.asarray(col[a:b]).astype(np.int64) + 1
    return key.astype(np.min_scalar_type(int(np.prod(widths, dtype=np.int64)) - 1))


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records of a chunk by key: the order sorting them (stable), and each key found
    with where its run starts in that order and its length."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return order, starts, np.diff(np.r_[starts, len(keys)])


def write_groups(folder: str | Path, values: dict) -> dict:
    """Write ``folder/rows_by_group.npy`` from the columns ``folder/{split,source,task}
    .codes.npy`` (``values``: each coded column's distinct values, as in ``columns.json``)
    and return ``columns.json``'s ``groups`` entry (see the module doc)."""
    folder = Path(folder)
    codes = [np.load(folder / f"{name}.codes.npy", mmap_mode="r") for name in GROUPED]
    widths = tuple(len(values[name]) + 1 for name in GROUPED)
    n = len(codes[0])
    sizes: dict = {}
    space = int(np.prod(widths, dtype=np.int64))
    for a in range(0, n, _CHUNK):
        keys = _keys(codes, widths, a, min(a + _CHUNK, n))
        if space <= _CHUNK:  # few groups (the rule): counted, not sorted
            counts = np.bincount(keys, minlength=space)
            keys = np.flatnonzero(counts)
            counts = counts[keys]
        else:
            keys, counts = np.unique(keys, return_counts=True)
        for k, c in zip(keys.tolist(), counts.tolist()):
            sizes[k] = sizes.get(k, 0) + c
    start, segments = {}, []
    for k in sorted(sizes):
        start[k] = at = segments[-1][-1] if segments else 0
        names, rest = [], k
        for name, width in zip(reversed(GROUPED), reversed(widths)):
            rest, code = divmod(rest, width)
            names.append(values[name][code - 1] if code else None)
        segments.append([*reversed(names), at, at + sizes[k]])
    rows = np.lib.format.open_memmap(folder / GROUPS_FILE, mode="w+", dtype=np.int64,
                                     shape=(n,))
    for a in range(0, n, _CHUNK):
        keys = _keys(codes, widths, a, min(a + _CHUNK, n))
        order, first, counts = _runs(keys)
        found = keys[order[first]]
        for k, i, c in zip(found.tolist(), first.tolist(), counts.tolist()):
            rows[start[k]:start[k] + c] = order[i:i + c] + a
            start[k] += c
    rows.flush()
    del rows, codes
    return {"file": GROUPS_FILE, "segments": segments}


class GroupRows:
    """A dataset's records by group: ``rows`` (the mapped file), ``segments`` (its groups'
    ``(source, task, start, stop)``, those of its split, tasks and sources) and ``index``
    (the dataset's positions' rows, sorted; None: every record, a position is its row).

    >>> g = GroupRows(np.array([4, 1, 0, 3]), [("a", "x", 0, 2), ("b", "x", 2, 4)],
    ...               index=np.array([0, 1, 3, 4]))
    >>> g.sizes.tolist(), g.positions(g.rows[[1, 3]]).tolist()
    ([2, 2], [1, 2])
    """

    def __init__(self, rows: np.ndarray, segments: list, index: np.ndarray | None = None):
        self.rows, self.segments, self.index = rows, [tuple(s) for s in segments], index
        self._index_file = None  # a split's rows file, opened for pread on first use
        self.starts = np.array([s[2] for s in self.segments], np.int64)
        self.sizes = np.array([s[3] - s[2] for s in self.segments], np.int64)

    @classmethod
    def select(cls, columns, *, split: str | None, tasks=None, sources=None,
               index: np.ndarray | None = None) -> "GroupRows":
        """The groups of ``columns`` (a :class:`~radharmony.mixture.columns.MixtureColumns`)
        holding ``split``'s (None: every split's) records of ``tasks`` and ``sources``
        (names; None: all), ``index`` the positions' rows (as
        :meth:`~radharmony.mixture.columns.MixtureColumns.select` gives them)."""
        from .reading import _names

        rows, segments = columns.group_rows()
        keep = [set(n) if n is not None else None
                for n in (_names(tasks, "tasks"), _names(sources, "sources"))]
        chosen = [(s, t, a, b) for sp, s, t, a, b in segments
                  if (split is None or sp == split) and b > a
                  and (keep[0] is None or t in keep[0]) and (keep[1] is None or s in keep[1])]
        return cls(rows, chosen, index)

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """The dataset positions of ``rows`` (rows of its records): a binary search in the
        sorted ``index`` (a split's rows file: by ``pread``, nothing mapped,
        :meth:`~radharmony.mixture.column_files.ColumnFile.searchsorted`)."""
        rows = np.asarray(rows, np.int64)
        if self.index is None:
            return rows
        if isinstance(self.index, np.memmap):  # a split's rows, on disk
            if self._index_file is None:
                from .column_files import ColumnFile

                self._index_file = ColumnFile(self.index.filename)
            return self._index_file.searchsorted(rows)
        return np.searchsorted(self.index, rows)


__all__ = ["GROUPS_FILE", "GroupRows", "write_groups"]
