"""Writing a mixture's memory-mapped columns (:mod:`radharmony.mixture.columns`): the build's
:class:`ColumnWriter`, fed every record table as it passes
(:class:`~radharmony.mixture.writer.RecordWriter`), and :func:`write_columns`, the columns of
a mixture folder from its ``records.parquet``. Each column is appended to its ``.npy`` files
chunk by chunk (a header of fixed size, its length written at the end), so memory holds one
chunk and the bytes depend only on the records, in order.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from ..errors import RadHarmonyError
from ..files import TMP_PREFIX, atomic_write
from .column_groups import write_groups
from .columns import (CODED, COLUMNS_DIR, COLUMNS_FORMAT, COLUMNS_INDEX, LISTS, MOST_CODES, TEXT,
                      column_sources)
from .records import RECORD_COLUMNS, RECORDS_NAME, read_manifest

#: the bytes of a streamed ``.npy`` file's header (the shape is written in it at the end)
_HEADER = 128


class _Appender:
    """A 1-D ``.npy`` file written by appending: a header of fixed size, rewritten with the
    length at :meth:`close`."""

    def __init__(self, path: Path, dtype):
        self.path, self.dtype, self.n = path, np.dtype(dtype), 0
        self._fh = open(path, "wb")
        self._fh.write(_npy_header(self.dtype, 0))

    def write(self, values) -> None:
        arr = np.ascontiguousarray(values, self.dtype)
        self._fh.write(arr.data)
        self.n += len(arr)

    def close(self) -> None:
        self._fh.seek(0)
        self._fh.write(_npy_header(self.dtype, self.n))
        self._fh.close()


def _npy_header(dtype: np.dtype, n: int) -> bytes:
    """A ``.npy`` version 1.0 header of exactly :data:`_HEADER` bytes for ``n`` values."""
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                 "shape": (n,)})
    body = text.encode("latin1")
    body += b" " * (_HEADER - 10 - len(body) - 1) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body


class _Text:
    """A text column (or a list column's text items) being written: offsets, bytes, valid."""

    def __init__(self, folder: Path, name: str):
        self.offsets = _Appender(folder / f"{name}.offsets.npy", np.int64)
        self.utf8 = _Appender(folder / f"{name}.utf8.npy", np.uint8)
        self.valid = _Appender(folder / f"{name}.valid.npy", np.uint8)
        self.offsets.write([0])
        self.end = 0

    def write(self, arr) -> None:
        """Append a (large_)string Arrow array's values."""
        import pyarrow as pa

        wide = pa.types.is_large_string(arr.type)
        bufs = arr.buffers()
        offs = np.frombuffer(bufs[1], np.int64 if wide else np.int32)[
            arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
        if len(arr):
            data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else \
                np.zeros(0, np.uint8)
            self.utf8.write(data[offs[0]:offs[-1]])
            self.offsets.write(offs[1:] - offs[0] + self.end)
            self.end += int(offs[-1] - offs[0])
        self.valid.write(_valid(arr))

    def close(self) -> None:
        for f in (self.offsets, self.utf8, self.valid):
            f.close()


class _Coded:
    """A coded column (or a list column's coded items) being written: int16 codes."""

    def __init__(self, folder: Path, name: str):
        self.name = name
        self.codes = _Appender(folder / f"{name}.codes.npy", np.int16)
        self.values: dict = {}

    def write(self, arr) -> None:
        import pyarrow.compute as pc

        enc = pc.dictionary_encode(arr)
        seen = enc.dictionary.to_pylist()
        for v in seen:
            if v not in self.values:
                if len(self.values) >= MOST_CODES:
                    raise RadHarmonyError(
                        f"The mixture column {self.name!r} has too many distinct values to "
                        "store as codes", expected=f"at most {MOST_CODES}",
                        found=f"more than {MOST_CODES}", fix="report this: such a column "
                        "should be stored as text")
                self.values[v] = len(self.values)
        mapping = np.array([self.values[v] for v in seen] + [-1], np.int16)
        idx = enc.indices.fill_null(len(seen)).to_numpy(zero_copy_only=False)
        self.codes.write(mapping[idx])

    def close(self) -> None:
        self.codes.close()


class _List:
    """A list column being written: each record's item offsets, and its items."""

    def __init__(self, folder: Path, name: str, items: str):
        self.lists = _Appender(folder / f"{name}.lists.npy", np.int64)
        self.valid = _Appender(folder / f"{name}.valid.npy", np.uint8)
        self.items = _Text(folder, f"{name}.items") if items == "text" else \
            _Coded(folder, f"{name}.items")
        self.lists.write([0])
        self.end = 0

    def write(self, arr) -> None:
        offs = arr.offsets.to_numpy().astype(np.int64)
        self.lists.write(offs[1:] - offs[0] + self.end)
        self.end += int(offs[-1] - offs[0])
        self.items.write(arr.values.slice(int(offs[0]), int(offs[-1] - offs[0])))
        self.valid.write(_valid(arr))

    def close(self) -> None:
        for f in (self.lists, self.valid, self.items):
            f.close()


def _valid(arr) -> np.ndarray:
    if not arr.null_count:
        return np.ones(len(arr), np.uint8)
    return arr.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8)


class ColumnWriter:
    """``OUT/columns/`` written as the records pass (:meth:`write` of Arrow tables of
    :data:`~radharmony.mixture.records.RECORD_SCHEMA`, in order), into a temporary folder
    renamed into place by :meth:`close`. Memory holds one table's columns at a time."""

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        self.tmp = self.out / f"{TMP_PREFIX}{os.getpid()}-{COLUMNS_DIR}"
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True)
        self.rows = 0
        self._cols: dict = {}
        for name in RECORD_COLUMNS:
            if name in CODED:
                self._cols[name] = _Coded(self.tmp, name)
            elif name in TEXT:
                self._cols[name] = _Text(self.tmp, name)
            elif name in LISTS:
                self._cols[name] = _List(self.tmp, name, LISTS[name])
            else:  # prompt_variant
                self._cols[name] = _Appender(self.tmp / f"{name}.npy", np.int16)

    def write(self, table) -> None:
        from .reading import one_chunk

        for name, col in self._cols.items():
            arr = one_chunk(table.column(name))
            col.write(arr if isinstance(col, (_Text, _Coded, _List)) else
                      arr.to_numpy(zero_copy_only=False))
        self.rows += table.num_rows

    def close(self, sources: list[dict]) -> None:
        """Finish the files, the splits' rows and ``columns.json`` (``sources``: each
        ``{"name", "image_root", "cache_key"}``), and move the folder into place."""
        for col in self._cols.values():
            col.close()
        split = self._cols["split"]
        codes = np.load(self.tmp / "split.codes.npy", mmap_mode="r")
        splits = {}
        for value, code in split.values.items():
            if value is None:
                continue
            np.save(self.tmp / f"rows.{value}.npy", np.flatnonzero(codes == code))
            splits[value] = f"rows.{value}.npy"
        del codes
        index = {"format": COLUMNS_FORMAT, "rows": self.rows, "splits": splits,
                 "values": {name: list(self._vocab(name)) for name in (*CODED, "views")},
                 "sources": sources}
        index["groups"] = write_groups(self.tmp, index["values"])
        text = json.dumps(index, indent=1, ensure_ascii=False) + "\n"
        atomic_write(self.tmp / COLUMNS_INDEX, lambda fh: fh.write(text.encode("utf-8")))
        final = self.out / COLUMNS_DIR
        if final.exists():
            old = self.out / f"{TMP_PREFIX}{os.getpid()}-old-{COLUMNS_DIR}"
            os.replace(final, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(self.tmp, final)

    def _vocab(self, name: str) -> dict:
        col = self._cols[name]
        return (col.items if isinstance(col, _List) else col).values

    def abort(self) -> None:
        for col in self._cols.values():
            try:
                col.close()
            except Exception:  # a file that failed to write: removed below
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def write_columns(out: str | os.PathLike) -> Path:
    """Write ``out/columns/`` from ``out/records.parquet`` and ``out/mixture.json``, a row
    group at a time (a mixture built before the columns existed, or records written by
    other means; a build writes them itself). Returns the folder."""
    import pyarrow.parquet as pq

    out = Path(out)
    manifest = read_manifest(out)
    try:
        records = pq.ParquetFile(out / RECORDS_NAME)
    except (OSError, ValueError) as exc:
        raise RadHarmonyError(f"Cannot read the mixture's records {out / RECORDS_NAME}",
                              expected=f"{RECORDS_NAME} written by radharmony mix build",
                              found=f"{type(exc).__name__}: {exc}",
                              fix="point at the folder `radharmony mix build` wrote") from None
    writer = ColumnWriter(out)
    try:
        for i in range(records.num_row_groups):
            writer.write(records.read_row_group(i))
        writer.close(column_sources(manifest))
    except BaseException:
        writer.abort()
        raise
    return out / COLUMNS_DIR


__all__ = ["ColumnWriter", "write_columns"]
