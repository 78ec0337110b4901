"""Stony Brook RALO (2021): 2,373 COVID-19 chest radiographs with two lung-opacity scores each.

Source of truth: ``ralo-dataset-metadata.csv`` (Zenodo 10.5281/zenodo.4633999) beside the
folder ``CXR_images_scored/``. The table has two header lines: the first groups the columns
by reader, the second names them, so each reader's score columns repeat (pandas reads the
second reader's as ``Total GEOGRAPHIC.1``, ``Total OPACITY.1``). Per reader, the RALO scores
(Cohen et al., Cureus 2020; the authors' ``covid-severity`` page): **geographic extent**, per
lung 0 none, 1 <25 %, 2 25-50 %, 3 50-75 %, 4 >75 % involvement by ground glass or
consolidation, totalled over both lungs (0-8); **opacity**, per lung 0 none, 1 ground glass,
2 consolidation, 3 mixed with >50 % consolidation, 4 white-out, totalled (0-8). The images are
``CXR_images_scored/<row>.jpg``, numbered by the row's position in the table (0-based; as
torchxrayvision's loader reads them), all AP.

Only the columns torchxrayvision's loader uses are verified (``Subject_ID``, ``Exam_DateTime``
``YYYYMMDD_...``, the two readers' ``Total GEOGRAPHIC`` / ``Total OPACITY``): the harmonizer
warns, naming the file, that the rest of the header is kept unread.

Harmonized: one row per image; the two readers' mean scores as the ``reg`` output,
``lung_extent_score`` and ``lung_opacity_score`` (0-8 in half steps; score them with
``regression_scores(..., ordinal=True)`` after rounding, or as regression); each reader's
totals as extra columns.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table, require_columns
from ..spec import DatasetSpec
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
SCORES = {"lung_extent_score": "Total GEOGRAPHIC", "lung_opacity_score": "Total OPACITY"}
#: each reader's columns as pandas names them (the second reader's repeat with ".1")
READERS = {1: "", 2: ".1"}
COLUMNS = ("Subject_ID", "Exam_DateTime") + tuple(
    col + suffix for suffix in READERS.values() for col in SCORES.values())
IMAGE_FOLDER = "CXR_images_scored"
READER_COLS = tuple(f"{name}_reader{r}" for r in READERS for name in SCORES)
EXTRA_COLS = tuple(SCORES) + READER_COLS + ("exam_datetime", "study_date")
COLUMN_TYPES = {c: "float64" for c in READER_COLS}
ACCESS = ("Zenodo 10.5281/zenodo.4633999 (Stony Brook Medicine COVID-19 positive cases, "
          "RALO scores; the record's terms); cite Cohen et al., Cureus 2020")

SPEC = DatasetSpec(
    key="ralo", title="Stony Brook RALO (lung opacity scores)",
    metadata_files=("ralo-dataset-metadata.csv",), extra_cols=EXTRA_COLS,
    reg_cols=tuple(SCORES), outputs=frozenset({"reg"}), column_types=COLUMN_TYPES,
    view_map={"AP": "AP"}, access=ACCESS, expected={"images": 2_373})


# -- harmonizer -----------------------------------------------------------------------------------
class RALOHarmonizer(BaseHarmonizer):
    """RALO: the two-line-header score table; images named by row."""

    spec = SPEC
    metadata_description = "the RALO score table (ralo-dataset-metadata.csv)"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        table = read_table(inputs.metadata, description=self.metadata_description,
                           columns=COLUMNS, skiprows=1, dtype=str, keep_default_na=False)
        rest = [c for c in table.columns if c not in COLUMNS]
        if rest:
            warnings.warn(f"{inputs.metadata}: {len(rest)} columns of the RALO table are kept "
                          f"unread (their meaning is not verified: {rest[:6]}...); the "
                          "scores come from the two readers' Total GEOGRAPHIC / Total OPACITY",
                          UserWarning, stacklevel=2)
        return table[list(COLUMNS)]

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        require_columns(raw, COLUMNS, source=source, description="the RALO table")
        subject = raw["Subject_ID"].str.strip()
        when = raw["Exam_DateTime"].str.strip()
        check_cells(when.str.fullmatch(r"\d{8}(_.*)?"), when, source=source,
                    what="Exam_DateTime is not YYYYMMDD_...", expected="e.g. 20200402_103000")
        out = pd.DataFrame({"patient_id": subject, "study_id": subject + "_" + when,
                            "image_path": [f"{IMAGE_FOLDER}/{i}.jpg" for i in range(len(raw))],
                            "view_position": "AP", "report": None})
        readers = {}
        for r, suffix in READERS.items():
            for name, col in SCORES.items():
                text = raw[col + suffix].str.strip()
                value = pd.to_numeric(text.where(text.ne("")), errors="coerce")
                check_cells((value.between(0, 8) | text.eq("")), text, source=source,
                            what=f"{col + suffix} is not a score 0-8", expected="0 to 8")
                readers[f"{name}_reader{r}"] = value.astype(np.float64)
        for name in SCORES:  # the readers' mean; unknown when a reader did not score it
            out[name] = (readers[f"{name}_reader1"] + readers[f"{name}_reader2"]) / 2
        for col in READER_COLS:
            out[col] = readers[col]
        out["exam_datetime"] = when
        out["study_date"] = when.str[:8]
        return out


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class RALODataset(BaseRadiologicalDataset):
        """RALO; ``base_image_dir`` holds ``CXR_images_scored/`` (and the table).
        ``output_reg=True`` gives ``reg`` (2,): the geographic extent and opacity scores,
        0-8, the two readers' mean."""

        harmonizer_class = RALOHarmonizer

    return RALODataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RALOHarmonizer", "RALODataset"]
