"""BRAX (Reis et al., Sci Data 2022): 40,967 chest X-rays from Hospital Israelita Albert
Einstein, Sao Paulo, with CheXpert-style labels from Portuguese reports.

Source of truth: the release spreadsheet, ``master_spreadsheet_update.csv`` (1.1.0, read by
torchxrayvision) or ``master_spreadsheet.csv`` (the name another loader uses); both are
accepted. One row per image. Columns used: ``PngPath`` (``images/id_<PatientID>/Study_<UID>/
Series_<UID>/image-<UID>.png``, mirroring ``DicomPath`` under ``Anonymized_DICOMs/``),
``PatientID``, ``AccessionNumber`` (the study), ``ViewPosition`` (about a quarter blank),
``PatientSex``, ``PatientAge`` (5-year groups, the oldest written ``85 or more``), ``Rows``,
``Columns``, and the 14 CheXpert labels (No Finding ... Support Devices) written ``1`` / ``0``
/ ``-1`` uncertain / blank, as CheXpert writes them.

Harmonized: one row per image, ``image_path`` = ``PngPath`` under the release root
(``base_image_dir``); labels kept 1 / 0 / -1 / NaN (``uncertain=`` chooses what -1 becomes in
``cls``); ``patient_age`` 85 for ``85 or more`` (``patient_age_group`` keeps the text). The 12
thin strips (Rows/Columns aspect above 10, 19:1 to 213:1; not chest radiographs) are dropped
with a warning. When ``AccessionNumber`` is absent, the study is the ``Study_<UID>`` folder.

Unverified: the spreadsheet's column order (columns are found by name) and whether
``AccessionNumber``, ``Manufacturer`` and ``StudyDate`` are in both versions (they are
optional here). Counts: 40,967 images (torchxrayvision), 24,959 studies and 19,351 patients
(third-party).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import RowsDroppedWarning
from ..annotations.labels import UncertainLabelsMixin, decode_cells
from ..spec import DatasetSpec, Identity
from ..table.read_csv import check_cells, read_table, require_columns
from .chexpert import LABEL_MAP as CHEXPERT_LABEL_MAP
from .chexpert import LABEL_CODES, LABELS
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
REQUIRED = ("PngPath", "PatientID", "ViewPosition", "PatientSex", "PatientAge", "Rows",
            "Columns", *LABELS)
OPTIONAL = ("AccessionNumber", "DicomPath", "Manufacturer", "StudyDate")
MAX_ASPECT = 10.0
VIEW_MAP = {"PA": "PA", "AP": "AP", "L": "LATERAL", "LL": "LATERAL", "RL": "LATERAL",
            "LATERAL": "LATERAL"}
EXTRA_COLS = ("patient_sex", "patient_age", "patient_age_group", "rows", "columns",
              "dicom_path", "manufacturer", "study_date")
#: the CheXpert labeler's 14 observations, mapped as CheXpert's (radharmony.vocabulary)
LABEL_MAP = CHEXPERT_LABEL_MAP
SPEC = DatasetSpec(
    identity=Identity("brax"),  # its DICOM key (brax_dicom) has the same patients
    column_types={"patient_age": "Int64", "rows": "Int64", "columns": "Int64"},
    label_map=LABEL_MAP, key="brax", title="BRAX, Brazilian labeled chest X-ray dataset",
    metadata_files=("master_spreadsheet_update.csv", "master_spreadsheet.csv"),
    label_cols=LABELS, extra_cols=EXTRA_COLS, outputs=frozenset({"cls"}), view_map=VIEW_MAP,
    age_col="patient_age", sex_col="patient_sex",  # age: the 5-year group's lower bound
    expected={"images": 40_967, "studies": 24_959, "patients": 19_351, "thin_strips": 12},
    access=("PhysioNet brax 1.1.0, credentialed access (PhysioNet Credentialed Health Data "
            "License 1.5.0, CITI 'Data or Specimens Only Research' training)"))


# -- harmonizer -----------------------------------------------------------------------------------
class BRAXHarmonizer(BaseHarmonizer):
    """BRAX: 40,967 images of 19,351 patients."""

    spec = SPEC
    metadata_description = "the BRAX spreadsheet (master_spreadsheet_update.csv)"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_table(inputs.metadata, description=self.metadata_description, columns=REQUIRED,
                          dtype=str, keep_default_na=False, na_values=[""])

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        require_columns(raw, REQUIRED, source=source, description="the BRAX spreadsheet")
        rows = pd.to_numeric(raw["Rows"], errors="coerce")
        columns = pd.to_numeric(raw["Columns"], errors="coerce")
        aspect = np.maximum(rows, columns) / np.minimum(rows, columns)
        strip = (aspect > MAX_ASPECT).to_numpy()
        if strip.any():
            warnings.warn(f"{source}: {int(strip.sum())} thin strips (Rows/Columns aspect above "
                          f"{MAX_ASPECT:g}, not chest radiographs) dropped, e.g. "
                          f"{raw.loc[strip, 'PngPath'].iloc[0]}", RowsDroppedWarning,
                          stacklevel=2)
            raw, rows, columns = raw[~strip], rows[~strip], columns[~strip]
        path = raw["PngPath"].str.strip()
        check_cells(path.str.fullmatch(r"[^/].*\.png", case=False), path, source=source,
                    what="PngPath is not a relative .png path",
                    expected="e.g. images/id_<PatientID>/Study_<UID>/Series_<UID>/image-<UID>.png")
        folder_study = path.str.extract(r"(Study_[^/]+)/", expand=False)
        study = raw["AccessionNumber"] if "AccessionNumber" in raw.columns else folder_study
        study = study.where(study.notna(), folder_study)
        age_text = raw["PatientAge"].str.strip()
        df = pd.DataFrame({
            "patient_id": raw["PatientID"].str.strip().to_numpy(object),
            "study_id": study.to_numpy(object), "image_path": path.to_numpy(object),
            "view_position": raw["ViewPosition"].astype(object),
            "report": None})
        df[list(LABELS)] = decode_cells(raw[list(LABELS)].reset_index(drop=True), LABEL_CODES,
                                        source=source)
        df["patient_sex"] = [v if v in ("M", "F") else None for v in raw["PatientSex"]]
        df["patient_age"] = pd.array(pd.to_numeric(age_text.str.extract(r"^(\d+)", expand=False),
                                                   errors="coerce"), dtype="Int64")
        df["patient_age_group"] = age_text.to_numpy(object)
        df["rows"] = pd.array(rows, dtype="Int64")
        df["columns"] = pd.array(columns, dtype="Int64")
        for out, name in (("dicom_path", "DicomPath"), ("manufacturer", "Manufacturer"),
                          ("study_date", "StudyDate")):
            df[out] = raw[name].to_numpy(object) if name in raw.columns else None
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class BRAXDataset(UncertainLabelsMixin, BaseRadiologicalDataset):
        """BRAX; ``base_image_dir`` is the release root (holding ``images/`` and the spreadsheet).
        ``uncertain=`` (keyword): ``"keep"`` (default), ``"zeros"`` or ``"ones"``."""

        harmonizer_class = BRAXHarmonizer

    return BRAXDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["BRAXHarmonizer", "BRAXDataset"]
