"""The harmonizer: a dataset's own metadata files -> the validated standard table.

A dataset module subclasses :class:`BaseHarmonizer` and implements three hooks:

* :meth:`~BaseHarmonizer.inputs` -- every file and folder one harmonize reads, declared once
  (:class:`Inputs`): the metadata file, side files wherever they are found, folders it lists;
* :meth:`~BaseHarmonizer.read` -- those inputs -> Python objects, transforming nothing;
* :meth:`~BaseHarmonizer.harmonize_raw` -- a pure function of those objects -> the table.

``harmonize`` runs ``read -> harmonize_raw -> merge repeats -> validate`` with every fault a
radharmony error naming the file and entry, and keeps the result in the table cache keyed by
exactly what :meth:`~BaseHarmonizer.inputs` declared, so reading and invalidation cannot
disagree.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ..errors import (DatasetFolderNotFoundError, MetadataError, MetadataNotFoundError,
                      RadHarmonyError, SavedFileError)
from ..gc_pause import paused_gc
from ..spec import DatasetSpec
from .inputs import Inputs
from .guard import harmonize_error, locate_entry, merge_duplicate_rows, naming_file, read_error
from .locate import discover
from .schema import validate
from .store import TableCache, load_table, save_table

_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


class BaseHarmonizer:
    """Reads a dataset's metadata as shipped and returns the harmonized table.

    Args:
        csv_path: the metadata file (JSON, JSONL, CSV or archive, as the dataset ships it);
            found near ``base_image_dir`` when omitted.
        base_image_dir: the image root that ``image_path`` is relative to.
    """

    spec: ClassVar[DatasetSpec]
    #: how the metadata file is described in errors, e.g. "the ReXGradient valid JSON"
    metadata_description: ClassVar[str] = "the metadata file"
    #: the reference library's names: the label columns in ``cls`` order, and the extra
    #: (non-target) columns kept for filtering; set from ``spec`` on every subclass
    LABEL_COLS: ClassVar[list[str]] = []
    EXTRA_OUTPUT_COLS: ClassVar[list[str]] = []

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is not None:
            cls.LABEL_COLS, cls.EXTRA_OUTPUT_COLS = spec_columns(spec)

    def __init__(self, csv_path: str | os.PathLike | None = None,
                 base_image_dir: str | os.PathLike | None = None):
        self.csv_path = Path(csv_path) if csv_path is not None else None
        self.base_image_dir = Path(base_image_dir) if base_image_dir is not None else None
        self._df: pd.DataFrame | None = None

    # -- hooks a dataset module implements ---------------------------------------------------
    def check_metadata_path(self, path: Path) -> None:
        """Reject a metadata file of the wrong kind before reading it (override as needed)."""

    def inputs(self, path: Path) -> Inputs:
        """Every file and folder :meth:`read` reads for metadata file ``path`` (override to
        declare side files and folders; the default is the metadata file alone)."""
        return Inputs(path)

    def read(self, inputs: Inputs) -> Any:
        """Read the raw metadata named by ``inputs`` into Python objects, transforming nothing."""
        raise NotImplementedError

    @classmethod
    def harmonize_raw(cls, raw: Any, *, source: str = "metadata") -> pd.DataFrame:
        """Pure function: raw metadata -> standard table (validated by the caller)."""
        raise NotImplementedError

    # -- the public API -----------------------------------------------------------------------
    def arguments(self) -> dict:
        """The constructor arguments, JSON-serializable (saved with the table)."""
        return {"csv_path": None if self.csv_path is None else str(self.csv_path),
                "base_image_dir": None if self.base_image_dir is None
                else str(self.base_image_dir)}

    def resolve_metadata_path(self) -> Path:
        if self.csv_path is None:
            try:  # metadata beside an image folder not there yet is still found
                return discover(self.base_image_dir, self.spec.metadata_files,
                                description=self.metadata_description, argument="csv_path",
                                source=self.spec.access)
            except MetadataNotFoundError as exc:
                if self.base_image_dir is None or Path(self.base_image_dir).exists():
                    raise
                raise DatasetFolderNotFoundError(self.spec.title, self.base_image_dir,
                                                 key=self.spec.key, access=self.spec.access,
                                                 searched=exc) from None
        self.check_metadata_path(self.csv_path)
        if not self.csv_path.is_file():
            raise MetadataNotFoundError(self.metadata_description, [self.csv_path],
                                        fix="check the csv_path argument")
        return self.csv_path

    def harmonize(self, *, cache_dir: str | os.PathLike | None = None,
                  study_ids=None, patient_ids=None, sample_n: int | None = None
                  ) -> pd.DataFrame:
        """The harmonized table: one row per image, validated against the standard schema.

        ``study_ids`` / ``patient_ids`` keep the rows of those studies / patients (compared
        as text), ``sample_n`` the first ``n`` rows after that; the harmonizer keeps the whole
        table (for :meth:`save` and the table cache).

        With ``cache_dir`` the validated table is kept in ``<cache_dir>/tables/`` (zstd Arrow
        IPC, no pickle), keyed by this class and its :meth:`arguments`, the identity of every
        input :meth:`inputs` declares, the radharmony version and a digest of the table code
        (:data:`radharmony.table.store.TABLE_SOURCES` and this class's module); a later call
        with unchanged inputs reads it back instead of parsing the metadata again. Datasets
        pass their ``cache_dir``.
        """
        if self._df is None:
            path = self.resolve_metadata_path()
            self.csv_path = path
            inputs = self.inputs(path)
            if cache_dir is None:
                self._df = self._harmonize_inputs(inputs)
            else:
                owner = {"class": f"{type(self).__module__}.{type(self).__qualname__}",
                         "arguments": self.arguments(), "key": self.spec.key,
                         "module_file": getattr(sys.modules.get(type(self).__module__),
                                                "__file__", None)}  # its code keys the table
                with paused_gc():  # the folders' listings, the table and its nested cells
                    self._df = TableCache(cache_dir).get(owner, inputs.identity(),
                                                         lambda: self._harmonize_inputs(inputs))
        # pandas >= 3 copies on write: a shallow copy already protects self._df (and is free)
        df = self._df.copy(deep=not _COPY_ON_WRITE)
        if study_ids is None and patient_ids is None and sample_n is None:
            return df
        return subset(df, study_ids=study_ids, patient_ids=patient_ids, sample_n=sample_n)

    # -- the reference library's vocabulary --------------------------------------------------
    @property
    def harmonized_df(self) -> pd.DataFrame:
        """The harmonized table (harmonizing first if needed); assigning a table pins it
        (validated)."""
        return self.harmonize()

    @harmonized_df.setter
    def harmonized_df(self, df: pd.DataFrame | None) -> None:
        self.set_harmonized_df(df)

    def set_harmonized_df(self, df: pd.DataFrame | None) -> None:
        """Pin ``df`` (validated) as this harmonizer's table; None forgets it."""
        self._df = None if df is None else validate(df, self.spec, source="harmonized_df")

    def get_harmonized_df(self) -> pd.DataFrame:
        """The harmonized table (the reference library's name for :meth:`harmonize`)."""
        return self.harmonize()

    def get_label_cols(self) -> list[str]:
        """The label columns, in ``cls`` order."""
        return list(self.spec.label_cols)

    @classmethod
    def load_from_saved(cls, path: str | os.PathLike) -> "BaseHarmonizer":
        """:meth:`load` under the reference library's name. A pickle (what the reference
        library's ``save`` wrote) is refused, with the way to convert it."""
        p = Path(path)
        head = b""
        if p.is_file():
            with open(p, "rb") as fh:
                head = fh.read(2)
        if head[:1] == b"\x80" and head[1:2] in b"\x02\x03\x04\x05":
            raise SavedFileError(
                f"{p} is a pickle (a harmonizer saved by the reference library)",
                expected="a Parquet file written by radharmony's harmonizer.save(path)",
                found="a Python pickle, which radharmony never loads (unpickling runs code)",
                fix="in the reference library's environment, where you trust the file: "
                    "saved = pickle.load(open(path, 'rb')); "
                    "saved['harmonized_df'].to_csv('table.csv', index=False); then here "
                    "Dataset(base_image_dir, harmonized_df=pd.read_csv('table.csv')) or "
                    "harmonizer.set_harmonized_df(...) and harmonizer.save('h.parquet')")
        if getattr(cls, "spec", None) is None:
            raise SavedFileError("BaseHarmonizer.load_from_saved needs a dataset's class",
                                 expected="e.g. ReXGradientValidHarmonizer.load_from_saved"
                                 "(path)", found="the base class",
                                 fix="use radharmony.load_harmonizer(path), which picks the "
                                     "class from the file")
        return cls.load(path)

    def _harmonize_inputs(self, inputs: Inputs) -> pd.DataFrame:
        """read -> harmonize_raw -> validate (guarded), with the garbage collector paused
        while the metadata's millions of objects are built (they hold no reference cycles)."""
        with paused_gc():
            return guarded_harmonize(self, inputs)  # faults -> errors naming file and entry

    def save(self, path: str | os.PathLike) -> Path:
        """Write the table as Parquet with a JSON header (class, version, arguments).

        Loading it back (:meth:`load` or ``harmonizer_path=``) executes no code; every data page
        carries a CRC-32 that loading verifies, so a damaged or altered file is refused.
        """
        return save_table(path, self.harmonize(), {
            "class": type(self).__name__, "key": self.spec.key, "arguments": self.arguments()})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BaseHarmonizer":
        """A harmonizer of this class saved by :meth:`save`, with its table (no code is
        executed). For a file of any dataset use :func:`radharmony.load_harmonizer`."""
        header, df = load_table(path)
        return cls._from_saved(path, header, df)

    @classmethod
    def _from_saved(cls, path, header: dict, df: pd.DataFrame) -> "BaseHarmonizer":
        fix = "save it again with harmonizer.save(path), or harmonize afresh"
        if getattr(cls, "spec", None) is None or header.get("key") != cls.spec.key:
            mine = getattr(getattr(cls, "spec", None), "key", None)
            raise SavedFileError(f"{path} holds a {header.get('key')!r} table, not one of "
                                 f"{cls.__name__}", expected=f"a table saved by a "
                                 f"{mine!r} harmonizer" if mine else "a dataset's harmonizer",
                                 found=repr(header.get("key")),
                                 fix="load it with radharmony.load_harmonizer(path), which "
                                     "picks the class from the file")
        args = header.get("arguments") or {}
        h = cls(**{k: v for k, v in args.items() if v is not None})
        try:
            h._df = validate(df, h.spec, source=str(path))  # h.spec: instance-level
        except RadHarmonyError as exc:
            raise SavedFileError(f"{path} holds a table that is not a valid {cls.spec.key!r} "
                                 "table", expected="the table harmonizer.save() wrote",
                                 found=str(exc), fix=fix) from None
        return h


def spec_columns(spec: DatasetSpec) -> tuple[list[str], list[str]]:
    """``(LABEL_COLS, EXTRA_OUTPUT_COLS)`` of a spec: its label columns in ``cls`` order, and
    its extra columns except the nested annotations (``boxes``)."""
    return list(spec.label_cols), [c for c in spec.extra_cols if c != "boxes"]


def subset(df: pd.DataFrame, *, study_ids=None, patient_ids=None,
           sample_n: int | None = None) -> pd.DataFrame:
    """The rows of ``df`` whose study / patient is listed (ids compared as text), then the
    first ``sample_n``."""
    keep = pd.Series(True, index=df.index)
    for col, ids in (("study_id", study_ids), ("patient_id", patient_ids)):
        if ids is not None:
            ids = [ids] if isinstance(ids, str) else list(ids)
            keep &= df[col].isin([str(i) for i in ids])
    out = df[keep.to_numpy()]
    if sample_n is not None:
        if isinstance(sample_n, bool) or not isinstance(sample_n, int) or sample_n < 0:
            raise RadHarmonyError("sample_n must be a count", expected="an integer >= 0",
                                  found=repr(sample_n), fix="pass sample_n=100, for example")
        out = out.iloc[:sample_n]
    return out.reset_index(drop=True)


def guarded_harmonize(harmonizer: BaseHarmonizer, inputs: Inputs) -> pd.DataFrame:
    """``read`` -> ``harmonize_raw`` -> merge repeats -> ``validate``, every fault a radharmony
    error naming the metadata file and, where one is at fault, the entry."""
    path = inputs.metadata
    source, description = str(path), harmonizer.metadata_description
    try:
        raw = harmonizer.read(inputs)
    except MemoryError:
        raise
    except RadHarmonyError as exc:
        named = naming_file(exc, path)
        if named is exc:
            raise
        raise named from None
    except Exception as exc:
        raise read_error(exc, path, description=description) from exc

    def run(part: Any) -> pd.DataFrame:
        df = harmonizer.harmonize_raw(part, source=source)
        if harmonizer.spec.row_unit != "question":  # questions repeat images by design
            df = merge_duplicate_rows(df, source=source)
        return validate(df, harmonizer.spec, source=source)

    try:
        df = run(raw)
    except MemoryError:
        raise
    except Exception as exc:
        # the dataset's own MetadataError already names the entry; others are located here
        entry = None if isinstance(exc, MetadataError) else locate_entry(raw, run, type(exc))
        if not isinstance(exc, RadHarmonyError):
            raise harmonize_error(exc, path, entry, description=description) from exc
        named = naming_file(exc if entry is None else
                            harmonize_error(exc, path, entry, description=description), path)
        if named is exc:
            raise
        raise named from None
    if df.empty:
        warnings.warn(f"{path} holds no image references: the table is empty.", UserWarning,
                      stacklevel=3)
    return df
