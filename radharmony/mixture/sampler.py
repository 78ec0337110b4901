"""The resumable draw of a mixture's records: :class:`MixtureSampler`.

An epoch is one global stream of record indices that depends only on ``(seed, epoch)`` and
the records, never on the number of ranks or DataLoader workers (Mosaic Streaming's "elastic
determinism"): rank ``r`` of ``R`` takes the stream's positions ``r, r + R, r + 2R, ...``.
``state_dict()`` holds the epoch and the global position reached; ``load_state_dict()`` makes
the next iteration start there, so a restarted job reads the very samples the interrupted
one would have read next (on any number of ranks: the rest of the stream is dealt anew).

* ``rates=None``: each epoch is a shuffled order of every record once, so what is read is
  what the build drew (its per-source x task counts).
* ``rates={...}``: each record is drawn (with replacement) with probability so that a group
  gets its share of the stream: keys are source names, ``"source/task"`` strings or
  ``(source, task)`` pairs, values relative shares; a record takes its most specific key,
  and records under no key are not drawn.

The stream is never held whole: the record at any position is computed from the position
(a seeded Feistel permutation of the records without ``rates``; with them, a hashed draw of
a ``(source, task)`` group by its share, then of a record inside it, uniformly, from the
groups' rows the build wrote: :mod:`~radharmony.mixture.column_groups`), so a rank's first
batch of a 15 M-record mixture costs what a batch does, in time and memory. A rank holds no
array of one value per record, with or without ``rates``: the records' rows are the mapped
columns' (``rows.<split>.npy``, ``rows_by_group.npy``), shared by every process on a machine;
only a dataset filtered by ``tasks`` or ``sources`` holds its positions (one ``int64`` per
record it keeps, as :class:`~radharmony.mixture.dataset.MixtureDataset` does).

With a DataLoader that reads ahead (``num_workers > 0``) the sampler has handed out more
indices than the training loop consumed: pass ``consumed=`` (samples this rank took from
the loader this epoch) to :meth:`MixtureSampler.state_dict`.
"""

from __future__ import annotations

import hashlib
import math
from typing import Iterator

import numpy as np
import pandas as pd
import torch

from ..data.samplers import _mix
from ..errors import RadHarmonyError
from .column_groups import GroupRows
from .columns import MixtureColumns

#: indices handed out per block when the sampler yields one at a time
_BLOCK = 4096
#: the stream's algorithm (in the state's digest: a state of another one is refused)
STREAM = "feistel-groups-v3"
_GOLDEN = 0x9E3779B97F4A7C15


def _splitmix(x) -> np.ndarray:
    """SplitMix64's finalizer of each uint64 (wrapping arithmetic): a bijection that mixes
    every bit."""
    with np.errstate(over="ignore"):
        x = np.asarray(x, np.uint64) + np.uint64(_GOLDEN)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _permuted(x: np.ndarray, n: int, keys) -> np.ndarray:
    """A seeded permutation of ``range(n)`` at ``x``: a four-round Feistel network over the
    smallest even number of bits holding ``n``, walked again while a value falls outside
    ``range(n)`` (so it is a bijection of ``range(n)``); ``keys`` (uint64, one or one per
    value) choose the permutation. Any positions, in O(len(x)) memory."""
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask, shift = np.uint64((1 << half) - 1), np.uint64(half)
    keys = np.broadcast_to(np.asarray(keys, np.uint64), np.shape(x))
    out = np.asarray(x, np.int64).astype(np.uint64)
    todo = np.ones(len(out), bool)
    while todo.any():
        v, k = out[todo], keys[todo]
        left, right = v >> shift, v & mask
        for round_ in range(4):
            with np.errstate(over="ignore"):
                mixed = _splitmix(right ^ (k + np.uint64(round_) * np.uint64(_GOLDEN)))
            left, right = right, left ^ (mixed & mask)
        out[todo] = (left << shift) | right
        todo = out >= np.uint64(n)
    return out.astype(np.int64)


def _uniform(pos: np.ndarray, key: int) -> np.ndarray:
    """A uniform float in [0, 1) for each stream position (53 bits of a hash of it)."""
    with np.errstate(over="ignore"):
        bits = _splitmix(pos.astype(np.uint64) * np.uint64(_GOLDEN) ^ np.uint64(key))
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53

STATE_FORMAT = "radharmony-mixture-sampler"


