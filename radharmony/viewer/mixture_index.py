"""A mixture's ``records.parquet`` read by row group, never whole: the paged, filtered list
of records and one record by id or by row, for the mixture viewer.

Opening reads the Parquet footer and ``mixture.json`` only. A filter (task, source, split) is
answered row group by row group: a row group whose column statistics exclude the wanted value
is skipped unread; any other has its three filter columns read once and kept as one small
integer code per row (the source x task x split combination), so later pages and filters are
vector masks over cached codes. The total of a filter comes from the manifest's ``counts``.
A record id is found by scanning the ``record_id`` column only, one row group at a time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..errors import RadHarmonyError
from ..mixture.records import RECORD_COLUMNS, RECORDS_NAME, read_manifest
from .answers import NotFound, ViewerError

FILTERS = ("source", "task", "split")
#: what a line of the record list shows
LIST_COLUMNS = ("record_id", "task", "source", "split", "dataset", "sample_id")
MAX_PAGE = 500


class RecordIndex:
    """Row-group access to the records of the mixture folder ``out``."""

    def __init__(self, out, *, cached_groups: int = 2):
        import pyarrow.parquet as pq

        self.out = Path(out)
        self.manifest = read_manifest(self.out)
        path = self.out / RECORDS_NAME
        try:
            self.file = pq.ParquetFile(path)
            # the filter columns as dictionaries (Parquet stores them so): no string copies
            self._filter_file = pq.ParquetFile(path, read_dictionary=list(FILTERS))
        except (OSError, ValueError) as exc:
            raise RadHarmonyError(f"Cannot read the mixture's records {path}",
                                  expected="the records.parquet `radharmony mix build` wrote",
                                  found=f"{type(exc).__name__}: {exc}",
                                  fix="rebuild the mixture, or check the folder") from None
        missing = [c for c in RECORD_COLUMNS if c not in self.file.schema_arrow.names]
        if missing:
            raise RadHarmonyError(f"{path} lacks record columns",
                                  expected=f"the columns {list(RECORD_COLUMNS)}",
                                  found=f"missing {missing}",
                                  fix="rebuild the mixture with this radharmony version")
        md = self.file.metadata
        self.group_rows = np.array([md.row_group(i).num_rows for i in range(md.num_row_groups)],
                                   np.int64)
        self.group_start = np.concatenate([[0], np.cumsum(self.group_rows)])
        self.n = int(self.group_start[-1])
        self._stats = self._column_stats(md)
        self._values: dict[str, dict[str, int]] = {c: {} for c in FILTERS}
        self._codes: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()  # the caches
        self._io = threading.Lock()  # the Parquet readers: one request reads at a time
        self._groups: OrderedDict[int, object] = OrderedDict()
        self._cached_groups = cached_groups
        self._found: OrderedDict[str, int] = OrderedDict()

    # -- what the manifest says -------------------------------------------------------------------
    def counts(self) -> list[dict]:
        """The manifest's ``counts`` rows (source, task, split, records)."""
        return list(self.manifest.get("counts") or [])

    def choices(self) -> dict[str, list[str]]:
        """The values of each filter column, from the manifest's counts."""
        rows = self.counts()
        return {c: sorted({str(r[c]) for r in rows if c in r}) for c in FILTERS}

    def total(self, want: dict) -> int:
        """Records matching ``want`` (filter column -> value), from the manifest's counts."""
        return sum(int(r["records"]) for r in self.counts()
                   if all(r.get(c) == v for c, v in want.items()))

    # -- row-group reads ----------------------------------------------------------------------------
    def _column_stats(self, md) -> list[dict]:
        """Per row group: filter column -> (min, max), where the file has statistics."""
        names = self.file.schema_arrow.names
        out = []
        for g in range(md.num_row_groups):
            rg, stats = md.row_group(g), {}
            for c in FILTERS:
                st = rg.column(names.index(c)).statistics
                if st is not None and st.has_min_max:
                    stats[c] = (st.min, st.max)
            out.append(stats)
        return out

    def _may_match(self, g: int, want: dict) -> bool:
        for c, v in want.items():
            lo_hi = self._stats[g].get(c)
            if lo_hi is not None and not lo_hi[0] <= v <= lo_hi[1]:
                return False
        return True

    def _group_codes(self, g: int) -> np.ndarray:
        """Row group ``g``'s rows as codes ``(source * 2^20 + task) * 2^8 + split`` of the
        value numbers in ``self._values`` (read once, then cached)."""
        with self._lock:
            if g in self._codes:
                return self._codes[g]
        with self._io:
            table = self._filter_file.read_row_group(g, columns=list(FILTERS))
        code = np.zeros(table.num_rows, np.int64)
        for c, shift in zip(FILTERS, (28, 8, 0)):
            enc = table.column(c).combine_chunks()
            if not hasattr(enc, "dictionary"):
                enc = enc.dictionary_encode()
            with self._lock:
                ids = np.array([self._values[c].setdefault(str(v), len(self._values[c]))
                                for v in enc.dictionary.to_pylist()], np.int64)
            code |= ids[enc.indices.to_numpy(zero_copy_only=False)] << shift
        with self._lock:
            self._codes[g] = code
        return code

    def _matches(self, g: int, want: dict) -> np.ndarray:
        """Local row numbers of row group ``g`` matching ``want``."""
        if not want:
            return np.arange(self.group_rows[g])
        if not self._may_match(g, want):
            return np.zeros(0, np.int64)
        codes = self._group_codes(g)
        mask = np.ones(len(codes), bool)
        for c, shift, width in zip(FILTERS, (28, 8, 0), (1 << 20, 1 << 20, 1 << 8)):
            if c in want:
                number = self._values[c].get(want[c])
                if number is None:
                    return np.zeros(0, np.int64)
                mask &= ((codes >> shift) & (width - 1)) == number
        return np.flatnonzero(mask)

    def _group(self, g: int):
        """Row group ``g``, every column (a small LRU: a page's records share groups)."""
        with self._lock:
            if g in self._groups:
                self._groups.move_to_end(g)
                return self._groups[g]
        with self._io:
            table = self.file.read_row_group(g)
        with self._lock:
            self._groups[g] = table
            while len(self._groups) > self._cached_groups:
                self._groups.popitem(last=False)
        return table

    # -- the API ----------------------------------------------------------------------------------
    def page(self, *, task=None, source=None, split=None, offset=0, limit=50) -> dict:
        """``{"total", "offset", "limit", "items"}``: records ``offset`` to ``offset + limit``
        of those matching the filters, each ``{"row", <LIST_COLUMNS>}``."""
        want = {c: v for c, v in (("task", task), ("source", source), ("split", split)) if v}
        for c, v in want.items():
            if v not in self.choices()[c]:
                raise ViewerError(f"Unknown {c} {v!r} in this mixture",
                                  expected=f"one of {self.choices()[c]}", found=repr(v))
        try:
            offset, limit = max(0, int(offset)), min(MAX_PAGE, max(1, int(limit)))
        except (TypeError, ValueError):
            raise ViewerError("offset and limit must be integers",
                              found=f"{offset!r}, {limit!r}") from None
        picked: list[tuple[int, np.ndarray]] = []
        skip, need = offset, limit
        for g in range(len(self.group_rows)):
            if need == 0:
                break
            local = self._matches(g, want)
            if skip >= len(local):
                skip -= len(local)
                continue
            take = local[skip:skip + need]
            skip, need = 0, need - len(take)
            picked.append((g, take))
        items = []
        for g, take in picked:
            with self._io:
                part = self.file.read_row_group(g, columns=list(LIST_COLUMNS)).take(take)
            for local, row in zip(take.tolist(), part.to_pylist()):
                items.append({"row": int(self.group_start[g]) + local, **row})
        return {"total": self.total(want), "offset": offset, "limit": limit, "items": items}

    def row_of(self, record_id: str) -> int:
        """The row of ``record_id``, scanning the ``record_id`` column one row group at a time."""
        import pyarrow.compute as pc

        with self._lock:
            if record_id in self._found:
                return self._found[record_id]
        for g in range(len(self.group_rows)):
            with self._io:
                ids = self.file.read_row_group(g, columns=["record_id"]).column(0)
            at = pc.index(ids, record_id).as_py()
            if at >= 0:
                row = int(self.group_start[g]) + at
                with self._lock:
                    self._found[record_id] = row
                    while len(self._found) > 1024:
                        self._found.popitem(last=False)
                return row
        raise NotFound(f"No record {record_id!r} in the mixture {self.out}",
                       expected="a record_id of this mixture's records.parquet (16 hex digits)",
                       found=repr(record_id), fix="search for an id the record list shows")

    def record(self, *, record_id: str | None = None, row=None) -> dict:
        """One record (every column, ``fields`` still JSON text) and its ``row``."""
        if record_id:
            row = self.row_of(str(record_id))
        try:
            row = int(row)
        except (TypeError, ValueError):
            raise ViewerError("A record is addressed by id or row",
                              expected="id=<record_id> or row=<integer>",
                              found=repr(row)) from None
        if not 0 <= row < self.n:
            raise NotFound(f"Row {row} is out of range", expected=f"0 to {self.n - 1}",
                           found=str(row))
        g = int(np.searchsorted(self.group_start, row, side="right") - 1)
        rec = self._group(g).slice(row - int(self.group_start[g]), 1).to_pylist()[0]
        return {"row": row, **rec}
