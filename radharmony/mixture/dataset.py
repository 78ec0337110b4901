"""Reading a mixture for training: :class:`MixtureDataset` (a map-style dataset of records with
their images), :func:`mixture_collate` (batches of mixed tasks) and, from
:mod:`radharmony.mixture.sampler`, :class:`MixtureSampler` (the resumable, rank-sharded draw).

A sample is one record (its columns; ``fields`` as a dict), read from the mixture's
memory-mapped columns (:mod:`radharmony.mixture.columns`: opening holds no Python object per
record, and every rank and DataLoader worker on a machine shares the pages), with its images
read by path through the pipeline and cache their source dataset uses
(:class:`~radharmony.mixture.images.SourceImages`; no source's metadata is opened):

* ``img`` ``(n, 1, S, S)`` in [-1, 1], the record's ``n`` images (``n = 0`` for a text-only
  record) and ``num_images`` n;
* ``prior_img`` ``(m, 1, S, S)`` and ``prior_num_images`` m: the prior study's images
  (``fields["prior_image_paths"]``; none for most records).

Batched (``DataLoader(ds, batch_size=B, collate_fn=mixture_collate)``) the images of a batch
are read at once and packed one after another, like radharmony's packed study batches:
``img`` ``(sum n, 1, S, S)`` with ``num_images`` ``(B,)`` (:func:`radharmony.pad_packed`
gives ``(B, K, 1, S, S)`` and a mask), text and ``fields`` as per-record lists.
"""

from __future__ import annotations

import os
from operator import eq, is_
from pathlib import Path

import numpy as np
import orjson
import torch

from ..data import handoff
from ..data.collate import collate
from ..data.handoff import PACKED_KEYS
from ..errors import RadHarmonyError
from .column_groups import GroupRows
from .columns import MixtureColumns
from .images import SourceImages
from .reading import ColumnRows, read_records, table_records  # noqa: F401 (re-exported)
from .records import RECORD_COLUMNS, read_manifest
from .sampler import MixtureSampler

#: the record columns a sample carries by default (``fields`` parsed; ``dataset``,
#: ``source_split`` and ``prompt_variant`` on request: ``columns=RECORD_COLUMNS``)
SAMPLE_COLUMNS = tuple(c for c in RECORD_COLUMNS
                       if c not in ("dataset", "source_split", "prompt_variant"))
#: columns every sample needs to find its images
_NEEDED = ("source", "task", "image_paths", "fields")


