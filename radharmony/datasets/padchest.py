"""PadChest (BIMCV, Hospital San Juan, Alicante): 16-bit PNGs with Spanish reports.

Source of truth: ``PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz`` -- one row per
image, 36 columns, the first unnamed (a row index). Quoted fields hold newlines (numpy-printed
CUI lists wrap), so the file has 166,738 lines for 160,861 records. ``Labels`` is a Python list
literal (``"['pleural effusion', ' pneumonia']"``), parsed with :func:`ast.literal_eval` (never
``eval``); terms may carry a leading space and some lists hold ``''``: terms are stripped and
empty ones dropped (``labels`` keeps each image's terms). A missing ``Labels``, ``Report`` or
sex cell is written as the text ``nan`` (103, 116 and 4 rows). 193 terms remain (194 distinct
strings with the empty one). Images live in ``<ImageDir>/<ImageID>`` below ``base_image_dir``
(extract each ``<ImageDir>.zip`` into a folder of that number), or all in one folder
(TorchXRayVision's layout): without ``<ImageDir>`` folders the PNGs are listed and found by
name.

Label columns map exact terms only (never substrings): ``pericardial effusion`` is not an
``Effusion``, ``pseudonodule`` not a ``Nodule``, ``subcutaneous emphysema`` not ``Emphysema``.
A label is 1 when one of its terms is listed, 0 when not, NaN when the row has no ``Labels``.
PadChest has no official split; use ``get_datasets``/``get_folds`` (grouped by patient).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import MetadataError
from ..table.read_csv import read_csv_table
from ..annotations.labels import multi_hot
from ..spec import DatasetSpec, Identity
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("", "ImageID", "ImageDir", "StudyDate_DICOM", "StudyID", "PatientID", "PatientBirth",
           "PatientSex_DICOM", "ViewPosition_DICOM", "Projection", "MethodProjection",
           "Pediatric", "Modality_DICOM", "Manufacturer_DICOM", "PhotometricInterpretation_DICOM",
           "PixelRepresentation_DICOM", "PixelAspectRatio_DICOM", "SpatialResolution_DICOM",
           "BitsStored_DICOM", "WindowCenter_DICOM", "WindowWidth_DICOM", "Rows_DICOM",
           "Columns_DICOM", "XRayTubeCurrent_DICOM", "Exposure_DICOM", "ExposureInuAs_DICOM",
           "ExposureTime", "RelativeXRayExposure_DICOM", "ReportID", "Report", "MethodLabel",
           "Labels", "Localizations", "LabelsLocalizationsBySentence", "labelCUIS",
           "LocalizationsCUIS")
#: harmonized label -> the exact PadChest terms (children in PadChest's own hierarchy) that
#: make it positive
LABEL_TERMS = {
    "Atelectasis": ("atelectasis", "laminar atelectasis", "lobar atelectasis",
                    "segmental atelectasis", "total atelectasis", "round atelectasis",
                    "atelectasis basal"),
    "Cardiomegaly": ("cardiomegaly",),
    "Effusion": ("pleural effusion", "loculated pleural effusion", "loculated fissural effusion"),
    "Infiltration": ("infiltrates",),
    "Mass": ("mass", "pulmonary mass"),
    "Nodule": ("nodule", "multiple nodules"),
    "Pneumonia": ("pneumonia", "atypical pneumonia"),
    "Pneumothorax": ("pneumothorax", "hydropneumothorax"),
    "Consolidation": ("consolidation",),
    "Edema": ("pulmonary edema",),
    "Emphysema": ("emphysema",),
    "Fibrosis": ("pulmonary fibrosis",),
    "Pleural_Thickening": ("pleural thickening", "apical pleural thickening",
                           "calcified pleural thickening"),
    "Hernia": ("hiatal hernia",),
    "Fracture": ("fracture", "rib fracture", "callus rib fracture", "clavicle fracture",
                 "humeral fracture", "vertebral fracture"),
    "No Finding": ("normal",),
}
LABELS = tuple(LABEL_TERMS)
#: raw ``Projection`` -> canonical view; COSTAL (rib views) stays as written, UNK and EXCLUDE
#: have none
VIEW_MAP = {"PA": "PA", "L": "LATERAL", "AP": "AP", "AP_HORIZONTAL": "AP", "UNK": None,
            "EXCLUDE": None}
#: label -> canonical findings (radharmony.vocabulary): each label is the union of its exact
#: terms above (Pneumothorax includes hydropneumothorax, Fracture every fracture term)
LABEL_MAP = {
    "Atelectasis": (("atelectasis", "exact"),), "Cardiomegaly": (("cardiomegaly", "exact"),),
    "Effusion": (("pleural_effusion", "exact"),), "Infiltration": (("infiltration", "exact"),),
    "Mass": (("mass", "exact"),), "Nodule": (("nodule", "exact"),),
    "Pneumonia": (("pneumonia", "exact"),), "Pneumothorax": (("pneumothorax", "exact"),),
    "Consolidation": (("consolidation", "exact"),), "Edema": (("edema", "exact"),),
    "Emphysema": (("emphysema", "exact"),), "Fibrosis": (("fibrosis", "exact"),),
    "Pleural_Thickening": (("pleural_thickening", "exact"),),
    "Hernia": (("hiatal_hernia", "exact"),), "Fracture": (("fracture", "exact"),),
    "No Finding": (("no_finding", "exact"),),
}
EXTRA_COLS = ("patient_sex", "patient_birth_year", "study_date", "projection", "method_label",
              "labels")
MISSING = "nan"  # how the table writes a missing Labels, Report or sex cell (pandas' repr)
TEXT_COLS = ("Labels", "Report", "PatientSex_DICOM", "Localizations")
FILE = "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv"
ACCESS = ("BIMCV PadChest (bimcv.cipf.es/bimcv-projects/padchest), free registration: "
          "PadChest Dataset Research Use Agreement")

SPEC = DatasetSpec(
    identity=Identity("padchest"),
    key="padchest", title="PadChest", metadata_files=(f"{FILE}.gz", FILE),
    age_col="patient_birth_year", age_format="birth_year", study_date_col="study_date",
    sex_col="patient_sex",
    label_cols=LABELS, extra_cols=EXTRA_COLS, outputs=frozenset({"cls", "report"}),
    view_map=VIEW_MAP, access=ACCESS, label_map=LABEL_MAP,
    column_types={"patient_birth_year": "Int64", "study_date": "Int64", "labels": "json"},
    expected={"images": 160_861, "studies": 109_931, "patients": 67_625,
              "label_strings": 194})


# -- pure helpers ---------------------------------------------------------------------------------
def literal_list(cell: str, *, source: str = "metadata") -> list[str]:
    """A ``Labels`` cell (a Python list literal of strings) as that list, or raise."""
    try:
        value = ast.literal_eval(cell)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise MetadataError(f"{source}: a Labels cell is not a list of strings",
                            expected="a Python list literal such as \"['normal']\"",
                            found=repr(cell[:80]), fix="pass the table as released")
    return value


def terms(cell: str, *, source: str = "metadata") -> list[str]:
    """The cell's terms, stripped, empty ones dropped."""
    return [t for t in (s.strip() for s in literal_list(cell, source=source)) if t]


