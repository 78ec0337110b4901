"""Records from drafts, and ``records.parquet`` written in fixed row groups.

:func:`assemble` turns a chunk of a task's drawn items into record columns: the item id (a
repeat's gets ``#k``), the prompt variant (a seeded hash of the record's item id, so the same
item always gets the same paraphrase), the record id (:func:`~radharmony.mixture.records.
record_id`), the prompt filled from the task's slots, and the unit's patient, study, images
and mixture split. :class:`RecordWriter` writes row groups of exactly ``row_group`` rows
(zstd, dictionary pages: both deterministic), so the file's bytes depend only on the records,
never on how they were chunked, and memory holds at most one row group; with ``columns=``
it also writes the mixture's memory-mapped columns (:mod:`radharmony.mixture.columns`) as the
records pass.
"""

from __future__ import annotations

import os
import string
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from ..files import TMP_PREFIX
from .column_writer import ColumnWriter
from .lengths import LengthTally, token_counts
from .records import RECORD_SCHEMA

#: rows per Parquet row group
ROW_GROUP = 65_536
#: the columns written with dictionary pages (``record_id`` is unique: no dictionary)
DICTIONARY = [c for c in RECORD_SCHEMA.names if c != "record_id"]


def repeat_index(picks: np.ndarray) -> np.ndarray:
    """For each drawn position, how many times it was drawn before (0 for the first)."""
    order = np.argsort(picks, kind="stable")
    sp = picks[order]
    idx = np.arange(len(sp))
    starts = np.r_[True, sp[1:] != sp[:-1]] if len(sp) else np.zeros(0, bool)
    first = np.maximum.accumulate(np.where(starts, idx, 0)) if len(sp) else idx
    out = np.empty(len(sp), np.int64)
    out[order] = idx - first
    return out


def prompt_variants(seed: int, source: str, task: str, items: list, n: int) -> list:
    """The paraphrase of each item: a seeded hash of (source, task, item) modulo ``n``."""
    if n == 1:
        return [0] * len(items)
    prefix, h = f"{int(seed)}\x1f{source}\x1f{task}\x1f", xxhash.xxh3_64_intdigest
    return [h((prefix + i).encode()) % n for i in items]


def record_ids(source: str, task: str, items: list, variants: list) -> list:
    """:func:`~radharmony.mixture.records.record_id` of each (item, variant), in one loop."""
    prefix, h = f"{source}\x1f{task}\x1f", xxhash.xxh3_64_hexdigest
    return [h(f"{prefix}{i}\x1f{v}".encode()) for i, v in zip(items, variants)]


def positional(template: str, names: list[str]) -> str:
    """``template`` with each ``{name}`` replaced by ``{k}``, ``k`` the name's position in
    ``names`` (so a record is ``template.format(*values)``, no dict per record)."""
    out = []
    for text, name, spec, conv in string.Formatter().parse(template):
        out.append(text.replace("{", "{{").replace("}", "}}"))
        if name is not None:
            out.append("{" + str(names.index(name)) + (f"!{conv}" if conv else "")
                       + (f":{spec}" if spec else "") + "}")
    return "".join(out)


