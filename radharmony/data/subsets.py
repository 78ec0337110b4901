"""Subsets of a dataset: filters, train/val splits and folds grouped by patient, and the
reference library's table vocabulary -- the subset half of
:class:`~radharmony.data.dataset.BaseRadiologicalDataset` (a mixin)."""

from __future__ import annotations

import copy
import warnings
from typing import Callable

import numpy as np
import pandas as pd

from .splits import assign_folds
from ..errors import RadHarmonyError, RowsDroppedWarning


def filter_mask(mask, table, n: int, *, unit: str, fix: str) -> np.ndarray:
    """``filter()``'s argument as ``n`` booleans: a boolean array or Series, or a callable
    that takes ``table`` and returns one; anything else is refused naming ``unit``."""
    if callable(mask):
        mask = mask(table)
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != (n,):
        raise RadHarmonyError(f"filter() needs one boolean per {unit}",
                              expected=f"a boolean array of length {n}",
                              found=f"dtype {mask.dtype}, shape {mask.shape}", fix=fix)
    return mask


class Subsets:
    """Row subsets of a dataset that share its table, image roots and file table (see
    :class:`~radharmony.data.dataset.BaseRadiologicalDataset`)."""

    def _subset(self, rows: np.ndarray) -> "BaseRadiologicalDataset":
        files, file_rows = self._file_table(), self._file_rows
        new = copy.copy(self)
        new.__dict__.pop("_autopack", None)
        new._set_table(self.harmonized_df.iloc[rows], derived=True)
        new._files, new._file_rows = files, file_rows[rows]  # splits share what reads learn
        return new

    def filter(self, mask) -> "BaseRadiologicalDataset":
        """A dataset of the rows where ``mask`` is True: a boolean array or Series over
        :attr:`harmonized_df`, or a callable that takes the table and returns one. E.g.
        frontal images only: ``ds.filter(ds.harmonized_df["view"].isin(["PA", "AP"]))``.
        Splits and folds of the result still group by patient."""
        return self._subset(np.flatnonzero(filter_mask(
            mask, self.harmonized_df, len(self), unit="row",
            fix="build it from ds.harmonized_df, e.g. ds.harmonized_df['view'] == 'PA'")))

    # -- splits -----------------------------------------------------------------------------
    def get_datasets(self, n_splits: int | None = None, *, seed: int = 0,
                     train_transform: Callable | None = None,
                     val_transform: Callable | None = None):
        """``None``: one dataset with every image. ``n``: ``(train, val)``, with about 1/n of
        the patients in val; deterministic for ``seed``; no patient on both sides.

        ``train_transform`` / ``val_transform``: run on each sample of that side after the
        built-in pipeline and the cache (the cache still holds the unaugmented image), on
        tensors, with fresh randomness on every read (:attr:`sample_transform`). The val side
        gets none unless ``val_transform`` is given; with ``n_splits=None`` the one dataset
        gets ``train_transform``.

            >>> from radharmony.augment import Compose, RandomFlip  # doctest: +SKIP
            >>> train, val = ds.get_datasets(10, train_transform=RandomFlip())  # doctest: +SKIP
        """
        if n_splits is None:
            return self._with_transform(self._subset(np.arange(len(self))), train_transform)
        folds = assign_folds(self.harmonized_df[self.spec.group_col], n_splits, seed=seed)
        return self._fold(folds, 0, train_transform, val_transform)  # fold 0 of get_folds

    def get_folds(self, n_splits: int = 5, *, seed: int = 0,
                  train_transform: Callable | None = None,
                  val_transform: Callable | None = None) -> list[tuple]:
        """``n_splits`` ``(train, val)`` pairs grouped by patient; the val sides cover every
        image exactly once. ``train_transform`` / ``val_transform`` as for
        :meth:`get_datasets`."""
        folds = assign_folds(self.harmonized_df[self.spec.group_col], n_splits, seed=seed)
        return [self._fold(folds, k, train_transform, val_transform) for k in range(n_splits)]

    def _fold(self, folds: np.ndarray, k: int, train_transform, val_transform) -> tuple:
        return (self._with_transform(self._subset(np.flatnonzero(folds != k)), train_transform),
                self._with_transform(self._subset(np.flatnonzero(folds == k)), val_transform))

    # -- the reference library's vocabulary --------------------------------------------------
    def get_harmonized_df(self) -> pd.DataFrame:
        """A writable copy of :attr:`harmonized_df`."""
        return pd.DataFrame(self.harmonized_df).copy()

    def verify_images(self, drop_missing: bool = True) -> pd.DataFrame:
        """The rows whose image file is absent; with ``drop_missing`` (default) they are
        dropped from this dataset, with a :class:`~radharmony.errors.RowsDroppedWarning`."""
        present = np.fromiter((self.image_root(i).joinpath(p).is_file()
                               for i, p in enumerate(self.rows.paths)),
                              dtype=bool, count=len(self))
        missing = pd.DataFrame(self.harmonized_df)[~present].copy()
        if drop_missing and len(missing):
            warnings.warn(f"{type(self).__name__}: dropped {len(missing)} rows with missing "
                          f"images ({int(present.sum())} remaining), first: "
                          f"{missing['image_path'].head(5).tolist()}", RowsDroppedWarning,
                          stacklevel=2)
            self._set_table(pd.DataFrame(self.harmonized_df)[present])
        return missing

    @staticmethod
    def _with_transform(ds: "BaseRadiologicalDataset", transform) -> "BaseRadiologicalDataset":
        if transform is not None and not callable(transform):
            raise RadHarmonyError("A train_transform / val_transform must be callable",
                                  expected="a callable on the sample dict, e.g. "
                                  "radharmony.augment.RandomFlip()", found=repr(transform),
                                  fix="pass a transform instance (or None)")
        ds.sample_transform = transform
        return ds
