"""The harmonized table on disk: saved harmonizers (Parquet) and the table cache (Arrow IPC).

Both formats carry nested cells as JSON text (:mod:`radharmony.cells`) and a JSON header, and
neither executes code when read (no pickle).

* :func:`save_table` / :func:`load_table` -- a saved harmonizer: Parquet with page CRCs and a
  checksummed JSON header (class, key, version, arguments, rows).
* :class:`TableCache` -- harmonized tables under ``<cache_dir>/tables/``, keyed by the
  harmonizer (class, arguments) and the identity of every input it reads
  (:meth:`~radharmony.table.harmonizer.Inputs.identity`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
import zlib
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..cells import decode_json_columns, encode_json_columns
from ..errors import MetadataNotFoundError, SavedFileError, shorten
from ..files import atomic_write, sweep_stale_tmp
from ..version import __version__, source_digest

SAVED_FORMAT = "radharmony-harmonizer"
SAVED_FORMAT_VERSION = 1
_META_KEY = b"radharmony"
#: bumped whenever the table cache's file layout or keying changes
TABLE_CACHE_FORMAT = 4
#: the shared code that decides a harmonized table; its digest is part of every table key, so
#: editing it rebuilds cached tables (a dataset's own module is added by the harmonizer)
TABLE_SOURCES = ("cells.py", "spec.py", "files.py", "table/harmonizer.py", "table/guard.py",
                 "table/schema.py", "table/read_csv.py", "table/read_json.py", "table/store.py",
                 "annotations/boxes.py", "annotations/labels.py", "annotations/label_studio.py",
                 "annotations/spans.py", "reports/format.py")
#: the most bytes loading a saved harmonizer may take once decoded, estimated from the Parquet
#: footer before any page is read (:func:`decoded_size`), so a small file cannot expand into
#: gigabytes
MAX_TABLE_BYTES = 4_000_000_000
#: the most a saved harmonizer may expand (decoded estimate / file size) once it decodes to
#: more than :data:`_EXPANSION_FLOOR`: real tables expand 2-20x; 0.03 MB of file becoming
#: 768 MiB of distinct text (25,000x) is a bomb
MAX_TABLE_EXPANSION = 200
_EXPANSION_FLOOR = 64 << 20


def _header_checksum(header: dict, schema_meta: dict) -> int:
    """CRC-32 of the saved header (less its checksum) and pandas' column-type metadata; the
    data pages carry their own CRCs."""
    body = json.dumps({k: v for k, v in header.items() if k != "checksum"}, sort_keys=True)
    return zlib.crc32(body.encode() + (schema_meta or {}).get(b"pandas", b""))


def save_table(path: str | os.PathLike, df: pd.DataFrame, header: dict) -> Path:
    """Write ``df`` as Parquet with ``header`` (plus format, version, rows, checksum)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df, json_cols = encode_json_columns(df)
    header = {"format": SAVED_FORMAT, "format_version": SAVED_FORMAT_VERSION, **header,
              "radharmony_version": __version__, "rows": len(df), "json_columns": json_cols}
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except UnicodeEncodeError as exc:
        raise SavedFileError(f"The table cannot be saved to {path}: {bad_text(df)} holds text "
                             "that is not valid Unicode", expected="text that UTF-8 can encode",
                             found=f"a lone surrogate ({shorten(exc, 80)})",
                             fix="correct that metadata value (JSON \\ud800-style escapes "
                                 "without their pair)") from None
    meta = dict(table.schema.metadata or {})
    header["checksum"] = _header_checksum(header, meta)
    meta[_META_KEY] = json.dumps(header).encode()
    path = Path(path)
    atomic_write(path, lambda fh: pq.write_table(table.replace_schema_metadata(meta), fh,
                                                 write_page_checksum=True))
    return path


