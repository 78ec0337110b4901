"""EmoryCXR v2 (Emory HITI lab): de-identified chest radiographs of Emory Healthcare with
study-level CheXpert-style labels and de-identified reports.

Layout (as its holders describe it; the collection is not public)::

    EmoryCXRv2/DEID_PNG/<empi_anon>/<AccessionNumber_anon>/<SOP>.png   <- base_image_dir
    EmoryCXRv2/TABLES/metadata.csv        one row per image (the source of truth)
    EmoryCXRv2/TABLES/finding_labels.csv  one row per study: AccessionNumber_anon + 14 labels
    EmoryCXRv2/TABLES/reports.csv         one row per study: AccessionNumber_anon, deid_report

``metadata.csv`` columns read: ``empi_anon`` (the patient), ``AccessionNumber_anon`` (the
study), ``ImagePath`` (``<empi_anon>/<AccessionNumber_anon>/<SOP>.png`` under ``DEID_PNG/``),
and when present ``ViewPosition``, ``Sex``, ``Age``, ``BMI``, ``Race``, ``Ethnicity``,
``Frontal``, ``InstitutionName_anon``, ``StudyDate_anon``. The label table holds the 14 CheXpert
observations (``No Finding`` ... ``Support Devices``), ``1`` / ``0`` / empty (not mentioned; this
release has no ``-1``, which would still be read as uncertain).

Harmonized: one row per image; every image of a study carries its study's labels and report
(an accession without a label row has NaN labels, without a report row no report).
``patient_age`` is the ``Age`` column in years, ``patient_sex`` ``M``/``F``, ``frontal`` 1 / 0
(``True``/``False`` in the file).

Unverified (no real file available; the only source is the reference library's loader and
page): every column name and the value spellings of ``Sex`` and ``Frontal``. Reading warns
(``UnverifiedFormatWarning``) naming ``metadata.csv``. Counts are the reference library's
rounded figures (~2.4 M images, ~360 K patients).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.labels import UncertainLabelsMixin, decode_cells
from ..errors import warn_unverified
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table, require_columns
from .chexpert import LABEL_CODES, LABELS
from .chexpert import LABEL_MAP as CHEXPERT_LABEL_MAP
from .mimic import VIEW_MAP
from .report_labels import ReportLabelsDataset, ReportLabelsHarmonizer
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
STUDY = "AccessionNumber_anon"
REQUIRED = ("empi_anon", STUDY, "ImagePath")
#: optional metadata column -> the harmonized extra column
OPTIONAL = {"Sex": "patient_sex", "Age": "patient_age", "BMI": "bmi", "Race": "race",
            "Ethnicity": "ethnicity", "Frontal": "frontal",
            "InstitutionName_anon": "institution", "StudyDate_anon": "study_date"}
SIDE_FILES = {"labels": "finding_labels.csv", "reports": "reports.csv"}  # beside metadata.csv
SEX_MAP = {"M": "M", "F": "F", "MALE": "M", "FEMALE": "F"}
FRONTAL_MAP = {"TRUE": 1, "1": 1, "1.0": 1, "Y": 1, "YES": 1, "FALSE": 0, "0": 0, "0.0": 0, "N": 0,
               "NO": 0}
#: the CheXpert labeler's 14 observations, mapped as CheXpert's (radharmony.vocabulary)
LABEL_MAP = CHEXPERT_LABEL_MAP
SPEC = DatasetSpec(
    key="emory_cxr", title="EmoryCXR v2",
    metadata_files=("TABLES/metadata.csv",), label_cols=LABELS,
    label_map=LABEL_MAP, extra_cols=tuple(OPTIONAL.values()),
    outputs=frozenset({"cls", "report"}), view_map=VIEW_MAP,
    column_types={"patient_age": "float64", "bmi": "float64", "frontal": "Int64"},
    age_col="patient_age", sex_col="patient_sex",
    expected={"images": 2_400_000, "patients": 360_000},  # the reference library's rounding
    access="Emory HITI lab; internal (Emory Healthcare data use agreement), not public")


# -- harmonizer -----------------------------------------------------------------------------------
class EmoryCXRHarmonizer(ReportLabelsHarmonizer, BaseHarmonizer):
    """EmoryCXR v2: ~2.4 M images of ~360 K patients, study labels and reports."""

    spec = SPEC
    metadata_description = "the EmoryCXR v2 image table TABLES/metadata.csv"

    def inputs(self, path: Path) -> Inputs:
        """``metadata.csv`` and, beside it (only: the names are generic), the label and report
        tables."""
        return Inputs(path, {role: path.parent / name if (path.parent / name).is_file() else None
                             for role, name in SIDE_FILES.items()})

    def read(self, inputs: Inputs) -> dict:
        warn_unverified(inputs.metadata, "the EmoryCXR column list (metadata, labels, "
                                         "reports) is")
        raw = {"metadata": read_table(inputs.metadata, description=self.metadata_description,
                                      columns=REQUIRED, dtype=str, keep_default_na=False,
                                      na_values=[""])}
        for role, name in SIDE_FILES.items():
            found = inputs.file(role)
            raw[role] = None if found is None else read_table(
                found, description=f"the EmoryCXR {name}", columns=(STUDY,), dtype=str,
                keep_default_na=False, na_values=[""])
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        meta = raw["metadata"]
        require_columns(meta, REQUIRED, source=source, description="the EmoryCXR metadata")
        path = meta["ImagePath"].str.strip()
        check_cells(path.str.fullmatch(r"[^/].*\.png", case=False), path, source=source,
                    what="ImagePath is not a relative .png path",
                    expected="<empi_anon>/<AccessionNumber_anon>/<SOP>.png")
        study = meta[STUDY].str.strip()
        df = pd.DataFrame({"patient_id": meta["empi_anon"].str.strip().to_numpy(object),
                           "study_id": study.to_numpy(object), "image_path": path.to_numpy(object),
                           "view_position": meta["ViewPosition"].to_numpy(object)
                           if "ViewPosition" in meta.columns else None,
                           "report": _per_study(raw.get("reports"), "deid_report", study)})
        df["report"] = df["report"].map(lambda t: (t.strip() or None) if isinstance(t, str)
                                        else None)
        labels = raw.get("labels")
        if labels is None:
            df[list(LABELS)] = np.float32(np.nan)
        else:
            require_columns(labels, (STUDY, *LABELS), source=source,
                            description="the EmoryCXR finding_labels.csv")
            per_study = labels.assign(**{STUDY: labels[STUDY].str.strip()}) \
                .drop_duplicates(STUDY).set_index(STUDY)[list(LABELS)]
            values = decode_cells(per_study.reset_index(drop=True), LABEL_CODES, source=source)
            df[list(LABELS)] = pd.DataFrame(values, index=per_study.index).reindex(study) \
                .to_numpy(np.float32)
        for name, out in OPTIONAL.items():
            df[out] = meta[name].to_numpy(object) if name in meta.columns else None
        df["patient_sex"] = df["patient_sex"].map(
            lambda s: SEX_MAP.get(str(s).strip().upper()) if isinstance(s, str) else None)
        df["frontal"] = pd.array([FRONTAL_MAP.get(str(v).strip().upper()) if isinstance(v, str)
                                  else None for v in df["frontal"]], dtype="Int64")
        for out in ("patient_age", "bmi"):
            df[out] = pd.to_numeric(df[out], errors="coerce").astype("float64")
        return df


def _per_study(table: pd.DataFrame | None, column: str, study: pd.Series) -> np.ndarray:
    """``table[column]`` of each image's study (None where the study has no row)."""
    if table is None or column not in table.columns:
        return np.full(len(study), None, object)
    per = table.assign(**{STUDY: table[STUDY].str.strip()}).drop_duplicates(STUDY)
    return per.set_index(STUDY)[column].reindex(study).to_numpy(object)


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class EmoryCXRDataset(UncertainLabelsMixin, ReportLabelsDataset, BaseRadiologicalDataset):
        """EmoryCXR v2; ``base_image_dir`` is ``DEID_PNG/`` (the tables are found in
        ``TABLES/`` beside it)."""

        harmonizer_class = EmoryCXRHarmonizer

    return EmoryCXRDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["EmoryCXRHarmonizer", "EmoryCXRDataset"]
