"""A mixture's records as memory-mapped columns: ``OUT/columns/``, written at build time beside
``records.parquet`` and read for training without a Python object per record.

Every process that opens a mixture (each rank, each DataLoader worker) maps the same files:
the pages are the operating system's page cache, shared by all of them, and only the rows a
batch touches are read. The files are NumPy ``.npy`` arrays (``np.load(mmap_mode="r")``), one
to a few per record column (:data:`~radharmony.mixture.records.RECORD_SCHEMA`):

* a column of few distinct values (``task``, ``family``, ``source``, ``dataset``,
  ``source_split``, ``split``; each image's ``views``): ``int16`` codes into its distinct
  values, listed in ``columns.json`` in the order they first appear (-1: null);
* a text column (``record_id``, ``patient_id``, ``study_id``, ``sample_id``, ``prompt``,
  ``target``, ``fields``): ``<name>.offsets.npy`` (``int64``, one more than the rows) into
  ``<name>.utf8.npy`` (the UTF-8 bytes one after another) and ``<name>.valid.npy``
  (``uint8``: 0 for a null);
* a list column (``image_paths``; ``views``): ``<name>.lists.npy`` (``int64`` offsets of each
  record's items) and the items as above; ``prompt_variant``: ``int16``.

``columns.json`` also holds each split's rows (``rows.<split>.npy``, ``int64``), every row by
``(split, source, task)`` group (``rows_by_group.npy``: :mod:`~radharmony.mixture.column_groups`,
what the sampler draws by rate from) and what reading
a record's images needs without opening a source's metadata: each source's image root (the
folder its ``image_paths`` are relative to, resolved at build time) and cache key mode.
The files' bytes depend only on the records, in order, never on how they were chunked.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import RadHarmonyError
from .records import read_format

COLUMNS_DIR = "columns"
COLUMNS_INDEX = "columns.json"
COLUMNS_FORMAT = "radharmony-mixture-columns"
#: columns of few distinct values, stored as int16 codes
CODED = ("task", "family", "source", "dataset", "source_split", "split")
#: text columns, stored as offsets into UTF-8 bytes
TEXT = ("record_id", "patient_id", "study_id", "sample_id", "prompt", "target", "fields")
#: list columns: their items' kind
LISTS = {"image_paths": "text", "views": "coded"}
#: the most distinct values a coded column holds
MOST_CODES = 2**15 - 1


def manifest_reading(manifest: dict) -> dict:
    """Source name -> ``{"image_root", "cache_key"}`` from ``mixture.json``'s sources: the
    root the source's dataset was opened on (its image root) and its ``cache_key`` argument."""
    return {s["name"]: {"image_root": s["root"],
                        "cache_key": (s.get("kwargs") or {}).get("cache_key", "identity")}
            for s in manifest.get("sources", [])}


def column_sources(manifest: dict) -> list[dict]:
    """``columns.json``'s ``sources``: :func:`manifest_reading` as a list."""
    return [{"name": name, **r} for name, r in manifest_reading(manifest).items()]