class MixtureDataset(torch.utils.data.Dataset):
    """The records of a mixture as samples with their images (see the module doc).

    Args:
        out: the mixture folder (``records.parquet`` + ``mixture.json``).
        split: ``"train"`` or ``"valid"`` (None: both).
        tasks, sources: only these task / source names (None: all).
        size: the images' size S (default: the manifest's ``images.size``, else 224).
        cache_dir: the image cache every source dataset reads and fills (None: decode each
            image on every read).
        dtype: dtype of ``img`` and ``prior_img``.
        columns: the record columns each sample carries (default :data:`SAMPLE_COLUMNS`;
            ``source``, ``task``, ``image_paths`` and ``fields`` always): fewer keys, faster
            batches.
    """

    def __init__(self, out: str | os.PathLike, *, split: str | None = "train", tasks=None,
                 sources=None, size: int | None = None,
                 cache_dir: str | os.PathLike | None = None, dtype: torch.dtype = torch.float32,
                 columns=SAMPLE_COLUMNS):
        if split is not None and split not in ("train", "valid"):
            raise RadHarmonyError("split must be 'train', 'valid' or None",
                                  expected="a mixture split", found=repr(split),
                                  fix="pass split='train'")
        if not isinstance(dtype, torch.dtype):
            raise RadHarmonyError("dtype must be a torch.dtype", expected="e.g. torch.float32",
                                  found=repr(dtype), fix="pass dtype=torch.float32")
        self.out = Path(out)
        self.manifest = read_manifest(self.out)
        self.split = split
        unknown = [c for c in columns if c not in RECORD_COLUMNS]
        if unknown or isinstance(columns, str):
            raise RadHarmonyError("MixtureDataset columns must be record columns",
                                  expected=f"a list of {list(RECORD_COLUMNS)}",
                                  found=repr(unknown or columns), fix="pass e.g. "
                                  "columns=('record_id', 'task', 'prompt', 'target')")
        self.columns = tuple(dict.fromkeys([*columns, *_NEEDED]))
        self.records = MixtureColumns(self.out)
        #: the positions of the dataset's records among the mixture's (memory-mapped for a
        #: split; None: all of them)
        self.index = self.records.select(split=split, tasks=tasks, sources=sources) \
            if (split, tasks, sources) != (None, None, None) else None
        self._chosen = {"tasks": tasks, "sources": sources}
        self._keys = (*self.columns, "img", "num_images", "prior_img", "prior_num_images")
        self.images = SourceImages(self.manifest, self.records.sources, size=size,
                                   cache_dir=cache_dir, dtype=dtype)
        self.dtype = dtype

    def __getstate__(self) -> dict:
        """Pickled (a DataLoader worker started by spawn) with a split's memory-mapped rows
        named, not copied: the worker maps them again."""
        state = dict(self.__dict__)
        if isinstance(self.index, np.memmap):
            state["index"] = _SplitRows(self.split)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if isinstance(self.index, _SplitRows):
            self.index = self.records.rows(self.index.split)

    @property
    def size(self) -> int:
        return self.images.pipeline.size

    def __len__(self) -> int:
        return self.records.num_rows if self.index is None else len(self.index)

    @property
    def table(self):
        """The dataset's records as an Arrow table, read from ``records.parquet`` (for looking
        at them; reading samples never needs it)."""
        table = read_records(self.out, split=None, columns=self.columns)
        return table if self.index is None else table.take(np.asarray(self.index))

    def __repr__(self) -> str:
        return (f"MixtureDataset({self.out.name}: {len(self)} records, split={self.split!r}, "
                f"size={self.size})")

    def grouped(self) -> GroupRows:
        """The dataset's records by ``(source, task)`` group, memory-mapped (what the sampler
        draws by rate from: :class:`~radharmony.mixture.column_groups.GroupRows`)."""
        return GroupRows.select(self.records, split=self.split, index=self.index,
                                **self._chosen)

    def __getitem__(self, index):
        """Record ``index`` as a sample; a list (or 1-D array) of indices as their collated
        batch (:meth:`batch`), which is what a sampler yielding batches hands a
        ``DataLoader(batch_size=None)``."""
        if isinstance(index, (list, tuple, range)) or getattr(index, "ndim", 0) >= 1:
            return self.batch(index)
        return self.__getitems__([index])[0]

    def __getitems__(self, indices) -> list[dict]:
        """The records of ``indices`` with every image of the batch read and converted at
        once (``DataLoader(ds, batch_size=B)`` calls this). The batch's columns come out of
        the memory-mapped columns (:class:`~radharmony.mixture.columns.MixtureColumns`)."""
        return self._read(indices, self._samples)

    def batch(self, indices) -> "MixtureBatch":
        """The records of ``indices`` as one collated batch: what
        ``mixture_collate(ds.__getitems__(indices))`` gives, read straight from the columns
        without a sample dict per record (the streaming read:
        ``MixtureSampler(ds, batch_size=B)`` with ``DataLoader(ds, sampler=...,
        batch_size=None, collate_fn=mixture_collate)``)."""
        return self._read(indices, self._collated)

    def _read(self, indices, finish):
        """``finish(cols, imgs, counts, prior_counts, n)`` of the records ``indices``: their
        columns, their images (the records' ``n``, then their priors'; ``counts`` and
        ``prior_counts`` per record)."""
        idx = self._positions(indices)
        cols = self.records.take(idx if self.index is None else self.index[idx],
                                 self.columns)
        fields = [orjson.loads(t) if t else {} for t in cols["fields"]]
        cols["fields"] = fields
        paths = [p or () for p in cols["image_paths"]]
        priors = [f.get("prior_image_paths") or () for f in fields]
        counts, prior_counts = list(map(len, paths)), list(map(len, priors))
        items = [(s, p) for s, ps in zip(cols["source"], paths) for p in ps]
        items += [(s, p) for s, ps in zip(cols["source"], priors) for p in ps]
        return finish(cols, self.images.tensor(items), counts, prior_counts, sum(counts))

    def _collated(self, cols: dict, imgs: torch.Tensor, counts: list, prior_counts: list,
                  n: int) -> "MixtureBatch":
        """The batch of columns ``cols`` and images ``imgs`` (see :meth:`_read`), as
        :func:`mixture_collate` gives it."""
        columns = dict(zip(self._keys, [*(cols[c] for c in self.columns), None, counts,
                                        None, prior_counts]))
        return _gathered(columns, _split_images(imgs, n), into=MixtureBatch)

    def _samples(self, cols: dict, imgs: torch.Tensor, counts: list, prior_counts: list,
                 n: int) -> "_Read":
        """The batch's samples from its columns ``cols`` and its images ``imgs`` (the
        records' ``n`` images, then their prior images; ``counts`` and ``prior_counts`` per
        record), as views of ``imgs`` (the values need not be there yet)."""
        tensors = _split_images(imgs, n)
        rows = {"img": tensors["img"].split(counts),  # no prior (most batches): one empty
                "prior_img": tensors["prior_img"].split(prior_counts) if len(imgs) > n
                else (tensors["prior_img"],) * len(counts)}  # tensor shared, no views made
        values = [cols[c] for c in self.columns]
        values += [rows["img"], counts, rows["prior_img"], prior_counts]
        made = list(zip(*values))  # each sample's values, in key order
        return _Read(handoff.mark_rows(self._keys, made, tensors, rows), made, tensors,
                     dict(zip(self._keys, values)))

    def _positions(self, indices) -> np.ndarray:
        """``indices`` as int64 positions in range (negative ones from the end)."""
        n = len(self)
        try:
            idx = np.asarray(indices, dtype=np.int64)
        except (TypeError, ValueError):
            idx = None
        if idx is None or idx.ndim != 1:
            try:
                idx = np.array([int(i) for i in indices], dtype=np.int64)
            except (TypeError, ValueError):
                raise RadHarmonyError("MixtureDataset reads records by whole-number indices",
                                      expected="a list of record indices",
                                      found=repr(indices)[:80],
                                      fix="a sampler yielding batches (MixtureSampler(ds, "
                                          "batch_size=B)) goes with DataLoader(batch_size=None)"
                                      ) from None
        lo, hi = (idx.min(), idx.max()) if len(idx) else (0, 0)
        if lo < -n or hi >= n:
            bad = idx[(idx < -n) | (idx >= n)][0]
            raise IndexError(f"index {bad} out of range for {n} records")
        return idx if lo >= 0 else np.where(idx < 0, idx + n, idx)


