"""ReXGradient-160K (Rajpurkar Lab / Gradient Health): 16-bit PNGs with 4-section reports.

Source of truth: ``metadata/<split>_metadata_view_position.json`` -- a JSON object keyed by
``p<PatientID>_a<AccessionNumber>_s<StudyInstanceUid>``, one entry per study with parallel
per-image lists (``ImagePath``, ``ImageViewPosition``, ...). Bare ``NaN`` numbers occur. The
plain ``<split>_metadata.json`` has the same form with empty view positions and is used when
the view-position file is absent. The per-study CSV cannot give per-image rows and is refused.

Boxes: ``interstitial_pattern_bbox.json`` (interstitial-pattern subtypes, ~398 boxes), found
beside the split JSON, joins on ``<StudyInstanceUid>_<SopInstanceUid>.png``; its form (Label
Studio JSON or JSON-MIN, or an object keyed by image name) is detected by
:func:`radharmony.annotations.label_studio.read_label_studio`. With it the table gets a
``boxes`` column (normalized) and ``output_bbox=True`` gives them; without it that flag warns.
"""

from __future__ import annotations

import math
import posixpath
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.label_studio import join_boxes, read_label_studio
from ..errors import MetadataError, MetadataFormatError
from ..table.read_json import entry_columns, is_record, load_json, read_json_file
from ..reports.format import SECTIONS, format_report, join_sections, section_texts
from ..spec import DatasetSpec, Identity
from .report_labels import ReportLabelsDataset, ReportLabelsHarmonizer
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
SPLITS = {"train": {"images": 238_968, "studies": 140_000, "patients": 95_716},
          "valid": {"images": 17_007, "studies": 10_000, "patients": 6_964},
          "test": {"images": 17_029, "studies": 10_000, "patients": 6_807}}
IMAGE_PREFIX = "../deid_png/"
EXTRA_OUTPUT_COLS = ("accession_number", "patient_sex", "patient_age", "study_date")
VIEW_MAP = {"PA": "PA", "POSTERO_ANTERIOR": "PA", "AP": "AP", "LATERAL": "LATERAL",
            "LL": "LATERAL", "RL": "LATERAL", "LAO": "LAO", "RAO": "RAO"}
ACCESS = ("HuggingFace rajpurkarlab/ReXGradient-160K, gated: ReXGradient-160K Non-Commercial "
          "Data Access and Use Agreement (non-commercial research only, no clinical use)")
LABEL_COLS: tuple[str, ...] = ()
LABEL_MAP: dict = {}  # no label columns (report-only); see radharmony.vocabulary
BBOX_FILE = "interstitial_pattern_bbox.json"
#: the keys of a study entry the harmonizer reads (plus ImageShape when boxes are joined)
ENTRY_FIELDS = ("PatientID", "StudyInstanceUid", "AccessionNumber", "PatientSex", "PatientAge",
                "StudyDate", *(f for _, f in SECTIONS), "ImagePath", "ImageViewPosition")


def view_position_file(split: str) -> str:
    return f"{split}_metadata_view_position.json"


def split_spec(split: str) -> DatasetSpec:
    return DatasetSpec(
        key=f"rexgradient_{split}", title=f"ReXGradient-160K ({split})",
        metadata_files=(view_position_file(split), f"{split}_metadata.json"),
        label_cols=LABEL_COLS, label_map=LABEL_MAP, extra_cols=EXTRA_OUTPUT_COLS,
        age_col="patient_age", age_format="auto", sex_col="patient_sex",  # "007Y"
        outputs=frozenset({"report", "bbox"}),
        view_map=VIEW_MAP, expected=SPLITS[split], access=ACCESS,
        column_types={"study_date": "Int64"},
        identity=Identity("rexgradient"))  # ReXVQA asks about these patients and images


# -- pure helpers ---------------------------------------------------------------------------------
_format_report = format_report  # the name the public page uses


def _optional_text(value):
    if value is None or isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _study_date(value, *, where: str):
    if value is None or isinstance(value, float) and math.isnan(value) or value == "":
        return None
    try:
        if isinstance(value, bool) or float(value) % 1 or not 0 <= float(value) < 1e8:
            raise ValueError("not a YYYYMMDD number")
        return int(float(value)) if not isinstance(value, int) else value
    except (TypeError, ValueError, OverflowError):
        raise MetadataError(f"{where}: StudyDate {value!r} is not a date",
                            expected="a YYYYMMDD number, or null", found=repr(value)[:80],
                            fix="correct or null that StudyDate") from None


