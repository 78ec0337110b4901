"""The dataset: a validated table + image roots -> PyTorch samples, splits and folds.

:class:`BaseRadiologicalDataset` is generic over its table: a dataset module's split class only
names its harmonizer (``harmonizer_class``), and the same class serves a table built elsewhere
(``harmonized_df=`` with ``spec=``), including one spanning several source datasets whose rows
carry their own image root (``spec.root_col`` + ``image_roots``). Samples are assembled in one
place (:mod:`radharmony.data.sampling`) for ``__getitem__`` and batched readers; pre-caching
lives in :mod:`radharmony.data.precache`, splits in :mod:`radharmony.data.splits`.
"""

from __future__ import annotations

import copy
import os
import warnings
from itertools import repeat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Mapping

import numpy as np
import pandas as pd
import torch

from ..annotations.boxes import BoxSelection
from ..annotations.demographics import table_demographics
from . import batches, precache, sampling
from .filetable import FileTable
from .checks import drop_missing
from .splits import assign_folds
from ..errors import (ImageReadError, PathSafetyError, RadHarmonyError, RowsDroppedWarning,
                      UnsupportedOutputWarning, check_choice)
from ..imaging.cache import ImageCache
from ..imaging import png
from ..imaging.convert import accelerated
from ..imaging.geometry import Letterbox
from ..imaging.pipeline import DefaultTransform
from ..spec import DERIVED_COLUMNS, DatasetSpec
from ..table.frozen import FrozenFrame
from ..table.harmonizer import BaseHarmonizer, spec_columns
from ..table.schema import canonical_views, sample_ids, validate


@dataclass(frozen=True)
class TableRows:
    """The table's columns a sample reads, as arrays (built once per table)."""

    ids: np.ndarray
    paths: np.ndarray
    reports: np.ndarray
    labels: np.ndarray | None
    boxes: np.ndarray | None
    roots: np.ndarray | None  # per-row image root when the table spans several roots

    @classmethod
    def of(cls, df: pd.DataFrame, spec: DatasetSpec, image_roots) -> "TableRows":
        roots = None
        if spec.root_col is not None:
            roots = np.array([image_roots[k] for k in df[spec.root_col]], dtype=object)
        return cls(ids=df["sample_id"].to_numpy(dtype=object),
                   paths=df["image_path"].to_numpy(dtype=object),
                   reports=df["report"].to_numpy(dtype=object),
                   labels=df[list(spec.label_cols)].to_numpy(np.float32)
                   if spec.label_cols else None,
                   boxes=df["boxes"].to_numpy(dtype=object) if "boxes" in df.columns else None,
                   roots=roots)


