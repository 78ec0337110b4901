"""Reading a mixture's ``records.parquet`` as Arrow (no torch): :func:`read_records` (the
records of a split, tasks and sources) and :func:`table_records` (rows as dicts, fast), shared
by :class:`~radharmony.mixture.dataset.MixtureDataset` and
:class:`~radharmony.mixture.sampler.MixtureSampler`."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import RadHarmonyError
from .records import RECORD_COLUMNS, RECORDS_NAME

#: columns of few distinct values, read dictionary-encoded (one Python string per value)
DICTIONARY_COLUMNS = ("task", "family", "source", "dataset", "source_split", "split",
                      "prompt", "views")

def table_records(table) -> list[dict]:
    """An Arrow table's rows as dicts, several times faster than ``Table.to_pylist``: list
    columns through their flat values and offsets, dictionary-encoded ones (a prompt, a view,
    a source repeated on many rows) through their few distinct values, each one Python object
    shared by its rows."""
    values = []
    for column in table.columns:
        arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        values.append(_pylist(arr))
    names = table.column_names
    return [dict(zip(names, row)) for row in zip(*values)]


def _pylist(arr) -> list:
    import pyarrow as pa

    if arr.null_count:
        return arr.to_pylist()
    if pa.types.is_dictionary(arr.type):
        distinct = arr.dictionary.to_pylist()
        return [distinct[i] for i in arr.indices.to_numpy().tolist()]
    if pa.types.is_list(arr.type):
        offsets, flat = arr.offsets.to_numpy().tolist(), _pylist(arr.values)
        return [flat[a:b] for a, b in zip(offsets, offsets[1:])]
    return arr.to_pylist()


def dictionary_paths(columns) -> list[str]:
    """The Parquet paths of ``columns`` to read as dictionaries (:data:`DICTIONARY_COLUMNS`)."""
    return [f"{c}.list.element" if c == "views" else c for c in columns
            if c in DICTIONARY_COLUMNS]


def _names(value, what: str) -> list[str] | None:
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) for n in names):
        raise RadHarmonyError(f"{what} must be a name or a list of names",
                              expected=f"e.g. {what}=['findings']", found=repr(value),
                              fix=f"pass {what}=None for all")
    return names


def read_records(out: str | os.PathLike, *, split: str | None = "train", tasks=None,
                 sources=None, columns=RECORD_COLUMNS):
    """The records of ``out/records.parquet`` (an Arrow table of ``columns``) of ``split``
    (None: every split), ``tasks`` and ``sources`` (names; None: all), in file order. A
    name the mixture does not hold is refused, naming the ones it does."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = Path(out) / RECORDS_NAME
    want = list(dict.fromkeys([*columns, "split", "task", "source"]))
    try:
        table = pq.read_table(path, columns=want, read_dictionary=dictionary_paths(want))
    except (OSError, ValueError) as exc:
        raise RadHarmonyError(f"Cannot read the mixture's records {path}",
                              expected=f"{RECORDS_NAME} written by radharmony mix build",
                              found=f"{type(exc).__name__}: {exc}",
                              fix="point at the folder `radharmony mix build` wrote") from None
    keep = None
    for col, names in (("split", None if split is None else [split]),
                       ("task", _names(tasks, "tasks")), ("source", _names(sources, "sources"))):
        if names is None:
            continue
        held = sorted(set(table.column(col).to_pylist()))
        unknown = [n for n in names if n not in held]
        if unknown:
            raise RadHarmonyError(f"The mixture {Path(out)} has no {col} {unknown[0]!r}",
                                  expected=f"one of {held}", found=repr(unknown),
                                  fix=f"pass {col}s the mixture holds (radharmony mix info)")
        mask = pc.is_in(table.column(col), value_set=pa.array(names))
        keep = mask if keep is None else pc.and_(keep, mask)
    if keep is not None:
        table = table.filter(keep)
    return table.select(list(columns))


__all__ = ["DICTIONARY_COLUMNS", "dictionary_paths", "read_records", "table_records"]
