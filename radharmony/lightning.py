"""A Lightning ``LightningDataModule`` over any radharmony dataset, merge or registry key.

Needs Lightning: ``pip install radharmony[lightning]`` (``pytorch_lightning``); the standalone
``lightning`` package (``lightning.pytorch``) works as well, whichever is installed.

    >>> from radharmony.lightning import RadHarmonyDataModule  # doctest: +SKIP
    >>> dm = RadHarmonyDataModule("nih_cxr14", root="/data/NIH/images", fold=0,
    ...                           batch_size=64, num_workers=4, output_cls=True)  # doctest: +SKIP
    >>> trainer.fit(model, datamodule=dm)  # doctest: +SKIP

Splits are radharmony's: fold ``fold`` of ``get_folds(n_splits, seed=seed)``, grouped by
patient and the same on every rank. Under DDP each rank reads a disjoint part of every epoch:
without ``balance`` Lightning deals the shuffled training set with its ``DistributedSampler``;
with ``balance`` a :class:`~radharmony.data.samplers.BalancedSampler` draws the epoch from
``(seed, epoch)`` and every rank takes its own slice (Lightning calls its ``set_epoch``).
"""

from __future__ import annotations

import importlib
from typing import Callable, Sequence

from torch.utils.data import DataLoader, DistributedSampler

from .data.collate import collate
from .errors import RadHarmonyError