class BaseRadiologicalDataset(torch.utils.data.Dataset):
    """Samples of one dataset split as dicts: ``img`` (1, 224, 224) in [-1, 1], ``sample_id``
    and the requested outputs.

    Args:
        base_image_dir: root that the table's ``image_path`` values are relative to.
        csv_path: the dataset's metadata file; auto-discovered when omitted.
        output_cls, output_mask, output_report, output_bbox: add ``cls``, ``mask``,
            ``report``, ``bbox``. A flag the dataset cannot provide warns and adds nothing.
        bbox_annotator, bbox_merge_iou: which boxes ``bbox`` holds when several annotators
            boxed an image (see :class:`radharmony.annotations.boxes.BoxSelection`): all
            (default), one annotator (``"first"`` per image, or an id), or merged across
            annotators by IoU.
        transform: None for the built-in pipeline (:class:`DefaultTransform`; pass an instance
            to change its size or percentiles), or any callable on the sample dict (e.g. a
            MONAI ``Compose`` of dictionary transforms) which then receives ``img`` as the
            image's path and replaces the built-in pipeline.
        cache_dir: where preprocessed images are cached (built-in pipeline only); None
            disables caching.
        cache_key: how cache entries are keyed: ``"identity"`` (default: the file's resolved
            path, size, modification and change time, inode -- one ``stat``) or ``"content"``
            (a hash of the file's bytes: survives anything that keeps size and timestamps,
            shared by copies at other paths, costs a full read of the file per key).
        dtype: dtype of ``img``.
        harmonized_df, harmonizer_path, harmonizer: where the table comes from, in that order
            of precedence; when all are None the dataset's harmonizer runs.
        on_missing: ``"raise"`` (default): a row whose image file is absent raises when its
            sample is read; ``"drop"``: such rows are dropped when the dataset is built, with a
            warning giving their count and first paths.
        spec: the table's :class:`~radharmony.spec.DatasetSpec` (default: the class's, from
            its harmonizer); a table built elsewhere passes its own.
        image_roots: with ``spec.root_col``, the image root of each value of that column.
        level, max_images, view_order, prior: ``level="study"`` gives study samples (every
            view of a study, report sections, optionally the prior study): see
            :mod:`radharmony.studies`.
    """

    harmonizer_class: ClassVar[type[BaseHarmonizer] | None] = None
    spec: DatasetSpec  # the class default comes from harmonizer_class; instances may differ
    #: the reference library's names: label columns in ``cls`` order, extra columns
    LABEL_COLS: ClassVar[list[str]] = []
    EXTRA_OUTPUT_COLS: ClassVar[list[str]] = []

    #: a callable run on every sample dict after the built-in pipeline and the cache (tensors
    #: in, tensors out; e.g. :mod:`radharmony.augment` or MONAI dictionary transforms); set
    #: per split by :meth:`get_datasets` / :meth:`get_folds` (``train_transform=``)
    sample_transform: Callable | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("harmonizer_class") is not None:
            cls.spec = cls.harmonizer_class.spec
            cls.LABEL_COLS, cls.EXTRA_OUTPUT_COLS = spec_columns(cls.spec)

    def __new__(cls, *args, level: str = "image", max_images: int | None = None,
                view_order=None, prior: bool = False, **kwargs):
        """``level="study"`` returns a :class:`radharmony.data.studies.StudyDataset` over this
        dataset (``max_images``, ``view_order``, ``prior``: see there)."""
        if level == "image" and max_images is None and view_order is None and not prior:
            return super().__new__(cls)
        from .studies import study_dataset

        return study_dataset(cls, args, kwargs, level=level, max_images=max_images,
                             view_order=view_order, prior=prior) or super().__new__(cls)

    def __init__(self, base_image_dir: str | os.PathLike | None,
                 csv_path: str | os.PathLike | None = None,
                 *, output_cls: bool = False, output_mask: bool = False,
                 output_report: bool = False, output_bbox: bool = False,
                 bbox_annotator: str | None = None, bbox_merge_iou: float | None = None,
                 transform: Callable | None = None, cache_dir: str | os.PathLike | None = "./cache",
                 dtype: torch.dtype = torch.bfloat16, harmonized_df: pd.DataFrame | None = None,
                 harmonizer: BaseHarmonizer | None = None,
                 harmonizer_path: str | os.PathLike | None = None, on_missing: str = "raise",
                 spec: DatasetSpec | None = None,
                 image_roots: Mapping[str, str | os.PathLike] | None = None,
                 cache_key: str = "identity", level: str = "image",
                 max_images: int | None = None, view_order=None, prior: bool = False):
        del level, max_images, view_order, prior  # study level: see __new__
        self.spec = spec if spec is not None else type(self).spec
        if base_image_dir is None and harmonizer_path is not None and harmonized_df is None \
                and self.harmonizer_class is not None:  # the image root saved with the table
            harmonizer, harmonizer_path = self.harmonizer_class.load(harmonizer_path), None
            base_image_dir = harmonizer.base_image_dir
        if base_image_dir is None and not (self.spec.root_col and image_roots):
            raise RadHarmonyError(f"{type(self).__name__} needs base_image_dir",
                                  expected="the folder the images are under", found="None",
                                  fix="pass base_image_dir='/data/.../'")
        if not isinstance(dtype, torch.dtype):
            raise RadHarmonyError("dtype must be a torch.dtype", expected="e.g. torch.float32",
                                  found=repr(dtype), fix="pass dtype=torch.float32")
        self.on_missing = check_choice("on_missing", on_missing, ("raise", "drop"))
        self.base_image_dir = None if base_image_dir is None else Path(base_image_dir)
        self.image_roots = {k: Path(v) for k, v in (image_roots or {}).items()}
        self.csv_path = csv_path
        self.dtype = dtype
        self.box_selection = BoxSelection(annotator=bbox_annotator, merge_iou=bbox_merge_iou)
        self.outputs = self._supported_outputs(cls=output_cls, mask=output_mask,
                                               report=output_report, bbox=output_bbox)
        self.user_transform = None if isinstance(transform, DefaultTransform) else transform
        self.pipeline = transform if isinstance(transform, DefaultTransform) \
            else DefaultTransform()
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.image_cache = None
        if self.cache_dir is not None and self.user_transform is None:
            self.image_cache = ImageCache(self.cache_dir, self.pipeline.params(), key=cache_key)
        self.harmonizer = self._table_source(harmonized_df, harmonizer_path, harmonizer)
        df = self.harmonizer.harmonize(cache_dir=self.cache_dir) if harmonized_df is None else \
            validate(harmonized_df, self.spec, source="harmonized_df")
        if on_missing == "drop":
            df = drop_missing(df, self.base_image_dir, owner=type(self).__name__)
        self._set_table(df)
        self._load_kernels(df)
        if "bbox" in self.outputs and self.rows.boxes is None:
            warnings.warn(f"{type(self).__name__}: output_bbox=True but its table has no "
                          "'boxes' column (the dataset's box file was not found); samples will "
                          "have no 'bbox' key.", UnsupportedOutputWarning, stacklevel=2)
            self.outputs = self.outputs - {"bbox"}

    def _load_kernels(self, df: pd.DataFrame) -> None:
        """Load the compiled kernels this dataset's reads will use (each once per process)
        now, so forked DataLoader workers inherit them: the conversion of cached 8-bit
        batches, and the PNG decoder when the table's images are PNGs."""
        if self.image_cache is not None and self.pipeline.bits == 8:
            accelerated(self.dtype)
        paths = df["image_path"].tolist()  # any PNG (stops at the first: instant for PNG sets)
        if any(map(str.endswith, map(str, paths), repeat((".png", ".PNG")))):
            png.accelerated()

    @property
    def default_transform(self) -> DefaultTransform:
        """The built-in pipeline's parameters (also when a user transform replaces it)."""
        return self.pipeline

    # -- construction ---------------------------------------------------------------------------
    def _supported_outputs(self, **flags: bool) -> frozenset[str]:
        on = set()
        for name, wanted in flags.items():
            if not wanted:
                continue
            if name in self.spec.outputs:
                on.add(name)
            else:
                warnings.warn(f"{type(self).__name__} does not support output_{name}=True "
                              f"(supported: {sorted(self.spec.outputs) or 'none'}); samples "
                              f"will have no {name!r} key.", UnsupportedOutputWarning,
                              stacklevel=3)
        return frozenset(on)

    def _table_source(self, harmonized_df, harmonizer_path, harmonizer) -> BaseHarmonizer | None:
        key, cls = self.spec.key, self.harmonizer_class
        if harmonized_df is not None or harmonizer_path is None and harmonizer is None:
            if cls is None:
                if harmonized_df is None:
                    raise RadHarmonyError(f"{type(self).__name__} has no harmonizer",
                                          expected="a table: harmonized_df=",
                                          found="no harmonized_df, harmonizer or "
                                          "harmonizer_path", fix="pass harmonized_df=table")
                return None
            return cls(csv_path=self.csv_path, base_image_dir=self.base_image_dir)
        h = cls.load(harmonizer_path) if harmonizer_path is not None else harmonizer
        if not isinstance(h, BaseHarmonizer) or h.spec.key != key:
            found = h.spec.key if isinstance(h, BaseHarmonizer) else type(h).__name__
            raise RadHarmonyError(f"{type(self).__name__} got a harmonizer for another dataset",
                                  expected=f"a harmonizer for {key!r}", found=repr(found),
                                  fix=f"use {cls.__name__ if cls else 'the matching one'}")
        return h

    def _set_table(self, df: pd.DataFrame, *, derived: bool = False) -> None:
        """Make ``df`` the table behind the samples. ``derived``: ``df`` is rows of this
        dataset's own table, whose derived columns (``sample_id``, ``view``, ``age_years``,
        ``sex``) are kept as they are, so a split or filter keeps its samples' ids."""
        if derived:
            df = df.reset_index(drop=True)
            self.rows = TableRows.of(df, self.spec, self.image_roots)
            self._table = FrozenFrame(df)
            return
        # a table saved from a dataset carries the derived columns: recompute them (a table
        # whose spec has id_col="sample_id", e.g. a merged one, keeps its sources' sample ids)
        keep = {"sample_id"} if self.spec.id_col == "sample_id" else set()
        df = df.drop(columns=[c for c in DERIVED_COLUMNS if c in df.columns and c not in keep]
                     ).reset_index(drop=True)
        df.insert(0, "sample_id", df.pop("sample_id") if keep else  # text as object, like
                  pd.Series(sample_ids(df, self.spec), index=df.index, dtype=object))  # the rest
        df["view"] = pd.Series(canonical_views(df["view_position"], self.spec.view_map),
                               index=df.index, dtype=object)
        age, sex = table_demographics(df, self.spec)
        df["age_years"] = age
        df["sex"] = pd.Series(sex, index=df.index, dtype=object)  # None, not NaN, for missing
        self.rows = TableRows.of(df, self.spec, self.image_roots)
        self._table = FrozenFrame(df)

    @property
    def harmonized_df(self) -> pd.DataFrame:
        """The table behind the samples, splits and folds, with ``sample_id`` and ``view``.
        Read-only (in-place edits raise :class:`~radharmony.errors.ReadOnlyTableError`):
        subset with :meth:`filter`, or pass an edited copy as ``harmonized_df=``."""
        return self._table

    @harmonized_df.setter
    def harmonized_df(self, df: pd.DataFrame) -> None:
        self.set_harmonized_df(df)

    def set_harmonized_df(self, df: pd.DataFrame) -> None:
        """Replace the table (validated like ``harmonized_df=``); samples, splits and folds
        all follow it."""
        self._set_table(validate(df.drop(columns=[c for c in DERIVED_COLUMNS
                                                  if c in df.columns]),
                                 self.spec, source="set_harmonized_df"))

    def _subset(self, rows: np.ndarray) -> "BaseRadiologicalDataset":
        files, file_rows = self._file_table(), self._file_rows
        new = copy.copy(self)
        new.__dict__.pop("_autopack", None)
        new._set_table(self.harmonized_df.iloc[rows], derived=True)
        new._files, new._file_rows = files, file_rows[rows]  # splits share what reads learn
        return new

    def _file_table(self) -> FileTable:
        """The build's :class:`~radharmony.data.filetable.FileTable` (made on first use)."""
        files = self.__dict__.get("_files")
        if files is None:
            roots = self.rows.roots if self.rows.roots is not None else \
                np.full(len(self), str(self.base_image_dir), object)
            files = self._files = FileTable(np.array([str(r) for r in roots], object),
                                            self.rows.paths)
            self._file_rows = np.arange(len(self))
        return files

    def filter(self, mask) -> "BaseRadiologicalDataset":
        """A dataset of the rows where ``mask`` is True: a boolean array or Series over
        :attr:`harmonized_df`, or a callable that takes the table and returns one. E.g.
        frontal images only: ``ds.filter(ds.harmonized_df["view"].isin(["PA", "AP"]))``.
        Splits and folds of the result still group by patient."""
        if callable(mask):
            mask = mask(self.harmonized_df)
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (len(self),):
            raise RadHarmonyError("filter() needs one boolean per row",
                                  expected=f"a boolean array of length {len(self)}",
                                  found=f"dtype {mask.dtype}, shape {mask.shape}",
                                  fix="build it from ds.harmonized_df, e.g. "
                                      "ds.harmonized_df['view'] == 'PA'")
        return self._subset(np.flatnonzero(mask))

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

    # -- images -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows.ids)

    @property
    def sample_ids(self) -> np.ndarray:
        """Every sample's ``sample_id``, in order."""
        return self.rows.ids

    def image_root(self, index: int) -> Path:
        """The folder sample ``index``'s ``image_path`` is relative to."""
        return self.rows.roots[index] if self.rows.roots is not None else self.base_image_dir

    def image_file(self, index: int) -> Path:
        """The absolute path of sample ``index``'s image (refusing paths outside the root;
        directories are resolved once per dataset build, see
        :mod:`radharmony.data.filetable`)."""
        return self._file_table().file(int(self._file_rows[index]))

    def load_image(self, index: int) -> tuple[np.ndarray, Letterbox]:
        """``(quantized (size, size) array, Letterbox)`` through the cache when enabled."""
        cache = self.image_cache
        if cache is None:
            return self.pipeline.encode(self.image_file(index))
        try:
            path, key = batches.identify(self, index)
        except OSError:  # absent, a loop, a name too long: the standard error names it
            return self.pipeline.encode(self.image_file(index))
        return batches.load_one(self, index, path, key)

    def cache_key(self, index: int) -> str:
        """Sample ``index``'s cache key: derived once per dataset build and again only when
        the file's size, mtime, ctime or inode changed (one ``lstat`` per call)."""
        return batches.identify(self, index)[1]

    def cache_keys(self) -> list[str]:
        """The cache key of every sample's image (one ``stat`` each)."""
        return precache.cache_keys(self)

    def pre_cache(self, num_workers: int = 0, *, progress: bool = True, engine: str = "local",
                  address: str | None = None) -> list[str]:
        """Decode and cache every image not cached yet, then consolidate them into a pack
        that :class:`radharmony.CachedLoader` reads a batch at a time.

        Safe to run from several processes at once and to interrupt (finished images are
        kept). Entries are keyed by file identity, so every split and fold of the dataset
        shares them: pre-cache the full dataset once. Returns the samples' cache keys. (For a
        run that records failures instead of stopping, see
        :func:`radharmony.data.precache.pre_cache`.)

        Args:
            num_workers: decoding processes (DataLoader workers); 0 decodes in this process.
                With ``engine="ray"``: CPUs of the local Ray cluster (0: every core).
            progress: show tqdm progress bars.
            engine: ``"local"`` or ``"ray"`` (decode on a Ray cluster, ``pip install
                radharmony[ray]``; same entries and pack, see ``docs/scaling.md``).
            address: with ``engine="ray"``, the cluster to join (None: a local one).
        """
        return precache.pre_cache(self, num_workers=num_workers, progress=progress,
                                  engine=engine, address=address).keys

    # -- samples ------------------------------------------------------------------------------
    def __getitem__(self, index: int) -> dict:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        index = int(index) % len(self)
        sid = self.rows.ids[index]
        try:
            if self.user_transform is None:
                arr, box = self.load_image(index)
                return self.finish(self.assemble(index, self.pipeline.to_tensor(arr, self.dtype),
                                                 box))
            sample = self.assemble(index, str(self.image_file(index)), None)
            sample = self.user_transform(sample)
            sample["img"] = sampling.as_tensor(sample["img"], self.dtype)
            return self.finish(sample)
        except (ImageReadError, PathSafetyError) as exc:
            raise type(exc)(f"Sample {sid}: {exc.what}", expected=exc.expected,
                            found=exc.found, fix=exc.fix) from None
        except Exception as exc:  # e.g. a user transform's own error: keep it, add where
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"radharmony: while loading sample {sid} "
                             f"({self.image_root(index) / self.rows.paths[index]})")
            raise

    def __getitems__(self, indices) -> list[dict]:
        """The samples of ``indices``, read as one batch: ``DataLoader(ds, batch_size=B)``
        calls this, and the batch's cached images are gathered from the pack at once. The
        samples' ``img`` are views into one batch tensor, which :func:`radharmony.collate`
        returns without copying; the default collate stacks them as usual."""
        n = len(self)
        for i in indices:
            if not -n <= i < n:
                raise IndexError(f"index {i} out of range for {n} samples")
        if self.image_cache is None or self.user_transform is not None or not len(indices):
            return [self[i] for i in indices]
        return batches.read_samples(self, [int(i) % n for i in indices])

    def finish(self, sample: dict) -> dict:
        """Run :attr:`sample_transform` on an assembled sample (MONAI MetaTensors are turned
        back into plain tensors; ``img`` keeps the dataset's dtype)."""
        if self.sample_transform is None:
            return sample
        return sampling.after_transform(self.sample_transform(sample), self.dtype)

    def assemble(self, index: int, img, letterbox: Letterbox | None,
                 given: dict | None = None) -> dict:
        """The sample of row ``index`` around an image tensor (outputs added through
        :meth:`add_outputs`; ``given``: outputs a batched read computed already, from
        :meth:`batch_outputs`)."""
        return sampling.assemble(self, index, img, letterbox, given)

    def batch_outputs(self, indices: np.ndarray) -> dict[str, torch.Tensor]:
        """Outputs a batched read computes for rows ``indices`` at once: one tensor per key,
        whose rows become the samples' values (and collate back to that tensor, no stack);
        :meth:`add_outputs` leaves a key it finds in the sample as it is. The default gives
        ``cls`` and ``cls_mask``; override both methods together, so a batch equals its
        samples read one by one."""
        return sampling.batch_outputs(self, indices)

    def add_outputs(self, index: int, sample: dict, letterbox: Letterbox | None) -> None:
        """Add the requested outputs for row ``index`` (override to add dataset-specific ones;
        ``letterbox`` maps source pixels to output pixels, None under a user transform)."""
        sampling.standard_outputs(self, index, sample, letterbox)

    def source_mask(self, index: int) -> np.ndarray:
        """Row ``index``'s uint8 label mask at source resolution (datasets whose spec lists
        the ``mask`` output implement this; see :mod:`radharmony.annotations.masks`)."""
        raise NotImplementedError(f"{type(self).__name__} declares no source_mask")

    # -- checks and pictures --------------------------------------------------------------------
    def validate(self, *, decode: bool = True, num_workers: int = 0, progress: bool = True):
        """Check every image up front: path safety, existence, non-empty, decodable (header
        checks only with ``decode=False``). Returns a
        :class:`~radharmony.data.checks.ValidationReport`; ``num_workers`` processes."""
        from .checks import validate_dataset

        return validate_dataset(self, decode=decode, num_workers=num_workers, progress=progress)

    def plot(self, index: int, **kwargs):
        """A matplotlib Figure of sample ``index`` (see :func:`radharmony.plotting.plot_sample`)."""
        from ..plotting import plot_sample

        return plot_sample(self[index], **kwargs)

    def __repr__(self) -> str:
        df = self.harmonized_df
        return (f"{type(self).__name__}({len(df)} images, {df['study_id'].nunique()} studies, "
                f"{df['patient_id'].nunique()} patients, outputs={sorted(self.outputs)})")

