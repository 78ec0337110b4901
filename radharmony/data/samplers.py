"""Weighted sampling that balances labels or sources, one epoch at a time, on any number of
ranks.

:class:`BalancedSampler` draws an epoch of indices with probability proportional to per-sample
weights. The draw depends only on ``(seed, epoch)`` -- never on torch's global RNG -- so every
rank computes the same draw and takes its own slice of it: ranks get disjoint, equal-length
parts of one epoch, like ``torch.utils.data.DistributedSampler``. Call ``set_epoch(epoch)``
before each epoch for a fresh draw.

Example (balance the sources of a merged table):

    >>> import pandas as pd
    >>> from radharmony.data.samplers import BalancedSampler
    >>> df = pd.DataFrame({"source": ["nih"] * 8 + ["vindr"] * 2})
    >>> sampler = BalancedSampler.by_column(df, "source", num_samples=1000, seed=0)
    >>> picks = df["source"].iloc[list(sampler)].value_counts()
    >>> bool(400 < picks["vindr"] < 600)
    True

With a dataset: ``DataLoader(ds, sampler=BalancedSampler.by_column(ds.harmonized_df,
"source"), batch_size=64)`` (the table's rows are the dataset's indices).
"""

from __future__ import annotations

import hashlib
import math
from typing import Iterator

import numpy as np
import pandas as pd
import torch

from ..errors import RadHarmonyError

__all__ = ["BalancedSampler", "group_weights", "rarest_label_weights"]


def group_weights(groups, *, power: float = 1.0) -> np.ndarray:
    """Inverse-frequency weights ``count(group) ** -power`` for each sample's group: with
    ``power=1`` every group is drawn equally often in expectation; ``0.5`` softens it;
    missing values (None/NaN) form one group of their own."""
    codes, _ = pd.factorize(pd.Series(list(groups) if not isinstance(groups, pd.Series)
                                      else groups, dtype=object), use_na_sentinel=False)
    counts = np.bincount(codes)
    return counts[codes].astype(np.float64) ** -float(power)


def rarest_label_weights(labels, mask=None, *, power: float = 1.0) -> np.ndarray:
    """Per-sample weights from a multi-label matrix: each sample weighs
    ``count(rarest positive label it carries) ** -power``.

    ``labels`` is ``(N, L)`` with 1 for a positive (values > 0.5 count as positive); ``mask``
    (same shape, bool) marks the entries that are known -- NaN entries are unknown too. A
    sample with no known positive forms the "no finding" group, counted like a label. Taking
    the *rarest* positive (rather than, e.g., the sum over labels) means a sample with a rare
    finding is drawn as often as that finding deserves, whatever common findings it also
    carries, and a sample is never favoured only for carrying many labels.
    """
    y = np.asarray(labels, dtype=np.float64)
    if y.ndim != 2:
        raise RadHarmonyError("by_labels needs a label matrix", expected="shape (N, L)",
                              found=f"shape {y.shape}", fix="pass e.g. ds.harmonized_df"
                              "[list(ds.spec.label_cols)].to_numpy()")
    known = ~np.isnan(y)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != y.shape:
            raise RadHarmonyError("by_labels: mask and labels differ in shape",
                                  expected=f"a bool mask of shape {y.shape}",
                                  found=f"shape {mask.shape}", fix="build both from one table")
        known &= mask
    pos = known & (np.nan_to_num(y) > 0.5)
    counts = pos.sum(axis=0).astype(np.float64)
    none = ~pos.any(axis=1)
    per = np.where(pos, counts[None, :], np.inf).min(axis=1)
    per[none] = max(int(none.sum()), 1)
    return per ** -float(power)


def _mix(seed: int, epoch: int) -> int:
    """A 63-bit generator seed from ``(seed, epoch)``; no two pairs share one by design."""
    digest = hashlib.blake2b(f"radharmony-sampler:{seed}:{epoch}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "little") >> 1


def _distributed(num_replicas, rank) -> tuple[int, int]:
    dist = torch.distributed
    on = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if on else 1
    if rank is None:
        rank = dist.get_rank() if on else 0
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, (int, np.integer)) or \
            num_replicas < 1:
        raise RadHarmonyError("BalancedSampler: num_replicas must be a positive integer",
                              expected="the world size (>= 1)", found=repr(num_replicas),
                              fix="leave num_replicas=None inside torch.distributed")
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or \
            not 0 <= rank < num_replicas:
        raise RadHarmonyError("BalancedSampler: rank is out of range",
                              expected=f"0 <= rank < num_replicas ({num_replicas})",
                              found=repr(rank), fix="leave rank=None inside torch.distributed")
    return int(num_replicas), int(rank)