def _lightning():
    """``pytorch_lightning`` or ``lightning.pytorch``, whichever is installed."""
    for name in ("pytorch_lightning", "lightning.pytorch"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise RadHarmonyError("radharmony.lightning needs Lightning",
                          expected="pytorch_lightning or lightning importable",
                          found="neither is installed",
                          fix="pip install 'radharmony[lightning]' (or pip install lightning)")


pl = _lightning()


class _Dealt(DistributedSampler):
    """A :class:`BalancedSampler` already dealt by rank, shown to Lightning as a
    ``DistributedSampler`` so that it is not dealt a second time and gets ``set_epoch``."""

    def __init__(self, sampler):  # noqa: D107 -- no DistributedSampler state is needed
        self.sampler = sampler
        self.num_replicas, self.rank = sampler.num_replicas, sampler.rank
        self.epoch, self.seed, self.shuffle, self.drop_last = 0, sampler.seed, True, False

    def __iter__(self):
        return iter(self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.sampler.set_epoch(epoch)


class RadHarmonyDataModule(pl.LightningDataModule):
    """Train / val / test ``DataLoader`` s of one radharmony dataset.

    Args:
        source: a registry key (``"nih_cxr14"``, with ``root``), a dataset, a merged dataset
            (:func:`radharmony.merge`) or a list of datasets (merged here).
        root: the dataset's ``base_image_dir`` when ``source`` is a key.
        fold: which fold of ``get_folds(n_splits)`` is validation (0 .. n_splits - 1).
        n_splits: folds; about 1/n of the patients are in validation.
        batch_size, num_workers, pin_memory: as for ``DataLoader``.
        train_transform: run on each training sample after the built-in pipeline and cache
            (e.g. :mod:`radharmony.augment`); validation and test get none.
        level: ``"image"`` or ``"study"``: passed to the dataset class when ``source`` is a key.
        test: the test dataset, or a key read from ``root`` (e.g. ``"chexpert_valid"``); None:
            ``test_dataloader`` raises.
        balance: a column of the table to balance in training (``"source"`` of a merge) with a
            :class:`~radharmony.data.samplers.BalancedSampler`; None: shuffle.
        seed: the folds' and the balanced draw's seed.
        **dataset_kwargs: passed to the dataset class with a key (``output_cls=True``,
            ``cache_dir=``, ...).
    """

    def __init__(self, source, *, root=None, fold: int = 0, n_splits: int = 5,
                 batch_size: int = 32, num_workers: int = 0, pin_memory: bool = False,
                 train_transform: Callable | None = None, level: str = "image",
                 test=None, balance: str | None = None, seed: int = 0,
                 collate_fn: Callable = collate, **dataset_kwargs):
        super().__init__()
        if level not in ("image", "study"):
            raise RadHarmonyError("RadHarmonyDataModule: unknown level", expected="'image' or "
                                  "'study'", found=repr(level), fix="pass level='image'")
        if not (isinstance(fold, int) and isinstance(n_splits, int) and 0 <= fold < n_splits):
            raise RadHarmonyError("RadHarmonyDataModule: fold is out of range",
                                  expected=f"0 <= fold < n_splits ({n_splits})",
                                  found=f"fold={fold!r}", fix="pass fold=0")
        self.source, self.root, self.fold, self.n_splits = source, root, fold, n_splits
        self.batch_size, self.num_workers, self.pin_memory = batch_size, num_workers, pin_memory
        self.train_transform, self.level, self.test, self.balance = (
            train_transform, level, test, balance)
        self.seed, self.collate_fn, self.dataset_kwargs = seed, collate_fn, dataset_kwargs
        self.dataset = self.train_ds = self.val_ds = self.test_ds = None

    # -- datasets ---------------------------------------------------------------------------
    def _build(self, source):
        if isinstance(source, str):
            from .registry import get_dataset_class

            cls = get_dataset_class(source)
            if self.root is None:
                raise RadHarmonyError(f"RadHarmonyDataModule({source!r}) needs root=",
                                      expected="the dataset's image folder (base_image_dir)",
                                      found="root=None",
                                      fix=f"RadHarmonyDataModule({source!r}, root='/data/...')")
            level = {} if self.level == "image" else {"level": self.level}
            return cls(self.root, **level, **self.dataset_kwargs)
        if isinstance(source, Sequence):
            from .combine import merge

            return merge(list(source))
        if not hasattr(source, "get_folds"):
            raise RadHarmonyError("RadHarmonyDataModule: source is not a dataset",
                                  expected="a registry key, a radharmony dataset, a merge or "
                                  "a list of datasets", found=type(source).__name__,
                                  fix="pass e.g. 'nih_cxr14' with root=, or a dataset")
        return source

    def setup(self, stage: str | None = None) -> None:
        """Build the dataset once and take fold ``fold`` (the same split on every rank)."""
        if self.dataset is None:
            self.dataset = self._build(self.source)
            folds = self.dataset.get_folds(self.n_splits, seed=self.seed,
                                           train_transform=self.train_transform)
            self.train_ds, self.val_ds = folds[self.fold]
        if stage in (None, "test") and self.test is not None and self.test_ds is None:
            self.test_ds = self._build(self.test)

    # -- loaders ----------------------------------------------------------------------------
    def _loader(self, ds, *, shuffle: bool, sampler=None) -> DataLoader:
        return DataLoader(ds, batch_size=self.batch_size, shuffle=shuffle and sampler is None,
                          sampler=sampler, num_workers=self.num_workers,
                          pin_memory=self.pin_memory, collate_fn=self.collate_fn,
                          persistent_workers=self.num_workers > 0)

    def _world(self) -> tuple[int, int]:
        trainer = self.trainer
        if trainer is None:
            return 1, 0
        return int(getattr(trainer, "world_size", 1)), int(getattr(trainer, "global_rank", 0))

    def train_dataloader(self) -> DataLoader:
        self.setup("fit")
        if self.balance is None:
            return self._loader(self.train_ds, shuffle=True)
        from .data.samplers import BalancedSampler

        world, rank = self._world()
        sampler = BalancedSampler.by_column(self.train_ds.harmonized_df, self.balance,
                                            seed=self.seed, num_replicas=world, rank=rank)
        return self._loader(self.train_ds, shuffle=False, sampler=_Dealt(sampler))

    def val_dataloader(self) -> DataLoader:
        self.setup("validate")
        return self._loader(self.val_ds, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        self.setup("test")
        if self.test_ds is None:
            raise RadHarmonyError("RadHarmonyDataModule has no test set",
                                  expected="test= (a dataset or a key read from root)",
                                  found="test=None", fix="RadHarmonyDataModule(..., "
                                  "test='chexpert_valid') or test=<dataset>")
        return self._loader(self.test_ds, shuffle=False)


__all__ = ["RadHarmonyDataModule"]
