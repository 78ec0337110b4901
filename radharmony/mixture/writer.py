"""Records from drafts, and ``records.parquet`` written in fixed row groups.

:func:`assemble` turns a chunk of a task's drawn items into record columns: the item id (a
repeat's gets ``#k``), the prompt variant (a seeded hash of the record's item id, so the same
item always gets the same paraphrase), the record id (:func:`~radharmony.mixture.records.
record_id`), the prompt filled from the task's slots, and the unit's patient, study, images
and mixture split. :class:`RecordWriter` writes row groups of exactly ``row_group`` rows
(zstd, dictionary pages: both deterministic), so the file's bytes depend only on the records,
never on how they were chunked, and memory holds at most one row group.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from ..files import TMP_PREFIX
from .records import RECORD_SCHEMA, record_id

#: rows per Parquet row group
ROW_GROUP = 65_536


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


def prompt_variants(seed: int, source: str, task: str, items: list, n: int) -> np.ndarray:
    """The paraphrase of each item: a seeded hash of (source, task, item) modulo ``n``."""
    if n == 1:
        return np.zeros(len(items), np.int64)
    prefix = f"{int(seed)}\x1f{source}\x1f{task}\x1f"
    return np.fromiter((xxhash.xxh3_64_intdigest((prefix + i).encode()) % n for i in items),
                       np.int64, len(items))


def assemble(ctx, task, draft, units, j: np.ndarray, rep: np.ndarray, prompts: tuple,
             *, source_split: str) -> pa.Table:
    """The records of draft items ``j`` (their repeat indexes ``rep``) as an Arrow table of
    :data:`~radharmony.mixture.records.RECORD_SCHEMA`."""
    out = draft.render(j)
    pos = draft.pos[j]
    base = draft.item[j] if draft.item is not None else units.ids[pos]
    items = [str(i) if k == 0 else f"{i}#{k}" for i, k in zip(base, rep)]
    variants = prompt_variants(ctx.seed, ctx.name, task.name, items, len(prompts))
    slot_names = list(out.slots)
    slot_values = [out.slots[s] for s in slot_names]
    prompt_text = []
    for r, v in enumerate(variants):
        template = prompts[v]
        prompt_text.append(template.format(**{s: vals[r] for s, vals in
                                              zip(slot_names, slot_values)})
                           if slot_names else template)
    n = len(j)
    if draft.text_only:
        paths = views = [[] for _ in range(n)]
    else:
        paths = [units.paths[p] for p in pos]
        views = [units.views[p] for p in pos]
    cols = {
        "record_id": [record_id(ctx.name, task.name, i, v) for i, v in zip(items, variants)],
        "task": [task.name] * n, "family": [task.family] * n,
        "source": [ctx.name] * n, "dataset": [ctx.key] * n, "source_split": [source_split] * n,
        "split": np.where(units.valid[pos], "valid", "train").tolist(),
        "patient_id": units.patients[pos].tolist(), "study_id": units.study_ids[pos].tolist(),
        "sample_id": [str(s) for s in units.ids[pos]],
        "image_paths": paths, "views": views, "prompt": prompt_text,
        "target": out.targets, "prompt_variant": variants.astype(np.int16),
        "fields": out.fields,
    }
    return pa.table(cols, schema=RECORD_SCHEMA)


class RecordWriter:
    """``records.parquet`` written to a temporary file beside ``path`` in row groups of
    exactly ``row_group`` rows, renamed into place by :meth:`close`."""

    def __init__(self, path: Path, *, row_group: int = ROW_GROUP):
        self.path, self.row_group = Path(path), row_group
        self.tmp = self.path.with_name(f"{TMP_PREFIX}{os.getpid()}-{self.path.name}")
        self._writer = pq.ParquetWriter(self.tmp, RECORD_SCHEMA, compression="zstd",
                                        use_dictionary=True, write_statistics=True)
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        self._buffer.append(table)
        self._buffered += len(table)
        while self._buffered >= self.row_group:
            whole = pa.concat_tables(self._buffer)
            self._writer.write_table(whole.slice(0, self.row_group).combine_chunks(),
                                     row_group_size=self.row_group)
            rest = whole.slice(self.row_group)
            self._buffer, self._buffered = ([rest] if len(rest) else []), len(rest)
        self.rows += len(table)

    def close(self) -> None:
        if self._buffered:
            self._writer.write_table(pa.concat_tables(self._buffer).combine_chunks(),
                                     row_group_size=self.row_group)
        self._buffer, self._buffered = [], 0
        self._writer.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            self.tmp.unlink(missing_ok=True)


__all__ = ["ROW_GROUP", "RecordWriter", "assemble", "prompt_variants", "repeat_index"]
