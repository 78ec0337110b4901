"""RANZCR CLiP (Kaggle, 2021): catheter and tube positions on 30,083 JPEGs, with traced lines.

Source of truth: ``train.csv``, one row per image, 13 columns in :data:`COLUMNS` order
(``StudyInstanceUID``, 11 labels grouped ETT, NGT, CVC, then Swan-Ganz, ``PatientID``), cells
``0``/``1``. ``StudyInstanceUID`` names the image (``train/<uid>.jpg``); ``PatientID`` is real
and groups the splits. ``train_annotations.csv`` beside it (``StudyInstanceUID,label,data``)
has one row per traced line: ``data`` is a list of ``[x, y]`` points in the JPEG's pixels; an
image has 0..n lines, several of one device possible.

Harmonized: one row per image; ``lines`` keeps each image's polylines as
``{"label", "points"}``. ``output_mask=True`` draws them at the JPEG's size (read from its
header) with thickness :data:`LINE_THICKNESS` (15 px, the width of the challenge's starter
code), pixel value = 1 + the line label's index in :data:`LABELS` (0 = background; a later
line overwrites an earlier one where they cross). Images without traced lines give an empty
mask. Unverified: the counts of patients and of annotation rows (not published).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import MetadataError
from ..annotations.labels import decode_cells
from ..cells import parse_literal
from ..spec import DatasetSpec
from ..table.locate import find_optional
from ..table.read_csv import lists_by, read_csv_table, read_table, records
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
LABELS = ("ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal",
          "NGT - Borderline", "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal",
          "CVC - Borderline", "CVC - Normal", "Swan Ganz Catheter Present")
COLUMNS = ("StudyInstanceUID", *LABELS, "PatientID")
LINE_COLUMNS = ("StudyInstanceUID", "label", "data")
LINE_FILE = "train_annotations.csv"
LINE_THICKNESS = 15
CELL_CODES = {"0": 0.0, "1": 1.0}
#: every position label implies a device is present
LABEL_MAP = {k: (("support_devices", "narrower"),) for k in LABELS}
ACCESS = "Kaggle 'ranzcr-clip-catheter-line-classification' (competition rules, non-commercial)"
SPEC = DatasetSpec(
    label_map=LABEL_MAP, key="ranzcr_clip", title="RANZCR CLiP (train)", metadata_files=("train.csv",),
    label_cols=LABELS, extra_cols=("lines",), column_types={"lines": "json"}, outputs=frozenset({"cls", "mask"}),
    id_col="study_id", access=ACCESS, expected={"images": 30_083, "studies": 30_083})


# -- pure helpers ---------------------------------------------------------------------------------
def parse_points(text, *, where: str) -> list[list[int]]:
    """A ``data`` cell (``"[[1487, 1279], [1477, 1168]]"``) -> list of ``[x, y]`` points."""
    try:
        points = parse_literal(text) if isinstance(text, str) else None
        ok = isinstance(points, list) and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and
            all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in p)
            for p in points)
    except ValueError:
        ok = False
    if not ok:
        raise MetadataError(f"{where}: data is not a list of [x, y] points",
                            expected="e.g. [[1487, 1279], [1477, 1168]]", found=repr(text)[:80],
                            fix=f"re-download {LINE_FILE}")
    return [[float(x), float(y)] for x, y in points]


def draw_lines(lines, shape: tuple[int, int]) -> np.ndarray:
    """uint8 ``shape`` mask: each line drawn with value 1 + its label's index in LABELS."""
    import cv2  # here: the harmonizer below imports this module without the image stack

    mask = np.zeros(shape, np.uint8)
    for line in lines:
        pts = np.round(np.asarray(line["points"], np.float64)).astype(np.int32).reshape(-1, 1, 2)
        value = LABELS.index(line["label"]) + 1 if line["label"] in LABELS else 255
        cv2.polylines(mask, [pts], False, int(value), thickness=LINE_THICKNESS)
    return mask


# -- harmonizer -----------------------------------------------------------------------------------
class RANZCRHarmonizer(BaseHarmonizer):
    """RANZCR CLiP train: 30,083 images with 11 position labels and real patient ids."""

    spec = SPEC
    metadata_description = "the RANZCR CLiP table train.csv"

    def inputs(self, path: Path) -> Inputs:
        """The label table and the traced-line table beside it."""
        return Inputs(path, {"lines": find_optional((LINE_FILE,), path.parent)})

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        table = read_csv_table(path, COLUMNS, description=self.metadata_description)
        line_file = inputs.file("lines")
        if line_file is None:
            warnings.warn(f"No {LINE_FILE} beside {path}: no traced lines (masks are empty)",
                          UserWarning, stacklevel=3)
            return {"table": table, "lines": None}
        lines = read_table(line_file, description=f"the RANZCR table {LINE_FILE}",
                           columns=LINE_COLUMNS, dtype=str, keep_default_na=False)
        return {"table": table, "lines": lines}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        t = raw["table"]
        uid = t["StudyInstanceUID"].str.strip()
        df = pd.DataFrame({"patient_id": t["PatientID"].str.strip(), "study_id": uid,
                           "image_path": uid + ".jpg", "view_position": None, "report": None})
        df[list(LABELS)] = decode_cells(t[list(LABELS)], CELL_CODES, source=source)
        lines = raw.get("lines")
        if lines is None:
            df["lines"] = [[] for _ in range(len(df))]
            return df
        where = f"{source} ({LINE_FILE})"
        unknown = sorted(set(lines["label"]) - set(LABELS))
        if unknown:
            warnings.warn(f"{where}: line labels {unknown} are not RANZCR's 11; they are drawn "
                          "with mask value 255", UserWarning, stacklevel=2)
        points = [parse_points(d, where=f"{where}, row {i}") for i, d in enumerate(lines["data"])]
        recs = records(label=lines["label"], points=points)
        df["lines"] = lists_by(pd.Index(uid), lines["StudyInstanceUID"].str.strip(), recs)
        return df


# -- dataset --------------------------------------------------------------------------------------
def _as_list(value) -> list:
    if isinstance(value, str):
        return parse_literal(value) if value.strip() else []
    return [] if value is None or isinstance(value, float) else list(value)


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class RANZCRDataset(BaseRadiologicalDataset):
        """RANZCR CLiP train; ``base_image_dir`` is the ``train/`` folder of ``<uid>.jpg`` files
        (``train.csv`` and ``train_annotations.csv`` beside or above it). ``output_mask=True``
        gives the traced lines as a label mask (see the module docstring)."""

        harmonizer_class = RANZCRHarmonizer

        def source_mask(self, index: int) -> np.ndarray:
            from PIL import Image

            with Image.open(self.image_file(index)) as im:  # header only: the JPEG's size
                width, height = im.size
            return draw_lines(_as_list(self.harmonized_df["lines"].iat[index]), (height, width))

    return RANZCRDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RANZCRHarmonizer", "RANZCRDataset"]
