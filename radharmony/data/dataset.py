"""The dataset: a validated table + image roots -> PyTorch samples, splits and folds.

:class:`BaseRadiologicalDataset` is generic over its table: a dataset module's split class only
names its harmonizer (``harmonizer_class``), and the same class serves a table built elsewhere
(``harmonized_df=`` with ``spec=``), including one spanning several source datasets whose rows
carry their own image root (``spec.root_col`` + ``image_roots``). Samples are assembled in one
place (:mod:`radharmony.data.sampling`) for ``__getitem__`` and batched readers; pre-caching
lives in :mod:`radharmony.data.precache`, splits in :mod:`radharmony.data.splits`. The class's
image-and-sample methods are in :mod:`radharmony.data.reads`, its subsets (filter, splits,
folds) in :mod:`radharmony.data.subsets`; this module builds the table they read.
"""

from __future__ import annotations

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
from .checks import drop_missing
from .signature import ReferenceCall, constructor_signature
from .reads import SampleReads
from .subsets import Subsets
from .exclude import excluded_rows
from ..errors import RadHarmonyError, UnsupportedOutputWarning, check_choice
from ..imaging.cache import ImageCache
from ..imaging import png
from ..imaging.convert import accelerated
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
    reg: np.ndarray | None = None     # (N, R) float32 regression targets, NaN unknown
    grades: np.ndarray | None = None  # (N, G) float32 grades 0-4, NaN unknown
    sides: np.ndarray | None = None   # (N, S) object: "left" / "right" / "both" / None

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
                   roots=roots,
                   reg=df[list(spec.reg_cols)].to_numpy(np.float32) if spec.reg_cols else None,
                   grades=df[list(spec.grade_cols)].to_numpy(np.float32)
                   if spec.grades else None,
                   sides=df[list(spec.side_cols)].to_numpy(dtype=object)
                   if spec.sides else None)