# -- harmonizer -----------------------------------------------------------------------------------
class PadChestHarmonizer(BaseHarmonizer):
    """PadChest: 160,861 images, 109,931 studies, 67,625 patients."""
    spec = SPEC
    metadata_description = f"the PadChest table {FILE}.gz"

    def inputs(self, path: Path) -> Inputs:
        """The table and, when the image root has no ``<ImageDir>`` folders (the flat
        layout), the image root listed for PNGs."""
        root = self.base_image_dir
        flat = root is not None and root.is_dir() and not any(
            e.name.isdigit() and e.is_dir() for e in os.scandir(root))
        return Inputs(path, folders={"images": (root if flat else None, (".png",))})

    def read(self, inputs: Inputs) -> pd.DataFrame | dict:
        """The table (as rows, so faults are located by row); in the flat layout
        ``{"table": table, "files": ImageID -> relative path}``."""
        table = read_csv_table(inputs.metadata, COLUMNS, description=self.metadata_description)
        if inputs.folders["images"][0] is None:
            return table
        return {"table": table, "files": inputs.by_name("images")}

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame | dict, *, source: str = "metadata"
                      ) -> pd.DataFrame:
        files = raw.get("files") if isinstance(raw, dict) else None
        raw = raw["table"] if isinstance(raw, dict) else raw
        raw = raw.replace({c: MISSING for c in TEXT_COLS}, None)
        report = raw["Report"].str.strip()
        df = pd.DataFrame({
            "patient_id": raw["PatientID"], "study_id": raw["StudyID"],
            "image_path": raw["ImageDir"] + "/" + raw["ImageID"] if files is None else
            raw["ImageID"].map(lambda n: files.get(n, n)),
            "view_position": raw["Projection"].astype(object),
            "report": report.where(report != "", None).astype(object)})
        labels, lists = multi_hot(raw["Labels"], lambda c: terms(c, source=source), LABEL_TERMS,
                                  source=source, column="Labels")
        df[list(LABELS)] = labels
        df["patient_sex"] = raw["PatientSex_DICOM"]
        birth = pd.to_numeric(raw["PatientBirth"].replace("None", None), errors="coerce")
        df["patient_birth_year"] = birth.round().astype("Int64")
        df["study_date"] = pd.to_numeric(raw["StudyDate_DICOM"]).astype("Int64")
        df["projection"] = raw["Projection"]
        df["method_label"] = raw["MethodLabel"]
        df["labels"] = pd.Series(lists, dtype=object)
        return df


# -- thin dataset class ----------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class PadChestDataset(BaseRadiologicalDataset):
        """PadChest; ``base_image_dir`` holds the ``<ImageDir>/`` folders (``0/`` ... ``54/``)."""
        harmonizer_class = PadChestHarmonizer

    return PadChestDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["PadChestHarmonizer", "PadChestDataset"]