def relative_paths(paths: list) -> list:
    """``ImagePath`` values relative to ``deid_png/`` (``../deid_png/`` cut; also used by
    ReXVQA, whose questions carry the same paths)."""
    n = len(IMAGE_PREFIX)
    if set(map(type, paths)) <= {str} and all(map(str.startswith, paths, repeat(IMAGE_PREFIX))):
        return list(map(itemgetter(slice(n, None)), paths))  # all as shipped: at C speed
    return [p[n:] if isinstance(p, str) and p.startswith(IMAGE_PREFIX) else p for p in paths]


def raw_views(views: list) -> list:
    """``ImageViewPosition`` values as shipped, ``""`` -> None."""
    return [v if isinstance(v, str) and v != "" else None for v in views]


def study_fields(field, keys, *, source: str) -> dict[str, list]:
    """The study columns of entries (``field(name)`` -> one value per entry, ``keys`` naming
    them): ``report`` (the four sections joined) and :data:`EXTRA_OUTPUT_COLS`."""
    def text(name: str) -> list:
        return [v if type(v) is str else _optional_text(v) for v in field(name)]

    return {"report": list(map(join_sections, *(section_texts(field(f)) for _, f in SECTIONS))),
            "accession_number": text("AccessionNumber"), "patient_sex": text("PatientSex"),
            "patient_age": text("PatientAge"),
            "study_date": [v if type(v) is int and 0 <= v < 10**8 else  # YYYYMMDD as shipped
                           _study_date(v, where=f"{source}: entry {key!r}")
                           for key, v in zip(keys, field("StudyDate"))]}


class ReXGradientRaw(dict):
    """What ``read`` returns: the split JSON object as read (a dict), carrying the parsed box
    file, when one was found, as ``boxes`` (and its path as ``boxes_source``)."""

    def __init__(self, studies: dict, boxes=None, boxes_source: str = BBOX_FILE):
        super().__init__(studies)
        self.boxes, self.boxes_source = boxes, boxes_source


def _box_column(df: pd.DataFrame, shapes: list, raw: ReXGradientRaw) -> list:
    """Each row's normalized boxes from the box file (joined on ``<study>_<sop>.png``)."""
    names = [f"{study}_{posixpath.splitext(posixpath.basename(str(p)))[0]}.png"
             for study, p in zip(df["study_id"], df["image_path"])]
    sizes = {n: tuple(s) if isinstance(s, (list, tuple)) and len(s) == 2 else None
             for n, s in zip(names, shapes)}
    by_name, _ = read_label_studio(raw.boxes, source=raw.boxes_source, image_sizes=sizes)
    return join_boxes(names, by_name)[0]


