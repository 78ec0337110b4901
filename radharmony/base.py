"""The two base classes every dataset module builds on.

* :class:`BaseHarmonizer` -- the dataset's own metadata files -> the standard table.
* :class:`BaseRadiologicalDataset` -- the table + images -> PyTorch samples, splits and folds.

A dataset module declares a :class:`~radharmony.spec.DatasetSpec`, implements ``read`` (raw
files -> Python objects, transforming nothing) and ``harmonize_raw`` (a pure function of those
objects), and adds thin split classes. Everything else lives here or in the shared modules.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np
import pandas as pd
import torch

from . import __version__
from .boxes import BoxSelection, boxes_to_array
from .cache import ImageCache, TableCache
from .discovery import discover
from .errors import (ImageReadError, MetadataNotFoundError, PathSafetyError, RadHarmonyError,
                     SavedFileError, UnsupportedOutputWarning)
from .imaging import safe_path
from .registry import get_harmonizer_class
from .schema import sample_ids, validate
from .spec import DatasetSpec
from .splits import assign_folds
from .tables import canonical_views
from .transforms import DefaultTransform
from .validation import drop_missing, guarded_harmonize, shorten

SAVED_FORMAT = "radharmony-harmonizer"
SAVED_FORMAT_VERSION = 1
_META_KEY = b"radharmony"
#: columns a dataset adds to its table: the sample id and the canonical view (spec.view_map)
DERIVED_COLUMNS = ("sample_id", "view")
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


def _header_checksum(header: dict, schema_meta: dict) -> int:
    """CRC-32 of the saved header (less its checksum) and pandas' column-type metadata; the
    data pages carry their own CRCs."""
    body = json.dumps({k: v for k, v in header.items() if k != "checksum"}, sort_keys=True)
    return zlib.crc32(body.encode() + (schema_meta or {}).get(b"pandas", b""))


class BaseHarmonizer:
    """Reads a dataset's metadata as shipped and returns the harmonized table.

    Args:
        csv_path: the metadata file; found near ``base_image_dir`` when omitted.
        base_image_dir: the image root that ``image_path`` is relative to.
    """

    spec: ClassVar[DatasetSpec]
    #: how the metadata file is described in errors, e.g. "the ReXGradient valid JSON"
    metadata_description: ClassVar[str] = "the metadata file"

    def __init__(self, csv_path: str | os.PathLike | None = None,
                 base_image_dir: str | os.PathLike | None = None):
        self.csv_path = Path(csv_path) if csv_path is not None else None
        self.base_image_dir = Path(base_image_dir) if base_image_dir is not None else None
        self._df: pd.DataFrame | None = None

    # -- hooks a dataset module implements ---------------------------------------------------
    def check_metadata_path(self, path: Path) -> None:
        """Reject a metadata file of the wrong kind before reading it (override as needed)."""

    def read(self, path: Path) -> Any:
        """Read the raw metadata at ``path`` into Python objects, transforming nothing."""
        raise NotImplementedError

    @classmethod
    def harmonize_raw(cls, raw: Any, *, source: str = "metadata") -> pd.DataFrame:
        """Pure function: raw metadata -> standard table (validated by the caller)."""
        raise NotImplementedError

    def _harmonize_file(self, path: Path) -> pd.DataFrame:
        """read -> harmonize_raw -> validate (guarded), with the garbage collector paused
        while the metadata's millions of objects are built (they hold no reference cycles)."""
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            return guarded_harmonize(self, path)  # faults -> errors naming file and entry
        finally:
            if gc_was_on:
                gc.enable()

    def table_inputs(self, path: Path) -> list[Path]:
        """Files whose change must invalidate the cached table: the metadata file and the
        files beside it (labels or boxes shipped separately). Override to add others."""
        siblings = [f for f in path.parent.iterdir() if f.is_file()]
        return siblings if len(siblings) <= 1000 else [path]

    # -- the public API -----------------------------------------------------------------------
    def arguments(self) -> dict:
        """The constructor arguments, JSON-serializable (saved with the table)."""
        return {"csv_path": None if self.csv_path is None else str(self.csv_path),
                "base_image_dir": None if self.base_image_dir is None
                else str(self.base_image_dir)}

    def resolve_metadata_path(self) -> Path:
        if self.csv_path is None:
            return discover(self.base_image_dir, self.spec.metadata_files,
                            description=self.metadata_description, argument="csv_path")
        self.check_metadata_path(self.csv_path)
        if not self.csv_path.is_file():
            raise MetadataNotFoundError(self.metadata_description, [self.csv_path],
                                        fix="check the csv_path argument")
        return self.csv_path

    def harmonize(self, *, cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
        """The harmonized table: one row per image, validated against the standard schema.

        With ``cache_dir`` the validated table is kept in ``<cache_dir>/tables/`` (zstd Arrow
        IPC, no pickle), keyed by this class and its :meth:`arguments`, the resolved path, size
        and modification time of every file :meth:`table_inputs` names and the radharmony
        version; a later call with unchanged files reads it back instead of parsing the
        metadata again. Datasets pass their ``cache_dir``.
        """
        if self._df is None:
            path = self.resolve_metadata_path()
            self.csv_path = path
            if cache_dir is None:
                self._df = self._harmonize_file(path)
            else:
                owner = {"class": f"{type(self).__module__}.{type(self).__qualname__}",
                         "arguments": self.arguments(), "key": self.spec.key}
                self._df = TableCache(cache_dir).get(owner, self.table_inputs(path),
                                                     lambda: self._harmonize_file(path))
        # pandas >= 3 copies on write: a shallow copy already protects self._df (and is free)
        return self._df.copy(deep=not _COPY_ON_WRITE)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the table as Parquet with a JSON header (class, version, arguments).

        Loading it back (``load`` or ``harmonizer_path=``) executes no code; every data page
        carries a CRC-32 that loading verifies, so a damaged or altered file is refused.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        df = self.harmonize()
        json_cols = [c for c in df.columns if df[c].dtype == object and
                     df[c].map(lambda v: isinstance(v, (list, dict))).any()]
        for c in json_cols:  # nested values travel as JSON text: portable and code-free
            df[c] = df[c].map(lambda v: None if v is None else json.dumps(v))
        header = {"format": SAVED_FORMAT, "format_version": SAVED_FORMAT_VERSION,
                  "class": type(self).__name__, "key": self.spec.key,
                  "radharmony_version": __version__, "arguments": self.arguments(),
                  "rows": len(df), "json_columns": json_cols}
        table = pa.Table.from_pandas(df, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        header["checksum"] = _header_checksum(header, meta)
        meta[_META_KEY] = json.dumps(header).encode()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table.replace_schema_metadata(meta), tmp, write_page_checksum=True)
        os.replace(tmp, path)
        return path

    @staticmethod
    def load(path: str | os.PathLike) -> "BaseHarmonizer":
        """A harmonizer saved by :meth:`save`, with its table (no code is executed)."""
        import pyarrow.parquet as pq

        path = Path(path)
        fix = "save it again with harmonizer.save(path), or harmonize afresh"
        if not path.is_file():
            raise MetadataNotFoundError("the saved harmonizer", [path], fix=fix)
        try:  # data only: Parquet + a JSON header; nothing is unpickled or imported by name
            table = pq.read_table(path, page_checksum_verification=True)  # CRC per page
            header = json.loads((table.schema.metadata or {})[_META_KEY])
            if not isinstance(header, dict) or header.get("format") != SAVED_FORMAT:
                raise ValueError(f"header {shorten(header)} is not {SAVED_FORMAT!r}")
            if header.get("checksum") != _header_checksum(header, table.schema.metadata):
                raise ValueError("the header or column types were altered (checksum mismatch)")
            cls = get_harmonizer_class(header["key"])  # a registered class, never a name lookup
            args = header.get("arguments") or {}
            h = cls(**{k: v for k, v in args.items() if v is not None})
            df = table.to_pandas()
            for c in header.get("json_columns", []):
                df[c] = df[c].map(lambda v: json.loads(v) if isinstance(v, str)  # NaN/None: missing
                                  else None).astype(object)
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise SavedFileError(f"{path} is not a readable saved radharmony harmonizer",
                                 expected="a Parquet file written by harmonizer.save()",
                                 found=f"{type(exc).__name__}: {shorten(exc)}", fix=fix) from None
        if len(df) != header.get("rows"):
            raise SavedFileError(f"{path} holds {len(df)} rows", expected=f"{header.get('rows')}"
                                 " rows as its header says", found=f"{len(df)}", fix=fix)
        try:
            h._df = validate(df, cls.spec, source=str(path))
        except RadHarmonyError as exc:
            raise SavedFileError(f"{path} holds a table that is not a valid {cls.spec.key!r} "
                                 "table", expected="the table harmonizer.save() wrote",
                                 found=str(exc), fix=fix) from None
        return h


class BaseRadiologicalDataset(torch.utils.data.Dataset):
    """Samples of one dataset split as dicts: ``img`` (1, 224, 224) in [-1, 1], ``sample_id``
    and the requested outputs.

    Args:
        base_image_dir: root that the table's ``image_path`` values are relative to.
        csv_path: the dataset's metadata file; auto-discovered when omitted.
        output_cls, output_mask, output_report, output_bbox: add ``cls``, ``mask``,
            ``report``, ``bbox``. A flag the dataset cannot provide warns and adds nothing.
        bbox_annotator, bbox_merge_iou: which boxes ``bbox`` holds when several annotators
            boxed an image (see :class:`radharmony.boxes.BoxSelection`): all (default), one
            annotator (``"first"`` per image, or an id), or merged across annotators by IoU.
        transform: None for the built-in pipeline (:class:`DefaultTransform`; pass an instance
            to change its size or percentiles), or any callable on the sample dict (e.g. a
            MONAI ``Compose`` of dictionary transforms) which then receives ``img`` as the
            image's path and replaces the built-in pipeline.
        cache_dir: where preprocessed images are cached (built-in pipeline only); None
            disables caching.
        dtype: dtype of ``img``.
        harmonized_df, harmonizer_path, harmonizer: where the table comes from, in that order
            of precedence; when all are None the dataset's harmonizer runs.
        on_missing: ``"raise"`` (default): a row whose image file is absent raises when its
            sample is read; ``"drop"``: such rows are dropped when the dataset is built, with a
            warning giving their count and first paths.
    """

    harmonizer_class: ClassVar[type[BaseHarmonizer]]
    spec: ClassVar[DatasetSpec]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "harmonizer_class" in cls.__dict__:
            cls.spec = cls.harmonizer_class.spec

    def __init__(self, base_image_dir: str | os.PathLike, csv_path: str | os.PathLike | None = None,
                 *, output_cls: bool = False, output_mask: bool = False,
                 output_report: bool = False, output_bbox: bool = False,
                 bbox_annotator: str | None = None, bbox_merge_iou: float | None = None,
                 transform: Callable | None = None, cache_dir: str | os.PathLike | None = "./cache",
                 dtype: torch.dtype = torch.bfloat16, harmonized_df: pd.DataFrame | None = None,
                 harmonizer: BaseHarmonizer | None = None,
                 harmonizer_path: str | os.PathLike | None = None, on_missing: str = "raise"):
        if base_image_dir is None:
            raise RadHarmonyError(f"{type(self).__name__} needs base_image_dir",
                                  expected="the folder the images are under", found="None",
                                  fix="pass base_image_dir='/data/.../'")
        if not isinstance(dtype, torch.dtype):
            raise RadHarmonyError("dtype must be a torch.dtype", expected="e.g. torch.float32",
                                  found=repr(dtype), fix="pass dtype=torch.float32")
        if on_missing not in ("raise", "drop"):
            raise RadHarmonyError("on_missing must be 'raise' or 'drop'",
                                  expected="'raise' (fail when a sample's file is absent) or "
                                  "'drop' (drop such rows up front)", found=repr(on_missing),
                                  fix="pass on_missing='drop' or leave the default")
        self.on_missing = on_missing
        self.base_image_dir = Path(base_image_dir)
        self.csv_path = csv_path
        self.dtype = dtype
        self.box_selection = BoxSelection(annotator=bbox_annotator, merge_iou=bbox_merge_iou)
        self.outputs = self._supported_outputs(cls=output_cls, mask=output_mask,
                                               report=output_report, bbox=output_bbox)
        self.user_transform = None if isinstance(transform, DefaultTransform) else transform
        self.default_transform = transform if isinstance(transform, DefaultTransform) \
            else DefaultTransform()
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self._cache = None
        if self.cache_dir is not None and self.user_transform is None:
            self._cache = ImageCache(self.cache_dir, self.default_transform.params())
        self.harmonizer = self._table_source(harmonized_df, harmonizer_path, harmonizer)
        df = self.harmonizer.harmonize(cache_dir=self.cache_dir) if harmonized_df is None else \
            validate(harmonized_df, self.spec, source="harmonized_df")
        if on_missing == "drop":
            df = drop_missing(df, self.base_image_dir, owner=type(self).__name__)
        self._set_table(df)
        if "bbox" in self.outputs and self._boxes is None:
            warnings.warn(f"{type(self).__name__}: output_bbox=True but its table has no "
                          "'boxes' column (the dataset's box file was not found); samples will "
                          "have no 'bbox' key.", UnsupportedOutputWarning, stacklevel=2)
            self.outputs = self.outputs - {"bbox"}

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

    def _table_source(self, harmonized_df, harmonizer_path, harmonizer) -> BaseHarmonizer:
        key = self.spec.key
        if harmonized_df is not None or harmonizer_path is None and harmonizer is None:
            return self.harmonizer_class(csv_path=self.csv_path,
                                         base_image_dir=self.base_image_dir)
        h = BaseHarmonizer.load(harmonizer_path) if harmonizer_path is not None else harmonizer
        if not isinstance(h, BaseHarmonizer) or h.spec.key != key:
            found = h.spec.key if isinstance(h, BaseHarmonizer) else type(h).__name__
            raise RadHarmonyError(f"{type(self).__name__} got a harmonizer for another dataset",
                                  expected=f"a harmonizer for {key!r}", found=repr(found),
                                  fix=f"use {self.harmonizer_class.__name__}")
        return h

    def _set_table(self, df: pd.DataFrame) -> None:
        # a table saved from a dataset carries the derived columns: recompute them
        df = df.drop(columns=[c for c in DERIVED_COLUMNS if c in df.columns]).reset_index(drop=True)
        df.insert(0, "sample_id", sample_ids(df, self.spec))
        df["view"] = pd.Series(canonical_views(df["view_position"], self.spec.view_map),
                               index=df.index, dtype=object)
        self.harmonized_df = df
        self._ids = df["sample_id"].to_numpy(dtype=object)
        self._paths = df["image_path"].to_numpy(dtype=object)
        self._reports = df["report"].to_numpy(dtype=object)
        self._labels = df[list(self.spec.label_cols)].to_numpy(np.float32) \
            if self.spec.label_cols else None
        self._boxes = df["boxes"].to_numpy(dtype=object) if "boxes" in df.columns else None

    def _subset(self, rows: np.ndarray) -> "BaseRadiologicalDataset":
        new = copy.copy(self)
        new._set_table(self.harmonized_df.iloc[rows])
        return new

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
    def get_datasets(self, n_splits: int | None = None, *, seed: int = 0):
        """``None``: one dataset with every image. ``n``: ``(train, val)``, with about 1/n of
        the patients in val; deterministic for ``seed``; no patient on both sides."""
        if n_splits is None:
            return self._subset(np.arange(len(self)))
        return self.get_folds(n_splits, seed=seed)[0]

    def get_folds(self, n_splits: int, *, seed: int = 0) -> list[tuple]:
        """``n_splits`` ``(train, val)`` pairs grouped by patient; the val sides cover every
        image exactly once."""
        folds = assign_folds(self.harmonized_df[self.spec.group_col], n_splits, seed=seed)
        return [(self._subset(np.flatnonzero(folds != k)), self._subset(np.flatnonzero(folds == k)))
                for k in range(n_splits)]

    # -- samples ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._ids)

    def image_file(self, index: int) -> Path:
        """The absolute path of sample ``index``'s image (refusing paths outside the root)."""
        return safe_path(self.base_image_dir, self._paths[index])

    def load_image(self, index: int):
        """``(quantized (size, size) array, Letterbox)`` through the cache when enabled."""
        from .geometry import Letterbox

        path = self.image_file(index)
        if self._cache is None:
            return self.default_transform.encode(path)
        try:
            key = self._cache.key(path, resolved=True)  # image_file() resolved it
        except FileNotFoundError:
            return self.default_transform.encode(path)  # raises the standard missing-file error
        hit = self._cache.load(key)
        if hit is not None:
            return hit[0], Letterbox(**hit[1])
        arr, box = self.default_transform.encode(path)
        self._cache.store(key, arr, box.as_dict())
        return arr, box

    def cache_keys(self) -> list[str]:
        """The cache key of every sample's image (one ``stat`` each)."""
        cache = self._require_cache()
        keys = []
        for i in range(len(self)):
            try:
                keys.append(cache.key(self.image_file(i), resolved=True))
            except (FileNotFoundError, ImageReadError, PathSafetyError):
                self[i]  # raises the standard error naming the sample and file
                raise
        return keys

    def pre_cache(self, num_workers: int = 0, *, progress: bool = True) -> list[str]:
        """Decode and cache every image not cached yet, then consolidate them into a pack
        that :class:`radharmony.loader.CachedLoader` reads a batch at a time.

        Safe to run from several processes at once and to interrupt (finished images are
        kept). Entries are keyed by content, so every split and fold of the dataset shares
        them: pre-cache the full dataset once. Returns the samples' cache keys.

        Args:
            num_workers: decoding processes (DataLoader workers); 0 decodes in this process.
            progress: show tqdm progress bars.
        """
        from tqdm.auto import tqdm

        cache = self._require_cache()
        keys = self.cache_keys()
        _, pack_of, _ = cache.locate(keys)
        todo = [int(i) for i in np.flatnonzero(pack_of < 0) if not cache.has(keys[i])]
        if todo:
            loader = torch.utils.data.DataLoader(_Encoder(self, todo), batch_size=None,
                                                 num_workers=num_workers)
            with tqdm(total=len(todo), desc=f"caching {type(self).__name__}", unit="img",
                      disable=not progress) as bar:
                for n in loader:
                    bar.update(int(n))
        index = {k: i for i, k in enumerate(keys)}

        def build(key):
            arr, box = self.default_transform.encode(self.image_file(index[key]))
            return arr, box.as_dict()

        cache.pack(keys, build, progress=lambda it: tqdm(
            it, desc="packing cache", unit="img", disable=not progress))
        return keys

    def _require_cache(self):
        if self._cache is None:
            raise RadHarmonyError(f"{type(self).__name__} has no image cache",
                                  expected="a dataset built with cache_dir and the built-in "
                                  "transform", found="cache_dir=None or a user transform",
                                  fix="build it with cache_dir='./cache' and transform=None "
                                  "(or a DefaultTransform)")
        return self._cache

    def __getitem__(self, index: int) -> dict:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        index = int(index) % len(self)
        sid = self._ids[index]
        sample: dict[str, Any] = {"sample_id": sid}
        try:
            if self.user_transform is None:
                arr, box = self.load_image(index)
                sample["img"] = self.default_transform.to_tensor(arr, self.dtype)
            else:
                sample["img"], box = str(self.image_file(index)), None
            self.add_outputs(index, sample, box)
            if self.user_transform is not None:
                sample = self.user_transform(sample)
                sample["img"] = self._as_tensor(sample["img"])
        except (ImageReadError, PathSafetyError) as exc:
            raise type(exc)(f"Sample {sid}: {exc.what}", expected=exc.expected,
                            found=exc.found, fix=exc.fix) from None
        except Exception as exc:  # e.g. a user transform's own error: keep it, add where
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"radharmony: while loading sample {sid} "
                             f"({self.base_image_dir / self._paths[index]})")
            raise
        return sample

    def add_outputs(self, index: int, sample: dict, box) -> None:
        """Add the requested outputs for row ``index`` (override to add dataset-specific ones)."""
        if "report" in self.outputs:
            sample["report"] = self._reports[index]
        if "cls" in self.outputs and self._labels is not None:
            sample["cls"] = torch.from_numpy(np.nan_to_num(self._labels[index], nan=0.0))
        if "bbox" in self.outputs:
            self.add_boxes(index, sample, box)
        if "mask" in self.outputs:
            from .masks import mask_output

            sample["mask"] = mask_output(self.source_mask(index), box)

    def source_mask(self, index: int) -> np.ndarray:
        """Row ``index``'s uint8 label mask at source resolution (datasets whose spec lists
        the ``mask`` output implement this; see :mod:`radharmony.masks`)."""
        raise NotImplementedError(f"{type(self).__name__} declares no source_mask")

    def add_boxes(self, index: int, sample: dict, box) -> None:
        """``bbox`` (N, 4) x_min, y_min, x_max, y_max in output pixels, ``bbox_labels`` and
        ``bbox_annotators`` from the table's ``boxes`` column (list of dicts per image).

        With a user transform (``box`` is None) boxes stay in source pixels, or normalized
        [0, 1] when the table stores them so.
        """
        records = self.box_selection.apply(self._boxes[index] if self._boxes is not None
                                           else None)
        xyxy, labels, annotators = boxes_to_array(records)
        if box is not None:
            xyxy = box.boxes(xyxy, normalized=self.spec.box_units == "normalized")
        sample["bbox"] = torch.from_numpy(np.ascontiguousarray(xyxy, dtype=np.float32))
        sample["bbox_labels"] = labels
        sample["bbox_annotators"] = annotators

    def _as_tensor(self, img) -> torch.Tensor:
        if hasattr(img, "as_tensor"):  # MONAI MetaTensor -> plain tensor
            img = img.as_tensor()
        img = torch.as_tensor(np.asarray(img) if not isinstance(img, torch.Tensor) else img)
        return img.to(self.dtype) if img.is_floating_point() else img

    def validate(self, *, decode: bool = True, num_workers: int = 0, progress: bool = True):
        """Check every image up front: path safety, existence, non-empty, decodable (header
        checks only with ``decode=False``). Returns a
        :class:`~radharmony.validation.ValidationReport`; ``num_workers`` processes."""
        from .validation import validate_dataset

        return validate_dataset(self, decode=decode, num_workers=num_workers, progress=progress)

    def plot(self, index: int, **kwargs):
        """A matplotlib Figure of sample ``index`` (see :func:`radharmony.plotting.plot_sample`)."""
        from .plotting import plot_sample

        return plot_sample(self[index], **kwargs)

    def __repr__(self) -> str:
        df = self.harmonized_df
        return (f"{type(self).__name__}({len(df)} images, {df['study_id'].nunique()} studies, "
                f"{df['patient_id'].nunique()} patients, outputs={sorted(self.outputs)})")


class _Encoder(torch.utils.data.Dataset):
    """Decodes and caches samples ``indices`` of ``dataset`` in chunks (for ``pre_cache``)."""

    chunk = 8

    def __init__(self, dataset: BaseRadiologicalDataset, indices: list[int]):
        self.dataset, self.indices = dataset, indices

    def __len__(self) -> int:
        return -(-len(self.indices) // self.chunk)

    def __getitem__(self, i: int) -> int:
        todo = self.indices[i * self.chunk:(i + 1) * self.chunk]
        for index in todo:
            try:
                self.dataset.load_image(index)  # decodes and caches; no other outputs
            except (ImageReadError, PathSafetyError):
                self.dataset[index]  # raises the standard error naming the sample
                raise
        return len(todo)
