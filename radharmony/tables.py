"""Harmonized tables on disk without pickle: Parquet (portable) or zstd Arrow IPC (fast).

Nested values (lists of dicts such as ``boxes``) travel as JSON text; a JSON header in the
file's schema metadata records the format, the columns holding JSON and the row count.
Reading returns text columns as ``object`` with ``None`` for missing, as :func:`validate`
produces them, so a table read back equals the table written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from .cache import _atomic_write

_META_KEY = b"radharmony"


def write_table(df: pd.DataFrame, path: str | os.PathLike, header: dict, *,
                fmt: str = "parquet") -> Path:
    """Write ``df`` with ``header`` (JSON-serializable) atomically to ``path``."""
    import pyarrow as pa

    df = df.copy()
    json_cols = [c for c in df.columns if df[c].dtype == object and
                 df[c].map(lambda v: isinstance(v, (list, dict))).any()]
    for c in json_cols:  # nested values travel as JSON text: portable and code-free
        df[c] = df[c].map(lambda v: None if v is None else json.dumps(v))
    header = {**header, "rows": len(df), "json_columns": json_cols}
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           _META_KEY: json.dumps(header).encode()})
    if fmt == "parquet":
        import pyarrow.parquet as pq

        def write(fh):
            pq.write_table(table, fh)
    else:
        import pyarrow.feather as feather

        def write(fh):
            feather.write_feather(table, fh, compression="zstd")
    path = Path(path)
    _atomic_write(path, write)
    return path


def read_table(path: str | os.PathLike) -> tuple[pd.DataFrame, dict]:
    """``(df, header)`` from a file written by :func:`write_table` (either format).

    Raises ``ValueError`` (or a pyarrow error) for a file that is damaged or of another kind.
    """
    import pyarrow as pa

    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"ARROW1":
        import pyarrow.feather as feather

        table = feather.read_table(path)
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
    header = json.loads((table.schema.metadata or {})[_META_KEY])
    df = table.to_pandas()
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            df[name] = pd.Series(col.to_numpy(zero_copy_only=False), dtype=object)
    for c in header.get("json_columns", []):
        df[c] = df[c].map(lambda v: None if v is None else json.loads(v)).astype(object)
    if len(df) != header.get("rows"):
        raise ValueError(f"{len(df)} rows where its header says {header.get('rows')}")
    return df, header