class BalancedSampler(torch.utils.data.Sampler[int]):
    """Draws indices with probability proportional to ``weights``; deterministic for
    ``(seed, epoch)``; each of ``num_replicas`` ranks yields its own slice.

    Args:
        weights_or_groups: floating-point per-sample weights (non-negative, at least one
            positive), or a per-sample group column of any other dtype (strings, integers,
            categories), which gets inverse-frequency weights (:func:`group_weights`).
        num_samples: indices drawn per epoch over all ranks (default: the number of samples).
        replacement: draw with replacement (default). Without, an epoch is a weighted random
            order of distinct indices (Efraimidis-Spirakis keys) and ``num_samples`` must not
            exceed the samples of positive weight.
        seed: the draw depends only on ``seed`` and the epoch (:meth:`set_epoch`).
        num_replicas, rank: the world size and this rank; default from ``torch.distributed``
            when it is initialized, else 1 and 0.

    Per rank ``len(sampler)`` is ``ceil(num_samples / num_replicas)`` with replacement (the
    draw is extended so every rank gets as many) and ``num_samples // num_replicas`` without
    (the tail is left out, so no index repeats). Rank ``r`` takes every ``num_replicas``-th
    index of the draw starting at ``r``.
    """

    def __init__(self, weights_or_groups, *, num_samples: int | None = None,
                 replacement: bool = True, seed: int = 0, num_replicas: int | None = None,
                 rank: int | None = None):
        values = weights_or_groups
        if isinstance(values, torch.Tensor):
            values = values.detach().cpu().numpy()
        arr = values.to_numpy() if isinstance(values, pd.Series) else values
        if isinstance(arr, np.ndarray) and arr.dtype.kind == "f" or \
                isinstance(arr, (list, tuple)) and arr and \
                all(isinstance(v, float) for v in arr):
            weights = np.asarray(arr, dtype=np.float64)
        else:
            weights = group_weights(values)
        if weights.ndim != 1 or not len(weights):
            raise RadHarmonyError("BalancedSampler needs one weight or group per sample",
                                  expected="a non-empty 1-D sequence",
                                  found=f"shape {weights.shape}",
                                  fix="pass a column of the table, e.g. df['source']")
        if not np.isfinite(weights).all() or (weights < 0).any() or not (weights > 0).any():
            raise RadHarmonyError("BalancedSampler weights are invalid",
                                  expected="finite, non-negative weights, at least one positive",
                                  found=f"min {np.nanmin(weights)}, max {np.nanmax(weights)}, "
                                  f"{int((~np.isfinite(weights)).sum())} not finite",
                                  fix="replace NaN weights, or pass the group column instead")
        self.weights = torch.from_numpy(weights)
        self.replacement = bool(replacement)
        positive = int((weights > 0).sum())
        total = len(weights) if num_samples is None else num_samples
        if isinstance(total, bool) or not isinstance(total, (int, np.integer)) or total < 1:
            raise RadHarmonyError("BalancedSampler: num_samples must be a positive integer",
                                  expected="indices per epoch (>= 1), or None",
                                  found=repr(num_samples), fix="pass num_samples=None")
        if not self.replacement:
            if num_samples is None:
                total = positive
            elif total > positive:
                raise RadHarmonyError("BalancedSampler cannot draw that many distinct indices",
                                      expected=f"num_samples <= {positive} (samples of "
                                      "positive weight) without replacement",
                                      found=f"num_samples={num_samples}",
                                      fix="pass replacement=True or a smaller num_samples")
        self.num_samples = int(total)
        self.seed = int(seed)
        self.epoch = 0
        self.num_replicas, self.rank = _distributed(num_replicas, rank)
        self.per_rank = math.ceil(total / self.num_replicas) if self.replacement else \
            total // self.num_replicas
        if self.per_rank < 1:
            raise RadHarmonyError("BalancedSampler has nothing to give each rank",
                                  expected=f"at least {self.num_replicas} indices per epoch",
                                  found=f"{total}", fix="draw more samples per epoch")

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def by_column(cls, df: pd.DataFrame, column: str, *, power: float = 1.0, **kwargs
                  ) -> "BalancedSampler":
        """Balance the values of ``df[column]`` (e.g. ``"source"`` of a merged table, or a
        single-label column): inverse-frequency weights (:func:`group_weights`)."""
        if column not in getattr(df, "columns", ()):
            raise RadHarmonyError(f"BalancedSampler.by_column: no column {column!r}",
                                  expected="a column of the table",
                                  found=f"columns {list(getattr(df, 'columns', []))[:12]}",
                                  fix="pass one of those names")
        return cls(group_weights(df[column], power=power), **kwargs)

    @classmethod
    def by_labels(cls, labels, mask=None, *, power: float = 1.0, **kwargs) -> "BalancedSampler":
        """Balance a multi-label matrix ``(N, L)``: each sample weighs by the rarest positive
        label it carries (:func:`rarest_label_weights`)."""
        return cls(rarest_label_weights(labels, mask, power=power), **kwargs)

    # -- the sampler ----------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Use the draw of ``epoch`` (call before each epoch, on every rank)."""
        self.epoch = int(epoch)

    def draw(self) -> torch.Tensor:
        """The whole epoch's draw, before it is dealt to the ranks (int64)."""
        g = torch.Generator().manual_seed(_mix(self.seed, self.epoch))
        n = self.per_rank * self.num_replicas
        if self.replacement:  # inverse-CDF sampling: exact, any number of categories
            cdf = torch.cumsum(self.weights, 0)
            u = torch.rand(n, generator=g, dtype=torch.float64) * cdf[-1]
            idx = torch.searchsorted(cdf, u, right=True)
            return idx.clamp_(max=len(cdf) - 1)
        u = torch.rand(len(self.weights), generator=g, dtype=torch.float64)
        keys = torch.where(self.weights > 0, torch.log(u) / self.weights,
                           torch.tensor(-math.inf, dtype=torch.float64))
        return torch.argsort(keys, descending=True, stable=True)[:n]

    def __iter__(self) -> Iterator[int]:
        return iter(self.draw()[self.rank::self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.per_rank

    def __repr__(self) -> str:
        return (f"BalancedSampler({len(self.weights)} samples, {self.num_samples} per epoch, "
                f"replacement={self.replacement}, seed={self.seed}, epoch={self.epoch}, "
                f"rank {self.rank} of {self.num_replicas})")