def _check_int(name: str, value, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise RadHarmonyError(f"MixtureSampler: {name} must be an integer >= {low}",
                              expected=f"{name} >= {low}", found=repr(value),
                              fix=f"pass a whole number for {name}")
    return int(value)


def record_weights(sources, tasks, rates: dict) -> np.ndarray:
    """Per-record draw weights giving each key of ``rates`` its share (see the module doc);
    ``sources`` and ``tasks``: each record's names."""
    s_codes, s_names = pd.factorize(np.asarray(sources, object), use_na_sentinel=False)
    t_codes, t_names = pd.factorize(np.asarray(tasks, object), use_na_sentinel=False)
    return coded_weights(s_codes, np.asarray(s_names, object), t_codes,
                         np.asarray(t_names, object), rates)


def coded_weights(s_codes, s_names, t_codes, t_names, rates: dict) -> np.ndarray:
    """:func:`record_weights` of records given as codes into ``s_names`` / ``t_names`` (a
    code of -1: the last name, None): each (source, task) group weighed once
    (:func:`group_weights`), counted with ``bincount``, no object per record."""
    width = len(t_names)
    combined = (np.asarray(s_codes).astype(np.int64) % len(s_names)) * width + \
        np.asarray(t_codes).astype(np.int64) % width
    sizes = np.bincount(combined, minlength=len(s_names) * width)
    present = np.flatnonzero(sizes)
    groups = [(s_names[g // width], t_names[g % width]) for g in present.tolist()]
    table = np.zeros(len(sizes))
    table[present] = group_weights(groups, sizes[present].tolist(), rates)
    return table[combined]


def group_weights(groups: list, sizes: list, rates: dict) -> np.ndarray:
    """The draw weight of each record of each group (``groups``: ``(source, task)`` pairs,
    a pair may come again; ``sizes``: their records) that gives each key of ``rates`` its
    share (see the module doc): a group's records share its key's rate equally."""
    keys = {}
    for key, rate in rates.items():
        if isinstance(key, tuple) and len(key) == 2:
            norm = (str(key[0]), str(key[1]))
        elif isinstance(key, str):
            norm = tuple(key.split("/", 1)) if "/" in key else key
        else:
            norm = None
        if norm is None or isinstance(rate, bool) or not isinstance(rate, (int, float)) or \
                not math.isfinite(rate) or rate < 0:
            raise RadHarmonyError(f"MixtureSampler: the rate {key!r}: {rate!r} is not usable",
                                  expected="source, 'source/task' or (source, task) -> a "
                                  "finite share >= 0", found=f"{key!r}: {rate!r}",
                                  fix="pass e.g. rates={'mimic_cxr_jpg': 2, "
                                      "'rexgradient_train/report_findings': 1}")
        keys[norm] = float(rate)
    which = [(s, t) if (s, t) in keys else s if s in keys else None for s, t in groups]
    held = set(which)
    unknown = [k for k in keys if k not in held]
    if unknown:
        names = sorted({f"{s}/{t}" for s, t in groups})
        raise RadHarmonyError(f"MixtureSampler: rates name {unknown[0]!r}, which no record of "
                              "the dataset has", expected=f"sources or source/task of {names}",
                              found=repr(unknown), fix="rate groups the mixture holds")
    count: dict = {}
    for k, n in zip(which, sizes):
        count[k] = count.get(k, 0) + n
    total = sum(keys.values())
    if not total > 0:
        raise RadHarmonyError("MixtureSampler: every rate is 0", expected="a positive share",
                              found=repr(rates), fix="give at least one group a share > 0")
    return np.array([0.0 if k is None else keys[k] / total / count[k] for k in which])


class MixtureSampler(torch.utils.data.Sampler[int]):
    """Draws a mixture's records by rate, one rank's share, resumable (see the module doc).

    Args:
        dataset_or_out: a :class:`~radharmony.mixture.dataset.MixtureDataset`, or a mixture
            folder (then ``split``, ``tasks``, ``sources`` choose the records as the dataset
            would; the images are not opened).
        rates: None (every record once per epoch, shuffled) or shares per group.
        num_samples: draws per epoch over all ranks (default: the number of records).
        seed: the stream depends only on ``seed``, the epoch and the records.
        num_replicas, rank: the world size and this rank (default from ``torch.distributed``
            when initialized, else 1 and 0).
        drop_last: leave out the stream's tail that does not fill every rank (default: wrap
            around to the stream's start so each rank gets as many).
        batch_size: None (one index at a time) or B: this rank's share in lists of B indices
            (the last one shorter), each read as one collated batch by
            ``DataLoader(dataset, sampler=..., batch_size=None, collate_fn=mixture_collate)``
            (:meth:`~radharmony.mixture.dataset.MixtureDataset.batch`: no sample dict per
            record). The stream is the same either way.
    """

    def __init__(self, dataset_or_out, *, rates: dict | None = None,
                 num_samples: int | None = None, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None,
                 drop_last: bool = False, batch_size: int | None = None,
                 split: str | None = "train", tasks=None, sources=None):
        if rates is not None and not isinstance(rates, dict):
            raise RadHarmonyError("MixtureSampler: rates must be a dict or None",
                                  expected="{group: share}", found=type(rates).__name__,
                                  fix="pass rates=None for the drawn counts")
        if hasattr(dataset_or_out, "grouped"):
            n, grouped = len(dataset_or_out), dataset_or_out.grouped
        else:
            columns = MixtureColumns(dataset_or_out)
            rows = None if (split, tasks, sources) == (None, None, None) else \
                columns.select(split=split, tasks=tasks, sources=sources)
            n = columns.num_rows if rows is None else len(rows)

            def grouped():
                return GroupRows.select(columns, split=split, tasks=tasks, sources=sources,
                                        index=rows)
        if not n:
            raise RadHarmonyError("MixtureSampler has no records to draw",
                                  expected="a mixture split with records", found="0 records",
                                  fix="check split=, tasks= and sources=")
        #: the records by group (:class:`~radharmony.mixture.column_groups.GroupRows`), read
        #: only to draw by rate (without rates: only the records' number), and each group's
        #: share of the draw
        self.groups = None if rates is None else _whole(grouped(), n)
        self.shares = None if rates is None else self.groups.sizes * group_weights(
            [s[:2] for s in self.groups.segments], self.groups.sizes.tolist(), rates)
        self.num_records = n
        self.num_samples = n if num_samples is None else \
            _check_int("num_samples", num_samples, low=1)
        self.seed = _check_int("seed", seed, low=0)
        dist = torch.distributed
        on = dist.is_available() and dist.is_initialized()
        self.num_replicas = _check_int("num_replicas", num_replicas if num_replicas is not None
                                       else dist.get_world_size() if on else 1, low=1)
        self.rank = _check_int("rank", rank if rank is not None else
                               dist.get_rank() if on else 0, low=0)
        if self.rank >= self.num_replicas:
            raise RadHarmonyError("MixtureSampler: rank is out of range",
                                  expected=f"0 <= rank < num_replicas ({self.num_replicas})",
                                  found=repr(rank), fix="leave rank=None inside torch.distributed")
        self.drop_last = bool(drop_last)
        self.batch_size = None if batch_size is None else \
            _check_int("batch_size", batch_size, low=1)
        self.epoch = 0
        self.position = 0   # the global stream position the next iteration starts at
        self._start = 0     # ... and the one the running (or last) iteration started at
        self._yielded = 0   # this rank's samples handed out by that iteration
        h = hashlib.sha256(f"{STREAM}:{n}:{self.num_samples}".encode())
        if self.shares is not None:
            h.update(repr([s[:2] for s in self.groups.segments]).encode())
            h.update(self.groups.sizes.tobytes() + self.shares.tobytes())
        self.digest = h.hexdigest()[:16]
        self._cdf = None if self.shares is None else np.cumsum(self.shares)
        #: the last group drawn from (a draw rounded up to the total falls in it)
        self._last = None if self.shares is None else int(np.flatnonzero(self.shares)[-1])

    # -- the stream ----------------------------------------------------------------------------
    def at(self, positions, epoch: int | None = None) -> np.ndarray:
        """The record indices at global stream ``positions`` (int64) of ``epoch`` (default:
        this one), computed for those positions alone (:func:`_permuted`; with rates a
        group by :func:`_uniform` on the groups' cumulative shares, then the record of a
        second uniform inside it): no rank holds the whole stream."""
        pos = np.asarray(positions, np.int64)
        key = _mix(self.seed, self.epoch if epoch is None else int(epoch))
        if self._cdf is None:
            rep, offset = np.divmod(pos, self.num_records)
            return _permuted(offset, self.num_records, _splitmix(
                np.uint64(key) ^ (rep.astype(np.uint64) * np.uint64(_GOLDEN))))
        u = _uniform(pos, key) * self._cdf[-1]
        g = np.minimum(np.searchsorted(self._cdf, u, side="right"), self._last)
        sizes = self.groups.sizes[g]
        inner = np.minimum((_uniform(pos, int(_splitmix(key))) * sizes).astype(np.int64),
                           sizes - 1)
        return self.groups.positions(self.groups.rows[self.groups.starts[g] + inner])

    def stream(self, epoch: int | None = None) -> torch.Tensor:
        """The whole epoch's global stream of record indices (int64), before it is dealt
        (every record once per ``num_records`` positions, in a seeded order, without
        ``rates``; drawn by rate with them)."""
        return torch.from_numpy(self.at(np.arange(self.num_samples), epoch))

    def _mine(self) -> int:
        """This rank's samples from :attr:`position` on: the rest of the stream cut
        (``drop_last``) or padded from its start to a multiple of the ranks, dealt."""
        rest, r = self.num_samples - self.position, self.num_replicas
        return rest // r if self.drop_last else -(-rest // r)

    def __iter__(self) -> Iterator[int] | Iterator[list[int]]:
        self._start, self._yielded = self.position, 0
        mine, r, block = self._mine(), self.num_replicas, self.batch_size or _BLOCK
        first = self.position + self.rank
        for start in range(0, mine, block):
            j = np.arange(start, min(start + block, mine), dtype=np.int64)
            values = self.at((first + j * r) % self.num_samples).tolist()
            if self.batch_size is None:
                for index in values:
                    self._yielded += 1
                    yield index
            else:
                self._yielded += len(values)
                yield values
        self.position = 0  # a whole pass: iterating again starts the epoch over

    def __len__(self) -> int:
        """This rank's indices this epoch (with ``batch_size``: its batches), counted without
        drawing the stream."""
        n = self._mine()
        return n if self.batch_size is None else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s stream (call before each epoch, on every rank); the epoch a state
        was loaded at keeps its position."""
        epoch = _check_int("epoch", epoch, low=0)
        if epoch != self.epoch:
            self.epoch = epoch
            self.position = self._start = self._yielded = 0

    # -- resuming ------------------------------------------------------------------------------
    def state_dict(self, consumed: int | None = None) -> dict:
        """Where this rank is: ``epoch`` and the global ``position`` the next sample comes from.
        ``consumed``: samples this rank has taken from its loader this epoch (needed when the
        loader reads ahead, ``num_workers > 0``); default: the samples handed out. Samples, not
        batches, whatever ``batch_size``: a state resumes on any batch size. A state
        taken at an epoch's end resumes at its end: call ``set_epoch(epoch + 1)`` next."""
        taken = self._yielded if consumed is None else _check_int("consumed", consumed, low=0)
        return {"format": STATE_FORMAT, "epoch": self.epoch, "seed": self.seed,
                "position": min(self._start + taken * self.num_replicas, self.num_samples),
                "num_samples": self.num_samples, "digest": self.digest}

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (:meth:`state_dict` of this mixture and rates, any ranks)."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise RadHarmonyError("MixtureSampler.load_state_dict got no sampler state",
                                  expected=f"a dict with format {STATE_FORMAT!r}",
                                  found=repr(state)[:80], fix="pass sampler.state_dict()")
        mine = {"seed": self.seed, "num_samples": self.num_samples, "digest": self.digest}
        other = {k: state.get(k) for k in mine}
        if other != mine:
            raise RadHarmonyError("MixtureSampler.load_state_dict: the state belongs to another "
                                  "draw", expected=f"{mine} (records, rates, seed, num_samples)",
                                  found=repr(other), fix="build the sampler with the seed, "
                                  "rates and records of the run being resumed")
        self.epoch = _check_int("epoch", state.get("epoch"), low=0)
        position = _check_int("position", state.get("position"), low=0)
        self.position = self._start = min(position, self.num_samples)
        self._yielded = 0

    def __repr__(self) -> str:
        return (f"MixtureSampler({self.num_records} records, {self.num_samples} per epoch, "
                f"rates={'drawn' if self.shares is None else 'given'}, seed={self.seed}, "
                f"epoch={self.epoch}, rank {self.rank} of {self.num_replicas}"
                f"{'' if self.batch_size is None else f', batches of {self.batch_size}'})")


def _whole(groups: GroupRows, n: int) -> GroupRows:
    """``groups``, checked to hold the ``n`` records drawn from."""
    held = int(groups.sizes.sum())
    if held != n:
        raise RadHarmonyError("MixtureSampler: the mixture's rows by group do not hold the "
                              "dataset's records", expected=f"{n} records in its groups",
                              found=f"{held}", fix="write the columns again: radharmony."
                              "mixture.column_writer.write_columns(OUT)")
    return groups


__all__ = ["MixtureSampler", "STREAM", "coded_weights", "group_weights", "record_weights"]