class MixtureColumns:
    """A mixture's memory-mapped columns (see the module doc), opened in milliseconds with no
    Python object per record; :meth:`take` gives any rows' values as lists.

    >>> import pyarrow as pa, tempfile
    >>> from radharmony.mixture.records import RECORD_SCHEMA
    >>> from radharmony.mixture.column_writer import ColumnWriter
    >>> rows = {n: [None, None] for n in RECORD_SCHEMA.names}
    >>> rows.update(record_id=["a1", "b2"], task=["t", "u"], split=["train", "valid"],
    ...             image_paths=[["x.png"], []], views=[["PA"], []], prompt_variant=[0, 1])
    >>> out = tempfile.mkdtemp()
    >>> w = ColumnWriter(out); w.write(pa.table(rows, schema=RECORD_SCHEMA)); w.close([])
    >>> cols = MixtureColumns(out)
    >>> cols.take(np.array([1, 0]), ["record_id", "task", "image_paths", "views"])
    {'record_id': ['b2', 'a1'], 'task': ['u', 't'], 'image_paths': [[], ['x.png']], \
'views': [[], ['PA']]}
    >>> cols.rows("valid").tolist()
    [1]
    """

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        folder = self.out / COLUMNS_DIR
        index = read_format(folder / COLUMNS_INDEX, COLUMNS_FORMAT,
                            what="the mixture's columns", expected=f"{COLUMNS_DIR}/"
                            f"{COLUMNS_INDEX}, written by radharmony mix build (this version "
                            "and later)", fix="rebuild the mixture with `radharmony mix build "
                            "SPEC OUT`, or write its columns from records.parquet: "
                            "radharmony.mixture.column_writer.write_columns(OUT)")
        self.folder, self.index = folder, index
        self.num_rows = int(index["rows"])
        self.sources = {s["name"]: s for s in index.get("sources", [])}
        self.values = {name: _objects(v) for name, v in index["values"].items()}
        self._maps: dict = {}
        self._files: dict = {}

    def __getstate__(self) -> dict:
        """Pickled (a DataLoader worker started by spawn) without the maps and descriptors:
        each process maps and opens the files again, sharing their pages, instead of
        receiving copies."""
        return {**self.__dict__, "_maps": {}, "_files": {}}

    def _map(self, file: str) -> np.ndarray:
        arr = self._maps.get(file)
        if arr is None:
            try:
                arr = np.load(self.folder / file, mmap_mode="r")
            except (OSError, ValueError) as exc:
                raise RadHarmonyError(f"Cannot map the mixture column {self.folder / file}",
                                      expected="a .npy file written by radharmony mix build",
                                      found=f"{type(exc).__name__}: {exc}",
                                      fix="rebuild the mixture (radharmony mix build)"
                                      ) from None
            self._maps[file] = arr
        return arr

    def _file(self, file: str):
        """Column ``file`` for a batch's random rows, read by ``pread``
        (:class:`~radharmony.mixture.column_files.ColumnFile`: nothing mapped, so a batch adds
        nothing to the process's memory)."""
        from .column_files import ColumnFile

        found = self._files.get(file)
        if found is None:
            found = self._files[file] = ColumnFile(self.folder / file)
        return found

    def codes(self, name: str) -> np.ndarray:
        """A coded column's int16 codes for every record (memory-mapped)."""
        return self._map(f"{name}.codes.npy")

    def rows(self, split: str | None) -> np.ndarray:
        """The positions of ``split``'s records (memory-mapped; None: every record)."""
        if split is None:
            return np.arange(self.num_rows, dtype=np.int64)
        file = self.index["splits"].get(split)
        return self._map(file) if file else np.zeros(0, np.int64)

    def select(self, *, split: str | None = "train", tasks=None, sources=None) -> np.ndarray:
        """The positions of the records of ``split``, ``tasks`` and ``sources`` (names; None:
        all), in file order; a name the mixture does not hold is refused, naming the ones it
        does."""
        from .reading import _names

        rows = self.rows(split)
        for col, names in (("task", _names(tasks, "tasks")),
                           ("source", _names(sources, "sources"))):
            if names is None:
                continue
            codes = self.codes(col)
            held = sorted(v for v in self.values[col][np.unique(codes[rows]).astype(np.int64)]
                          .tolist() if v is not None)
            unknown = [n for n in names if n not in held]
            if unknown:
                raise RadHarmonyError(f"The mixture {self.out} has no {col} {unknown[0]!r}",
                                      expected=f"one of {held}", found=repr(unknown),
                                      fix=f"pass {col}s the mixture holds (radharmony mix info)")
            want = np.isin(codes[rows], [self.values[col].tolist().index(n) for n in names])
            rows = np.asarray(rows)[want]
        return rows

    def take(self, rows: np.ndarray, names) -> dict[str, list]:
        """``{column: [value per row]}`` of ``rows`` (positions among all records)."""
        rows = np.asarray(rows, np.int64)
        return {name: self._take(name, rows) for name in names}

    def _take(self, name: str, rows: np.ndarray) -> list:
        if name in CODED:
            return self.values[name][np.asarray(self.codes(name)[rows]).astype(np.int64)] \
                .tolist() if len(rows) else []
        if name in TEXT:
            return self._texts(name, rows)
        if name in LISTS:
            lists = self._map(f"{name}.lists.npy")
            starts, ends = lists[rows], lists[rows + 1]
            valid = self._map(f"{name}.valid.npy")[rows]
            flat = np.concatenate([np.arange(a, b) for a, b in zip(starts.tolist(),
                                                                   ends.tolist())]
                                  or [np.zeros(0, np.int64)]).astype(np.int64)
            if LISTS[name] == "text":
                items = self._texts(f"{name}.items", flat)
            else:
                items = self.values[name][np.asarray(
                    self._map(f"{name}.items.codes.npy")[flat]).astype(np.int64)].tolist()
            out, at = [], 0
            for a, b, ok in zip(starts.tolist(), ends.tolist(), valid.tolist()):
                out.append(items[at:at + b - a] if ok else None)
                at += b - a
            return out
        return np.asarray(self._map(f"{name}.npy")[rows]).tolist()

    def _texts(self, name: str, rows: np.ndarray) -> list:
        offsets = self._map(f"{name}.offsets.npy")
        utf8 = self._map(f"{name}.utf8.npy")
        valid = self._map(f"{name}.valid.npy")[rows].tolist()
        starts, ends = offsets[rows].tolist(), offsets[rows + 1].tolist()
        blob = memoryview(utf8)  # the mapped pages, no copy
        return [str(blob[a:b], "utf-8") if ok else None
                for a, b, ok in zip(starts, ends, valid)]

    def group_rows(self) -> tuple[np.ndarray, list]:
        """Every record's row, group after group (``rows_by_group.npy``, read by ``pread``), and
        the groups ``[split, source, task, start, stop]``
        (:mod:`~radharmony.mixture.column_groups`): what the sampler draws by rate from."""
        groups = self.index.get("groups")
        if groups is None:
            raise RadHarmonyError(f"The mixture's columns {self.folder} have no rows by group",
                                  expected=f"{COLUMNS_INDEX} with 'groups' and their file, "
                                  "as radharmony mix build writes them",
                                  found=f"no 'groups' in {COLUMNS_INDEX} (columns written by "
                                  "an older version)",
                                  fix="write the columns again: radharmony.mixture."
                                      "column_writer.write_columns(OUT)")
        return self._file(groups["file"]), groups["segments"]

    def groups(self, rows: np.ndarray | None = None) -> tuple:
        """``(source codes, source names, task codes, task names)`` of ``rows`` (None: every
        record; the codes memory-mapped then): what the sampler weighs, no object per record."""
        source, task = self.codes("source"), self.codes("task")
        if rows is not None:
            source, task = source[rows], task[rows]
        return source, self.values["source"], task, self.values["task"]


def _objects(values: list) -> np.ndarray:
    """``values`` with None appended (code -1), as an object array."""
    out = np.empty(len(values) + 1, object)
    out[:] = [*values, None]
    return out


__all__ = ["CODED", "COLUMNS_DIR", "COLUMNS_FORMAT", "COLUMNS_INDEX", "LISTS", "MixtureColumns",
           "TEXT", "column_sources", "manifest_reading"]