def load_table(path: str | os.PathLike) -> tuple[dict, pd.DataFrame]:
    """``(header, table)`` of a file written by :func:`save_table`; refuses anything else."""
    import pyarrow.parquet as pq

    path = Path(path)
    fix = "save it again with harmonizer.save(path), or harmonize afresh"
    if not path.is_file():
        raise MetadataNotFoundError("the saved harmonizer", [path], fix=fix)
    texts = _check_decoded_size(path, fix)
    try:  # data only: Parquet + a JSON header; nothing is unpickled or imported by name
        # CRC per page; text as dictionaries: a value repeated on many rows is decoded once
        table = pq.read_table(path, page_checksum_verification=True, read_dictionary=texts)
        header = json.loads((table.schema.metadata or {})[_META_KEY])
        if not isinstance(header, dict) or header.get("format") != SAVED_FORMAT:
            raise ValueError(f"header {shorten(header)} is not {SAVED_FORMAT!r}")
        if header.get("format_version") != SAVED_FORMAT_VERSION:
            raise _FormatVersion(header.get("format_version"))
        if header.get("checksum") != _header_checksum(header, table.schema.metadata):
            raise ValueError("the header or column types were altered (checksum mismatch)")
        df = _to_frame(table)
        _check_json_size(df, header.get("json_columns", []))
        df = decode_json_columns(df, header.get("json_columns", []))
    except _FormatVersion as exc:
        raise SavedFileError(f"{path} is a saved harmonizer of format version "
                             f"{shorten(repr(exc.args[0]), 40)}",
                             expected=f"format version {SAVED_FORMAT_VERSION} (what this "
                             f"radharmony {__version__} reads)",
                             found=f"format_version {shorten(repr(exc.args[0]), 40)}",
                             fix="load it with the radharmony release that wrote it, or "
                                 "harmonize afresh and save again") from None
    except _TooLarge as exc:
        raise SavedFileError(f"{path} holds JSON cells of {exc.args[0]:,} bytes in all",
                             expected=f"at most {MAX_TABLE_BYTES // 8:,} bytes of JSON text "
                             "(an eighth of radharmony.table.store.MAX_TABLE_BYTES: parsed "
                             "cells take several times their text)",
                             found=f"{exc.args[0]:,} bytes", fix=fix) from None
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise SavedFileError(f"{path} is not a readable saved radharmony harmonizer",
                             expected="a Parquet file written by harmonizer.save()",
                             found=f"{type(exc).__name__}: {shorten(exc)}", fix=fix) from None
    if len(df) != header.get("rows"):
        raise SavedFileError(f"{path} holds {len(df)} rows", expected=f"{header.get('rows')}"
                             " rows as its header says", found=f"{len(df)}", fix=fix)
    return header, df


def bad_text(df) -> str:
    """Where the first text cell that UTF-8 cannot encode (a lone surrogate) lies."""
    for col in df.columns:
        values = df[col].tolist()
        for row, v in enumerate(values):
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return f"column {col!r}, row {row} ({v.encode('utf-8', 'backslashreplace').decode()!r})"
    return "a cell"


@functools.lru_cache(maxsize=None)
def _code_digest(module_file: str | None) -> str:
    return source_digest(TABLE_SOURCES + ((module_file,) if module_file else ()))


class _FormatVersion(Exception):
    pass


class _TooLarge(Exception):
    pass


def decoded_size(meta) -> int:
    """What a Parquet file's columns will hold once loaded, in bytes, from its footer
    (``pyarrow.parquet.FileMetaData``): per column chunk, text (byte arrays) twice its
    uncompressed bytes (Arrow's buffers, then one Python string per value) plus 64 bytes per
    value (the string object and its pointer), whatever the encoding; any other column twice
    its uncompressed bytes, at least 8 bytes per value (Arrow, then NumPy)."""
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            size, n = max(0, col.total_uncompressed_size), max(0, col.num_values)
            if col.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
                total += 2 * size + 64 * n
            else:
                total += 2 * max(size, 8 * n)
    return total


def _check_decoded_size(path: Path, fix: str) -> list[str]:
    """Refuse a Parquet file whose footer says it decodes to more than
    :data:`MAX_TABLE_BYTES` (:func:`decoded_size`) or expands more than
    :data:`MAX_TABLE_EXPANSION` times its file size, before any page is decoded. Returns the
    names of its text columns."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        meta = pf.metadata
        need = decoded_size(meta)
        texts = [f.name for f in pf.schema_arrow if _is_text(f.type)]
    except Exception as exc:  # not Parquet, damaged footer
        raise SavedFileError(f"{path} is not a readable saved radharmony harmonizer",
                             expected="a Parquet file written by harmonizer.save()",
                             found=f"{type(exc).__name__}: {shorten(exc)}", fix=fix) from None
    size = max(1, path.stat().st_size)
    shape = f"{meta.num_rows:,} rows x {meta.num_columns} columns"
    if need > MAX_TABLE_BYTES:
        raise SavedFileError(f"{path} declares {shape}, {need:,} bytes once decoded",
                             expected=f"at most {MAX_TABLE_BYTES:,} bytes decoded (the memory "
                             "guard radharmony.table.store.MAX_TABLE_BYTES)",
                             found=f"{need:,} bytes (text counted as the Python strings it "
                             "becomes)", fix="if the file is genuine, raise "
                             "radharmony.table.store.MAX_TABLE_BYTES; else delete it")
    if need > _EXPANSION_FLOOR and need > MAX_TABLE_EXPANSION * size:
        raise SavedFileError(f"{path} would expand {need // size:,}x: {size:,} bytes of file "
                             f"declare {shape}, {need:,} bytes once decoded",
                             expected=f"at most {MAX_TABLE_EXPANSION}x (the decompression-bomb "
                             "guard radharmony.table.store.MAX_TABLE_EXPANSION)",
                             found=f"{need // size:,}x", fix="if the file is genuine, raise "
                             "radharmony.table.store.MAX_TABLE_EXPANSION; else delete it")
    return texts


def _check_json_size(df: pd.DataFrame, cols) -> None:
    """Refuse JSON cells whose text, counted per row, passes an eighth of
    :data:`MAX_TABLE_BYTES`: a value shared by many rows is parsed once per row."""
    total = 0
    for c in cols:
        total += sum(len(v) for v in df[c].tolist() if isinstance(v, str))
    if total > MAX_TABLE_BYTES // 8:
        raise _TooLarge(total)


def _to_frame(table) -> pd.DataFrame:
    """An Arrow table as a DataFrame whose text columns (plain or dictionary) are ``object``
    with None for missing; a dictionary's strings are made once and shared by its rows."""
    import pyarrow as pa

    texts = [n for n, c in zip(table.column_names, table.columns) if _is_text(c.type) or
             pa.types.is_dictionary(c.type) and _is_text(c.type.value_type)]
    df = table.drop_columns(texts).to_pandas()
    for name in table.column_names:
        if name in texts:
            df.insert(table.column_names.index(name), name,
                      pd.Series(_text_values(table.column(name)), dtype=object))
    return df