# -- harmonizer -----------------------------------------------------------------------------------
class _ReXGradientHarmonizer(ReportLabelsHarmonizer, BaseHarmonizer):
    split: ClassVar[str]

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return f"the ReXGradient-160K {self.split} metadata JSON ({view_position_file(self.split)})"

    def check_metadata_path(self, path: Path) -> None:
        if path.suffix.lower() == ".csv":
            raise MetadataFormatError(
                f"csv_path {path} is the per-study CSV, which has no image paths",
                expected=f"the per-image JSON {view_position_file(self.split)}",
                found="a .csv file",
                fix=f"pass csv_path='{path.with_name(view_position_file(self.split))}'")

    def inputs(self, path: Path) -> Inputs:
        """The split JSON and, when it lies beside it, the box file."""
        box = path.with_name(BBOX_FILE)
        return Inputs(path, {"boxes": box if box.is_file() else None}, looked={"boxes": [box]})

    def read(self, inputs: Inputs) -> ReXGradientRaw:
        """The split JSON, plus ``interstitial_pattern_bbox.json`` when it lies beside it."""
        path = inputs.metadata
        box_path = inputs.file("boxes")
        fields = ENTRY_FIELDS + (("ImageShape",) if box_path is not None else ())
        # records of the fields read (the others skipped unparsed), or dicts without msgspec
        raw = load_json(path, counted=("ImagePath",), entry_fields=fields)  # faults: named
        if not isinstance(raw, dict):
            raise MetadataError(f"{path} has the wrong top-level type",
                                expected="a JSON object keyed by study",
                                found=type(raw).__name__, fix="re-download the metadata file")
        if box_path is None:
            return ReXGradientRaw(raw)
        return ReXGradientRaw(raw, read_json_file(box_path, what="a Label Studio box export"),
                              str(box_path))

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        """The table from the split JSON (a plain dict) or ``read``'s result (boxes too).

        Each study is a dict or a record of :func:`~radharmony.table.read_json.load_json`.
        Column-wise: one C-level pass per field, then one checking pass over the studies.
        """
        boxes = getattr(raw, "boxes", None)
        studies = list(raw.values())
        fields = entry_columns(studies, ENTRY_FIELDS + ("ImageShape",) * (boxes is not None))
        field = fields.__getitem__
        paths, views, counts, shapes = [], [], [], []
        for key, e, image_paths, vp, shape in zip(raw, studies, field("ImagePath"),
                                                   field("ImageViewPosition"),
                                                   fields.get("ImageShape", repeat(None))):
            if not isinstance(image_paths, list):
                entry = isinstance(e, dict) or is_record(e)
                raise MetadataError(f"{source}: entry {key!r} has no ImagePath list",
                                    expected="an object with an ImagePath list",
                                    found=f"ImagePath={image_paths!r}" if entry else
                                    type(e).__name__, fix="re-download the metadata file")
            n = len(image_paths)
            vp = [None] * n if vp is None else vp
            if not isinstance(vp, list) or len(vp) != n:
                raise MetadataError(f"{source}: entry {key!r} has {n} ImagePath values but "
                                    f"ImageViewPosition does not match",
                                    expected=f"{n} view positions", found=repr(vp)[:80],
                                    fix="re-download the metadata file")
            counts.append(n)
            if boxes is not None:
                shapes += shape if isinstance(shape, list) and len(shape) == n else [None] * n
            paths += image_paths
            views += vp

        cols = {"patient_id": field("PatientID"), "study_id": field("StudyInstanceUid"),
                **study_fields(field, raw, source=source)}
        reps = np.asarray(counts, dtype=np.int64)
        df = pd.DataFrame({c: pd.Series(np.repeat(pd.Series(v, dtype=object).to_numpy(),  # 1-D
                                                  reps), dtype=object) for c, v in cols.items()})
        df.insert(2, "image_path", pd.Series(relative_paths(paths), dtype=object))
        df.insert(3, "view_position", pd.Series(raw_views(views), dtype=object))
        df["study_date"] = df["study_date"].astype("Int64")
        if boxes is not None:
            df["boxes"] = _box_column(df, shapes, raw)
        return df


# -- thin split classes ----------------------------------------------------------------------------
class ReXGradientTrainHarmonizer(_ReXGradientHarmonizer):
    """ReXGradient-160K train: 238,968 images, 140,000 studies, 95,716 patients."""
    split, spec = "train", split_spec("train")


class ReXGradientValidHarmonizer(_ReXGradientHarmonizer):
    """ReXGradient-160K validation: 17,007 images, 10,000 studies, 6,964 patients."""
    split, spec = "valid", split_spec("valid")


class ReXGradientTestHarmonizer(_ReXGradientHarmonizer):
    """ReXGradient-160K public test: 17,029 images, 10,000 studies, 6,807 patients."""
    split, spec = "test", split_spec("test")


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class ReXGradientTrainDataset(ReportLabelsDataset, BaseRadiologicalDataset):
        """ReXGradient-160K train split; ``base_image_dir`` is the extracted ``deid_png/``."""
        harmonizer_class = ReXGradientTrainHarmonizer

    class ReXGradientValidDataset(ReportLabelsDataset, BaseRadiologicalDataset):
        """ReXGradient-160K validation split; ``base_image_dir`` is the extracted ``deid_png/``."""
        harmonizer_class = ReXGradientValidHarmonizer

    class ReXGradientTestDataset(ReportLabelsDataset, BaseRadiologicalDataset):
        """ReXGradient-160K public test split; ``base_image_dir`` is the extracted ``deid_png/``."""
        harmonizer_class = ReXGradientTestHarmonizer

    return ReXGradientTrainDataset, ReXGradientValidDataset, ReXGradientTestDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = [f"ReXGradient{s}{k}" for s in ("Train", "Valid", "Test")
           for k in ("Harmonizer", "Dataset")]