class BaseRadiologicalDataset(SampleReads, Subsets, torch.utils.data.Dataset,
                              metaclass=ReferenceCall):
    """Samples of one dataset split as dicts: ``img`` (1, 224, 224) in [-1, 1], ``sample_id``
    and the requested outputs.

    The first three arguments may be given by position, in the reference library's order
    ``(base_image_dir, csv_path, transform)``; every other one by keyword (code ported from the
    reference that passes more by position is read in its order: see
    :mod:`radharmony.data.signature`). Every dataset class (mixins included) takes this
    signature (``inspect.signature`` shows it in full).

    Args:
        base_image_dir: root that the table's ``image_path`` values are relative to; may be
            omitted with ``harmonizer_path=`` or ``harmonizer=`` (the root saved with the
            harmonizer is used).
        csv_path: the dataset's metadata file; auto-discovered when omitted.
        output_cls, output_mask, output_report, output_bbox: add ``cls``, ``mask``,
            ``report``, ``bbox``. A flag the dataset cannot provide warns and adds nothing.
        output_reg, output_grade, output_side: add the regression targets ``reg`` with
            ``reg_mask``, the findings' severities ``grade`` (0-4) with ``grade_mask``, their
            sides ``side`` (``[left, right]`` each) with ``side_mask`` (see
            :mod:`radharmony.data.sampling`; ``docs/label_kinds.md``).
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
        spec: the table's :class:`~radharmony.spec.DatasetSpec` (default: that of the
            ``harmonizer`` / ``harmonizer_path`` given, e.g. with ``labels="report"``'s label
            columns, else the class's); a table built elsewhere passes its own.
        image_roots: with ``spec.root_col``, the image root of each value of that column.
        level, max_images, view_order, prior, packed: ``level="study"`` gives study samples
            (every view of a study, report sections, optionally the prior study; ``packed``:
            only the real images, no padding slots): see :mod:`radharmony.studies`.
        exclude: sample ids to leave out (a list, or a file of one id a line such as
            :meth:`radharmony.audit.AuditReport.write_exclusions` writes); ids of other
            datasets are ignored; the rows left out are counted in a warning.
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
        cls.__signature__ = constructor_signature(cls)

    def __new__(cls, *args, level: str = "image", max_images: int | None = None,
                view_order=None, prior: bool = False, packed: bool = False, **kwargs):
        """``level="study"`` returns a :class:`radharmony.data.studies.StudyDataset` over this
        dataset (``max_images``, ``view_order``, ``prior``, ``packed``: see there)."""
        if level == "image" and max_images is None and view_order is None and not prior \
                and not packed:
            return super().__new__(cls)
        from .studies import study_dataset

        return study_dataset(cls, args, kwargs, level=level, max_images=max_images,
                             view_order=view_order, prior=prior, packed=packed) \
            or super().__new__(cls)

    def __init__(self, base_image_dir: str | os.PathLike | None = None,
                 csv_path: str | os.PathLike | None = None, transform: Callable | None = None,
                 *, output_cls: bool = False, output_mask: bool = False,
                 output_report: bool = False, output_bbox: bool = False,
                 output_reg: bool = False, output_grade: bool = False,
                 output_side: bool = False, bbox_annotator: str | None = None,
                 bbox_merge_iou: float | None = None,
                 cache_dir: str | os.PathLike | None = "./cache",
                 dtype: torch.dtype = torch.bfloat16, harmonized_df: pd.DataFrame | None = None,
                 harmonizer: BaseHarmonizer | None = None,
                 harmonizer_path: str | os.PathLike | None = None, on_missing: str = "raise",
                 spec: DatasetSpec | None = None,
                 image_roots: Mapping[str, str | os.PathLike] | None = None,
                 cache_key: str = "identity", level: str = "image",
                 max_images: int | None = None, view_order=None, prior: bool = False,
                 packed: bool = False, exclude=None):
        del level, max_images, view_order, prior, packed  # study level: see __new__
        if harmonized_df is None and harmonizer_path is not None \
                and self.harmonizer_class is not None:
            harmonizer, harmonizer_path = self.harmonizer_class.load(harmonizer_path), None
        if harmonized_df is None and isinstance(harmonizer, BaseHarmonizer) \
                and harmonizer.spec.key == type(self).spec.key:  # what the harmonizer holds:
            if base_image_dir is None:  # the image root saved with the table
                base_image_dir = harmonizer.base_image_dir
            if spec is None:  # its table's columns (e.g. labels="report")
                spec = harmonizer.spec
        self.spec = spec if spec is not None else type(self).spec
        if not (transform is None or callable(transform)
                or isinstance(transform, DefaultTransform)):
            raise RadHarmonyError(f"{type(self).__name__}'s transform must be callable",
                                  expected="None, a DefaultTransform or a callable on the sample "
                                  "dict (e.g. a MONAI Compose)", found=repr(transform),
                                  fix="the positional arguments are (base_image_dir, csv_path, "
                                  "transform); pass the others (output_cls=...) by keyword")
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
                                               report=output_report, bbox=output_bbox,
                                               reg=output_reg, grade=output_grade,
                                               side=output_side)
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
        if exclude is not None:  # sample ids a user leaves out (e.g. an audit's duplicates)
            keep = excluded_rows(self.rows.ids, exclude, owner=type(self).__name__)
            if not keep.all():
                self._set_table(self.harmonized_df.iloc[np.flatnonzero(keep)], derived=True)
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
        for learned in ("_files", "_file_rows", "_autopack"):  # what reads learned of the old
            self.__dict__.pop(learned, None)                 # rows (their files, their watch)
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

    # -- checks and pictures --------------------------------------------------------------------
    def validate(self, *, decode: bool = True, num_workers: int = 0, progress: bool = True):
        """Check every image up front: path safety, existence, non-empty, decodable (header
        checks only with ``decode=False``). Returns a
        :class:`~radharmony.data.checks.ValidationReport`; ``num_workers`` processes."""
        from .checks import validate_dataset

        return validate_dataset(self, decode=decode, num_workers=num_workers, progress=progress)

    def title(self, index: int) -> str:
        """Sample ``index`` as a person names it: its patient, view and first positive label
        (``no finding`` where every label is negative), or else the first words of its report
        (:func:`radharmony.plotting.image_title`)."""
        from ..plotting import image_title

        row = self.harmonized_df.iloc[index]
        labels = [(c, row[c]) for c in self.spec.label_cols if c in row.index]
        positive = [c for c, v in labels if v == 1]
        if not positive and labels and all(v == 0 for _, v in labels):
            positive = ["no finding"]
        view = row.get("view")
        report = row.get("report")
        return image_title(row.get(self.spec.group_col, "?"), view if isinstance(view, str)
                           else None, findings=positive,
                           report=report if isinstance(report, str) else None)

    def plot(self, index: int, **kwargs):
        """A matplotlib Figure of sample ``index`` (see :func:`radharmony.plotting.plot_sample`),
        titled :meth:`title`."""
        from ..plotting import plot_sample

        kwargs.setdefault("title", self.title(index))
        return plot_sample(self[index], **kwargs)

    def __repr__(self) -> str:
        df = self.harmonized_df
        return (f"{type(self).__name__}({len(df)} images, {df['study_id'].nunique()} studies, "
                f"{df['patient_id'].nunique()} patients, outputs={sorted(self.outputs)})")



# ``__new__`` (the study-level hook) takes ``*args, **kwargs``: show the real arguments
BaseRadiologicalDataset.__signature__ = constructor_signature(BaseRadiologicalDataset)