def _is_text(kind) -> bool:
    import pyarrow as pa

    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _text_values(col) -> np.ndarray:
    """A text column (plain or dictionary-encoded) as ``object`` values, None for missing;
    a dictionary column makes each distinct string once and shares it."""
    import pyarrow as pa

    if not pa.types.is_dictionary(col.type):
        return col.to_numpy(zero_copy_only=False)
    parts = []
    for chunk in col.chunks:
        values = np.empty(len(chunk.dictionary) + 1, dtype=object)  # last: missing
        values[:-1] = chunk.dictionary.to_numpy(zero_copy_only=False)
        parts.append(values[chunk.indices.fill_null(len(chunk.dictionary)).to_numpy()])
    return np.concatenate(parts) if parts else np.empty(0, dtype=object)


class TableCache:
    """Harmonized tables under ``<root>/tables/``, keyed by their owner and inputs.

    A table is a zstd-compressed Arrow IPC file (no pickle); nested values (e.g. ``boxes``)
    travel as JSON text. Reading back gives text columns as ``object`` with ``None`` for
    missing, as :func:`~radharmony.table.schema.validate` produces them, so the table read
    back equals the table stored.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root) / "tables"
        sweep_stale_tmp([self.root])

    def path(self, owner: dict, identity: list) -> Path:
        """The entry for ``owner`` (JSON-serializable) whose inputs have ``identity``: any
        change to an input gives another entry."""
        ident = json.dumps([owner, identity, __version__, TABLE_CACHE_FORMAT,
                            _code_digest(owner.get("module_file"))], sort_keys=True, default=str)
        return self.root / f"{hashlib.sha256(ident.encode()).hexdigest()[:32]}.arrow"

    def get(self, owner: dict, identity: list, build: Callable):
        """The stored table for ``owner`` and ``identity``, else ``build()`` stored and
        returned."""
        path = self.path(owner, identity)
        df = self.load(path)
        if df is None:
            df = build()
            self.store(path, df)
        return df

    def load(self, path: Path):
        """The table at ``path``, or None when absent or unreadable (then removed)."""
        if not path.is_file():
            return None
        try:
            return self._read(path)
        except Exception as exc:  # pyarrow raises several types for damaged files
            warnings.warn(f"Table cache {path} is unreadable ({type(exc).__name__}: {exc}); "
                          "harmonizing afresh.", RuntimeWarning, stacklevel=3)
            try:
                path.unlink(missing_ok=True)
            except OSError:  # read-only cache: left in place; store() warns
                pass
            return None

    def store(self, path: Path, df) -> None:
        """Keep ``df`` at ``path``; a cache that cannot be written (read-only, disk full)
        warns once and the table is simply not cached."""
        try:
            self._store(path, df)
        except UnicodeEncodeError:
            warnings.warn(f"Table cache: the table is not cached because {bad_text(df)} holds "
                          "text that is not valid Unicode (a lone surrogate); it is served as "
                          "read, and harmonized again next time.", RuntimeWarning, stacklevel=3)
        except OSError as exc:
            warnings.warn(f"Table cache {self.root} cannot be written ({type(exc).__name__}: "
                          f"{exc}); the table is not cached (harmonized again next time). Free "
                          "disk space or pass a writable cache_dir.", RuntimeWarning,
                          stacklevel=3)

    def _store(self, path: Path, df) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.feather as feather

        df, json_cols = encode_json_columns(df)
        table = pa.Table.from_pandas(df, preserve_index=False)
        for i, (name, col) in enumerate(zip(table.column_names, table.columns)):
            if _is_text(col.type) and col.num_chunks == 1:
                coded = pc.dictionary_encode(col)  # study-level text (and JSON) repeats
                if len(coded.chunk(0).dictionary) <= 0.8 * len(col):
                    table = table.set_column(i, name, coded)  # read back as one str per value
        head = json.dumps({"rows": len(df), "json_columns": json_cols}).encode()
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               b"radharmony_table": head})
        atomic_write(path, lambda fh: feather.write_feather(  # one batch: one dictionary
            table, fh, compression="zstd", chunksize=max(len(df), 1)))

    @staticmethod
    def _read(path: Path):
        import pyarrow.feather as feather

        table = feather.read_table(path)
        head = json.loads(table.schema.metadata[b"radharmony_table"])
        df = _to_frame(table)
        decode_json_columns(df, head["json_columns"])
        if len(df) != head["rows"]:
            raise ValueError(f"{len(df)} rows where its header says {head['rows']}")
        return df
