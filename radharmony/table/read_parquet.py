"""Parquet metadata read in bounded memory: only the columns a harmonizer names, one record
batch at a time, into one compact Arrow table.

Peak memory follows the columns asked for, never the file: a 42-million-row metadata file
with a dozen columns costs what its two or three id columns cost, and the text of repeated
ids can be kept dictionary-encoded (each distinct id stored once).
"""

from __future__ import annotations

import os
from typing import Sequence

from ..errors import MetadataError

#: rows per record batch (a batch's columns are decoded, then appended as Arrow chunks)
BATCH_ROWS = 1 << 18


def _open(path, description: str, dictionary: Sequence[str] = ()):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, read_dictionary=list(dictionary))
    except (OSError, pa.ArrowException) as exc:
        raise MetadataError(f"{path} cannot be read as Parquet ({description})",
                            expected="a Parquet file as shipped",
                            found=f"{type(exc).__name__}: {exc}",
                            fix="download the file again") from None


def parquet_names(path: str | os.PathLike, *, description: str) -> list[str]:
    """The column names of the Parquet file ``path`` (its footer only is read)."""
    return _open(path, description).schema_arrow.names


def read_parquet(path: str | os.PathLike, columns: Sequence[str], *, description: str,
                 dictionary: Sequence[str] = (), batch_rows: int | None = None,
                 progress: bool = True):
    """The ``columns`` of the Parquet file ``path`` as one ``pyarrow.Table``, read a record
    batch of ``batch_rows`` (default :data:`BATCH_ROWS`) rows at a time; ``dictionary``
    columns come back dictionary-encoded. A file that is not Parquet, or lacks one of
    ``columns``, is refused naming the file, the columns it has and the fix."""
    import pyarrow as pa
    from tqdm.auto import tqdm

    pf = _open(path, description, dictionary)
    names = pf.schema_arrow.names
    missing = [c for c in columns if c not in names]
    if missing:
        raise MetadataError(f"{path} ({description}) has no column {missing}",
                            expected=f"columns {list(columns)}", found=f"columns {names}",
                            fix="pass the file as shipped")
    n = pf.metadata.num_rows
    batches = []
    with tqdm(total=n, unit="row", desc=f"reading {os.path.basename(path)}", leave=False,
              disable=not progress or n < 4 * BATCH_ROWS) as bar:
        for batch in pf.iter_batches(batch_size=batch_rows or BATCH_ROWS, columns=list(columns),
                                     use_pandas_metadata=False):
            batches.append(batch)
            bar.update(batch.num_rows)
    try:
        if not batches:
            return pf.schema_arrow.empty_table().select(list(columns))
        return pa.Table.from_batches(batches)
    except pa.ArrowException as exc:
        raise MetadataError(f"{path} ({description}) cannot be read column by column",
                            expected="one type per column", found=f"{type(exc).__name__}: "
                            f"{exc}", fix="download the file again") from None


def column_values(column, fn=None) -> list:
    """An Arrow column of a table :func:`read_parquet` read as a Python list, each distinct
    value built once (``fn`` applied to it, once per distinct value; nulls stay None)."""
    import numpy as np
    import pandas as pd

    cat = pd.Categorical(column.to_pandas())
    cats = [fn(c) if fn else c for c in cat.categories.tolist()]
    return np.asarray(cats + [None], dtype=object)[cat.codes].tolist()


__all__ = ["BATCH_ROWS", "column_values", "parquet_names", "read_parquet"]