def assemble(ctx, task, draft, units, j: np.ndarray, rep: np.ndarray, prompts: tuple,
             *, source_split: str) -> pa.Table:
    """The records of draft items ``j`` (their repeat indexes ``rep``) as an Arrow table of
    :data:`~radharmony.mixture.records.RECORD_SCHEMA`."""
    out = draft.render(j)
    pos = draft.pos[j]
    if callable(draft.item):
        base = draft.item(j)
    else:
        base = (draft.item[j] if draft.item is not None else units.ids[pos]).tolist()
    items = [str(i) for i in base] if not rep.any() else \
        [str(i) if k == 0 else f"{i}#{k}" for i, k in zip(base, rep.tolist())]
    variants = prompt_variants(ctx.seed, ctx.name, task.name, items, len(prompts))
    if out.slots:
        names = list(out.slots)
        templates = [positional(t, names) for t in prompts]
        prompt_text = [templates[v].format(*values)
                       for v, values in zip(variants, zip(*out.slots.values()))]
    else:
        prompt_text = [prompts[v] for v in variants]
    n = len(j)
    if draft.text_only:
        paths = views = [[] for _ in range(n)]
    else:
        up, uv = units.paths, units.views
        paths, views = [up[p] for p in pos.tolist()], [uv[p] for p in pos.tolist()]
    cols = {
        "record_id": record_ids(ctx.name, task.name, items, variants),
        "task": [task.name] * n, "family": [task.family] * n,
        "source": [ctx.name] * n, "dataset": [ctx.key] * n, "source_split": [source_split] * n,
        "split": np.where(units.valid[pos], "valid", "train").tolist(),
        "patient_id": units.patients[pos].tolist(), "study_id": units.study_ids[pos].tolist(),
        "sample_id": [str(s) for s in units.ids[pos].tolist()],
        "image_paths": paths, "views": views, "prompt": prompt_text,
        "target": out.targets, "prompt_variant": np.asarray(variants, np.int16),
        "fields": out.fields,
    }
    return pa.table(cols, schema=RECORD_SCHEMA)


class RecordWriter:
    """``records.parquet`` written to a temporary file beside ``path`` in row groups of
    exactly ``row_group`` rows, renamed into place by :meth:`close`; ``lengths`` tallies the
    targets' lengths per task as they pass (``mixture.json``'s ``target_lengths``).

    Each full row group is encoded and compressed on one background thread (Arrow releases
    the GIL) while the next records are assembled; the groups go in order, one at a time, so
    the bytes are those of writing them inline and memory holds at most two row groups.

    ``columns``: the mixture folder whose ``columns/`` is written too
    (:class:`~radharmony.mixture.columns.ColumnWriter`; :meth:`close` takes what it records
    of the sources), or None."""

    def __init__(self, path: Path, *, row_group: int = ROW_GROUP, columns=None):
        self.path, self.row_group = Path(path), row_group
        self.columns = None if columns is None else ColumnWriter(columns)
        self.tmp = self.path.with_name(f"{TMP_PREFIX}{os.getpid()}-{self.path.name}")
        self._writer = pq.ParquetWriter(self.tmp, RECORD_SCHEMA, compression="zstd",
                                        use_dictionary=DICTIONARY, write_statistics=True)
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="records-parquet")
        self._pending = None  # the row group being written
        self.rows = 0
        self.lengths = LengthTally()

    def write(self, table: pa.Table) -> None:
        if len(table):
            self.lengths.add(table.column("task"),
                             token_counts(table.column("target").combine_chunks()))
        if self.columns is not None:
            self.columns.write(table)
        self._buffer.append(table)
        self._buffered += len(table)
        while self._buffered >= self.row_group:
            whole = pa.concat_tables(self._buffer)
            self._submit(whole.slice(0, self.row_group))
            rest = whole.slice(self.row_group)
            self._buffer, self._buffered = ([rest] if len(rest) else []), len(rest)
        self.rows += len(table)

    def _submit(self, group: pa.Table) -> None:
        """Write ``group`` (one row group) once the previous one is written."""
        self._wait()
        self._pending = self._pool.submit(self._write_group, group)

    def _write_group(self, group: pa.Table) -> None:
        self._writer.write_table(group.combine_chunks(), row_group_size=self.row_group)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()  # a failed write raises here

    def close(self, sources: list | None = None) -> None:
        """Write the last row group and move the file into place (and the columns, with
        ``sources``: each ``{"name", "image_root", "cache_key"}``)."""
        if self._buffered:
            self._submit(pa.concat_tables(self._buffer))
        self._buffer, self._buffered = [], 0
        self._wait()
        self._pool.shutdown()
        self._writer.close()
        if self.columns is not None:
            self.columns.close(sources or [])
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        try:
            try:
                self._wait()
            except Exception:  # the failure being aborted on, or one of this group's
                pass
            self._pool.shutdown()
            self._writer.close()
        finally:
            self.tmp.unlink(missing_ok=True)
            if self.columns is not None:
                self.columns.abort()


__all__ = ["ROW_GROUP", "RecordWriter", "assemble", "positional", "prompt_variants",
           "record_ids", "repeat_index"]
