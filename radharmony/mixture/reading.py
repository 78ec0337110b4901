"""Reading a mixture's ``records.parquet`` as Arrow (no torch): :func:`read_records` (the
records of a split, tasks and sources), :func:`table_records` (rows as dicts, fast) and
:class:`ColumnRows` (any rows' columns as lists, per batch), shared by
:class:`~radharmony.mixture.dataset.MixtureDataset` and
:class:`~radharmony.mixture.sampler.MixtureSampler`."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import numpy as np

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
        values.append(_pylist(one_chunk(column)))
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


class ColumnRows:
    """Columns of an Arrow table as Python lists for any rows (a batch's), the values
    :func:`table_records` gives for ``table.take(rows)``, each column read once per batch by
    a reader made for it when the table is: a dictionary-encoded column (a string or a list
    of strings), or a string column whose values repeat (at most :data:`FEW` distinct, on
    at most half the rows: a task's prompt or target, ``fields`` of ``{}``), keeps its codes
    as NumPy arrays and its few distinct values as Python objects (one indexing per batch);
    any other column is taken from Arrow. Made once per table; the codes are a few bytes per row, outside Python
    objects (a forked DataLoader worker shares them).

    >>> import pyarrow as pa
    >>> t = pa.table({"task": pa.array(["a", "b", None]).dictionary_encode(),
    ...               "views": pa.array([["PA"], [], None], pa.list_(pa.dictionary(
    ...                   pa.int32(), pa.string()))), "target": ["x", "y", "z"]})
    >>> ColumnRows(t).take(np.array([2, 0, 1]))
    {'task': [None, 'a', 'b'], 'views': [None, ['PA'], []], 'target': ['z', 'x', 'y']}
    """

    def __init__(self, table):
        import pyarrow as pa
        import pyarrow.compute as pc

        self.names = list(table.column_names)
        #: a dictionary column's codes (a null: the last distinct value) and distinct values
        self.codes: dict[str, tuple[np.ndarray, list]] = {}
        #: each column's reader: of the rows as int64 positions, or (``_arrow``) as an Arrow
        #: array of them
        self._read: dict = {}
        self._arrow: set[str] = set()
        take = pc.get_function("array_take")
        for name, kind in zip(self.names, table.schema.types):
            column = table.column(name)
            arr = one_chunk(column)
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                encoded = _repeating(arr)
                if encoded is not None:
                    kind, arr = encoded.type, encoded
            if pa.types.is_dictionary(kind):  # codes: a few bytes a row
                self.codes[name] = _codes(arr)
            elif pa.types.is_list(kind) and pa.types.is_dictionary(kind.value_type):
                self._read[name] = _list_reader(arr)
            else:  # the kernel without the wrappers: ~2x faster
                self._read[name] = partial(_taken, take, arr)
                self._arrow.add(name)
        self._together = _CodeGrid(self.codes) if len(self.codes) > 1 else None
        for name, (codes, distinct) in self.codes.items():  # (the grid's views, if any)
            self._read[name] = _code_reader(codes, distinct)

    def take(self, rows: np.ndarray, names=None) -> dict[str, list]:
        """``{column: [value per row]}`` of ``rows`` (int64 positions, in range), for
        ``names`` (default: every column), in that order."""
        import pyarrow as pa

        rows = np.asarray(rows, np.int64)
        names = self.names if names is None else names
        arrow = pa.array(rows) if not self._arrow.isdisjoint(names) else None
        read = self._read
        coded = [n for n in names if n in self.codes]
        if len(coded) > 1 and self._together is not None:  # one indexing for all of them
            done = self._together.take(rows, coded)
            return {n: done[n] if n in done else read[n](arrow if n in self._arrow else rows)
                    for n in names}
        return {n: read[n](arrow if n in self._arrow else rows) for n in names}


class _CodeGrid:
    """The codes of a table's dictionary columns side by side (one row of codes per table row,
    the columns' :attr:`ColumnRows.codes` being views of it: no more memory) and all their
    distinct values in one object array: a batch's values of several such columns come out
    of one indexing."""

    def __init__(self, codes: dict):
        self.where = {name: j for j, name in enumerate(codes)}
        sizes = [len(distinct) for _, distinct in codes.values()]
        n = len(next(iter(codes.values()))[0])
        self.grid = np.empty((n, len(codes)), np.int32 if sum(sizes) < 2 ** 31 else np.int64)
        self.start = np.cumsum([0, *sizes[:-1]]).astype(self.grid.dtype)
        self.values = _objects([v for _, distinct in codes.values() for v in distinct])
        for j, (name, (own, distinct)) in enumerate(list(codes.items())):
            self.grid[:, j] = own
            codes[name] = (self.grid[:, j], distinct)

    def take(self, rows: np.ndarray, names: list) -> dict[str, list]:
        cols = np.array([self.where[n] for n in names])
        codes = self.grid[rows][:, cols] + self.start[cols]
        return dict(zip(names, self.values[codes].T.tolist()))


#: the most distinct values a string column is read through as codes (their Python strings
#: made once, when the table is read)
FEW = 1024


def _repeating(arr):
    """``arr`` (strings) dictionary-encoded when its values repeat (at most :data:`FEW`
    distinct, on at most half the rows); else None."""
    import pyarrow.compute as pc

    most = min(FEW, len(arr) // 2)
    if len(arr) < 2 or pc.count_distinct(arr[:4 * FEW], mode="all").as_py() > most:
        return None  # (the first rows already hold too many: most columns are decided so)
    if pc.count_distinct(arr, mode="all").as_py() > most:
        return None
    return pc.dictionary_encode(arr)


def _taken(take, arr, rows) -> list:
    return take.call([arr, rows]).to_pylist()


def _codes(arr) -> tuple[np.ndarray, list]:
    """A dictionary array's codes (nulls -> the last distinct value, None) and its distinct
    values."""
    import pyarrow.compute as pc

    distinct = arr.dictionary.to_pylist() + [None]
    codes = pc.fill_null(arr.indices, len(distinct) - 1) if arr.null_count else arr.indices
    return codes.to_numpy(zero_copy_only=False), distinct


def _code_reader(codes: np.ndarray, distinct: list):
    """A function of rows giving their values: the distinct values (Python objects, made
    once) indexed by the rows' codes, in NumPy."""
    values = _objects(distinct)
    return lambda rows: values[codes[rows]].tolist()


def _objects(values: list) -> np.ndarray:
    """``values`` as a NumPy object array (lists stay values, not a dimension)."""
    out = np.empty(len(values), object)
    out[:] = values
    return out


def _list_reader(arr):
    """A function of rows giving the values of a list array of dictionary values: each
    row's list of codes is numbered among the column's distinct lists once (a list of views
    takes a few forms), so a batch indexes those."""
    offsets = arr.offsets.to_numpy().astype(np.int64)
    codes, distinct = _codes(arr.values)
    lengths = np.diff(offsets)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    width = int(lengths.max()) if len(lengths) else 0
    grid = np.full((len(lengths), width + 1), -1, np.int32)  # each row: length, then codes
    grid[:, 0] = np.where(valid, lengths, -1)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    grid[owner, 1 + np.arange(len(owner)) - np.repeat(offsets[:-1] - offsets[0], lengths)] = \
        codes[offsets[0]:offsets[-1]] if len(owner) else codes[:0]
    base = len(distinct) + 2  # a row's values as one number when they fit in 63 bits
    if (width + 1) * np.log2(base) < 63:
        key = (grid.astype(np.int64) + 1) @ base ** np.arange(width + 1, dtype=np.int64)
        _, first, number = np.unique(key, return_index=True, return_inverse=True)
        forms = grid[first]
    else:
        forms, number = np.unique(grid, axis=0, return_inverse=True)
    lists = [None if n < 0 else [distinct[c] for c in form[1:1 + n]]
             for n, form in zip(forms[:, 0].tolist(), forms.tolist())]
    number = number.reshape(-1)

    def read(rows) -> list:
        return [None if v is None else v.copy() for v in map(lists.__getitem__,
                                                             number[rows].tolist())]
    return read


def column_objects(column) -> np.ndarray:
    """An Arrow column as a NumPy object array, a dictionary-encoded one through its codes
    (each distinct value one Python object, shared by its rows: a million rows in
    milliseconds, not the seconds of ``to_pylist``)."""
    import pyarrow as pa

    arr = one_chunk(column) if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(arr.type):
        codes, distinct = _codes(arr)
        return _objects(distinct)[codes]
    return _objects(arr.to_pylist())


def distinct_values(column) -> list:
    """The distinct values of an Arrow column (nulls left out), sorted."""
    return sorted(v for v in column.unique().to_pylist() if v is not None)


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
        held = distinct_values(table.column(col))
        unknown = [n for n in names if n not in held]
        if unknown:
            raise RadHarmonyError(f"The mixture {Path(out)} has no {col} {unknown[0]!r}",
                                  expected=f"one of {held}", found=repr(unknown),
                                  fix=f"pass {col}s the mixture holds (radharmony mix info)")
        mask = pc.is_in(table.column(col), value_set=pa.array(names))
        keep = mask if keep is None else pc.and_(keep, mask)
    return _compact(table.select(list(columns)), keep)


#: the most bytes a string column (or a list column's strings) holds in one chunk with 32-bit
#: offsets; a column over it is read as ``large_string`` (the image paths of ~10 M records)
OFFSET_LIMIT = 2**31 - 1


def _compact(table, keep=None):
    """``table``'s rows where ``keep`` (None: all), each column in one chunk (what
    :class:`ColumnRows` and a DataLoader worker read without copying again), made a column
    at a time so that only one column is ever held twice."""
    import pyarrow as pa

    names, arrays = table.column_names, []
    for _ in names:
        column = table.column(0)
        if keep is not None:
            column = column.filter(keep)
        arrays.append(one_chunk(column))
        table = table.remove_column(0)  # its buffers go unless still held
    del table
    pa.default_memory_pool().release_unused()  # the read's and the copies' freed pages
    return pa.table(dict(zip(names, arrays)))


def one_chunk(column):
    """``column`` as one array; its strings as ``large_string`` when they would overflow 32-bit
    offsets (:data:`OFFSET_LIMIT`)."""
    import pyarrow as pa

    if column.num_chunks == 1:
        return column.chunk(0)
    if not column.num_chunks:
        return pa.array([], column.type)
    kind = column.type
    if column.nbytes > OFFSET_LIMIT:
        if pa.types.is_string(kind):
            column = column.cast(pa.large_string())
        elif pa.types.is_list(kind) and pa.types.is_string(kind.value_type):
            column = column.cast(pa.list_(pa.large_string()))
    return column.combine_chunks()


__all__ = ["ColumnRows", "DICTIONARY_COLUMNS", "column_objects", "dictionary_paths",
           "distinct_values", "one_chunk", "read_records", "table_records"]