class _SplitRows:
    """A split's memory-mapped rows, as pickled (:meth:`MixtureDataset.__getstate__`)."""

    def __init__(self, split: str):
        self.split = split


class MixtureBatch(dict):
    """A collated batch of mixture records (:meth:`MixtureDataset.batch`), which
    :func:`mixture_collate` hands on as it is. Pickled, it is the plain dict it is."""

    __slots__ = ()

    def __reduce__(self):
        return dict, (dict(self),)


class _Read(list):
    """The samples of one :meth:`MixtureDataset.__getitems__`, a list of them in every use,
    which also keeps what they were made of (each sample's values as made, a tuple in key
    order; their batch tensors; and ``{key: [value per sample]}``) for
    :func:`mixture_collate`. Copied or
    pickled it is the plain list it is."""

    __slots__ = ("samples", "made", "tensors", "columns")

    def __init__(self, samples: list, made: list[tuple], tensors: dict, columns: dict):
        super().__init__(samples)
        self.samples, self.made, self.tensors, self.columns = tuple(samples), made, tensors, \
            columns

    def __reduce__(self):
        return list, (list(self),)


def _untouched(batch) -> dict | None:
    """``mixture_collate(batch)`` straight from the columns of the read that made ``batch``,
    when ``batch`` is that read's samples, in order, each still equal to what it was made
    (its values the same objects, or equal ones; an image tensor, of many values, only
    itself), with its keys in order; None otherwise. The result is what
    :func:`radharmony.collate` gives, without gathering each key's values and looking at
    their types again."""
    if not isinstance(batch, _Read) or not batch or len(batch) != len(batch.samples) or \
            not all(map(is_, batch, batch.samples)):
        return None
    columns = batch.columns
    try:  # value by value: the same object, else == (a tensor's is ambiguous: raises)
        same = all(map(eq, map(tuple, map(dict.values, batch)), batch.made))
    except (RuntimeError, TypeError, ValueError):
        return None
    if not same or list(batch[0]) != list(columns):
        return None
    return _gathered(columns, batch.tensors)


