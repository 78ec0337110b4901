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

import hashlib
import json
import os
import warnings
import zlib
from pathlib import Path
from typing import Callable

import pandas as pd

from ..cells import decode_json_columns, encode_json_columns
from ..errors import MetadataNotFoundError, SavedFileError, shorten
from ..files import atomic_write
from ..version import __version__

SAVED_FORMAT = "radharmony-harmonizer"
SAVED_FORMAT_VERSION = 1
_META_KEY = b"radharmony"
#: bumped whenever the table cache's file layout or keying changes
TABLE_CACHE_FORMAT = 2


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
    table = pa.Table.from_pandas(df, preserve_index=False)
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
    try:  # data only: Parquet + a JSON header; nothing is unpickled or imported by name
        table = pq.read_table(path, page_checksum_verification=True)  # CRC per page
        header = json.loads((table.schema.metadata or {})[_META_KEY])
        if not isinstance(header, dict) or header.get("format") != SAVED_FORMAT:
            raise ValueError(f"header {shorten(header)} is not {SAVED_FORMAT!r}")
        if header.get("checksum") != _header_checksum(header, table.schema.metadata):
            raise ValueError("the header or column types were altered (checksum mismatch)")
        df = decode_json_columns(table.to_pandas(), header.get("json_columns", []))
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise SavedFileError(f"{path} is not a readable saved radharmony harmonizer",
                             expected="a Parquet file written by harmonizer.save()",
                             found=f"{type(exc).__name__}: {shorten(exc)}", fix=fix) from None
    if len(df) != header.get("rows"):
        raise SavedFileError(f"{path} holds {len(df)} rows", expected=f"{header.get('rows')}"
                             " rows as its header says", found=f"{len(df)}", fix=fix)
    return header, df


class TableCache:
    """Harmonized tables under ``<root>/tables/``, keyed by their owner and inputs.

    A table is a zstd-compressed Arrow IPC file (no pickle); nested values (e.g. ``boxes``)
    travel as JSON text. Reading back gives text columns as ``object`` with ``None`` for
    missing, as :func:`~radharmony.table.schema.validate` produces them, so the table read
    back equals the table stored.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root) / "tables"

    def path(self, owner: dict, identity: list) -> Path:
        """The entry for ``owner`` (JSON-serializable) whose inputs have ``identity``: any
        change to an input gives another entry."""
        ident = json.dumps([owner, identity, __version__, TABLE_CACHE_FORMAT], sort_keys=True,
                           default=str)
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
            path.unlink(missing_ok=True)
            return None

    def store(self, path: Path, df) -> None:
        import pyarrow as pa
        import pyarrow.feather as feather

        df, json_cols = encode_json_columns(df)
        table = pa.Table.from_pandas(df, preserve_index=False)
        head = json.dumps({"rows": len(df), "json_columns": json_cols}).encode()
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               b"radharmony_table": head})
        atomic_write(path, lambda fh: feather.write_feather(table, fh, compression="zstd"))

    @staticmethod
    def _read(path: Path):
        import pyarrow as pa
        import pyarrow.feather as feather

        table = feather.read_table(path)
        head = json.loads(table.schema.metadata[b"radharmony_table"])
        df = table.to_pandas()
        for name, col in zip(table.column_names, table.columns):
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                df[name] = pd.Series(col.to_numpy(zero_copy_only=False), dtype=object)
        decode_json_columns(df, head["json_columns"])
        if len(df) != head["rows"]:
            raise ValueError(f"{len(df)} rows where its header says {head['rows']}")
        return df