def _split_images(imgs: torch.Tensor, n: int) -> dict:
    """A batch's ``img`` (its records' ``n`` images: the buffer itself when there is no
    prior, a worker's slot handed over as the image level) and ``prior_img`` (the rest)."""
    return {"img": imgs if n == len(imgs) else imgs[:n], "prior_img": imgs[n:]}


def _gathered(columns: dict, tensors: dict, into=dict) -> dict:
    """The collated batch of ``columns`` (key -> one value per record), an ``into``: the
    packed image keys are their batch ``tensors`` (as handed over,
    :func:`handoff.outgoing`), their counts int64 tensors, every other key a list."""
    out = into()
    for key, values in columns.items():
        if key in PACKED_KEYS:  # its rows untouched: the batch tensor (as handoff.whole)
            out[key] = handoff.outgoing(tensors[key])
        elif key in PACKED_KEYS.values():  # as torch.tensor(values) (int64), ~2x faster
            out[key] = torch.from_numpy(np.array(values, np.int64))
        else:
            out[key] = list(values)
    return out


def mixture_collate(batch: list[dict]) -> dict:
    """Collate :class:`MixtureDataset` samples of any mix of tasks: ``img`` and ``prior_img``
    packed (``(sum n, 1, S, S)``; ``num_images`` / ``prior_num_images`` ``(B,)`` say whose),
    every text, list and ``fields`` value as a per-record list. A batch read at once is
    handed over without a copy (and, its samples untouched, without gathering each key's
    values again). A batch already collated (:meth:`MixtureDataset.batch`, through
    ``DataLoader(batch_size=None)``) is returned as it is."""
    if isinstance(batch, MixtureBatch):
        return batch
    if isinstance(batch, dict):
        raise RadHarmonyError("mixture_collate got one sample, not a list of samples",
                              expected="a list of MixtureDataset samples, or a MixtureBatch",
                              found=f"a dict with keys {sorted(batch)[:6]}",
                              fix="with DataLoader(batch_size=None) use a sampler yielding "
                                  "batches: MixtureSampler(ds, batch_size=B)")
    whole = _untouched(batch)
    if whole is not None:
        return whole
    for j, sample in enumerate(batch):
        if not isinstance(sample, dict) or "num_images" not in sample:
            found = sorted(sample) if isinstance(sample, dict) else type(sample).__name__
            raise RadHarmonyError("mixture_collate got a sample that is not a mixture record",
                                  expected="samples of a MixtureDataset (img + num_images)",
                                  found=f"sample {j}: {found}",
                                  fix="use radharmony.collate for other datasets")
    return collate(batch)


__all__ = ["MixtureBatch", "MixtureDataset", "MixtureSampler", "mixture_collate",
           "read_records"]
