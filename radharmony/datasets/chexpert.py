"""CheXpert (Stanford ML Group): 8-bit JPEGs, 14 report-mined labels with uncertainty.

Source of truth: ``train.csv`` of the release (``CheXpert-v1.0-small/`` or ``CheXpert-v1.0/``),
one row per image. ``Path`` starts with the release folder, which is ``base_image_dir`` and is
stripped: ``image_path`` is ``train/patient00001/study1/view1_frontal.jpg``. Label cells are
``1.0`` (positive), ``0.0`` (negative), ``-1.0`` (uncertain) or empty (not mentioned); the
table keeps all four apart (-1 and NaN). ``cls`` follows the dataset's ``uncertain=`` policy
(:mod:`radharmony.annotations.labels`; default ``"keep"``: -1 stays -1, missing becomes 0).

Views: ``Frontal/Lateral`` says Frontal or Lateral; ``AP/PA`` is AP or PA for frontal images,
empty for lateral ones -- and ``LL``/``RL`` on 17 rows marked Frontal. ``view_position`` is the
mapped ``AP/PA`` value when present, else ``LATERAL`` for lateral rows; both raw columns are
kept. The release's own split is by file (``train.csv`` key ``chexpert``, ``valid.csv`` key
``chexpert_valid``; same columns; the 234 validation images are not in the torchxrayvision
wheel); ``split`` comes from the path.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_csv_table
from ..annotations.labels import UncertainLabelsMixin, decode_cells
from ..spec import DatasetSpec, Identity
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
LABELS = ("No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity",
          "Lung Lesion", "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax",
          "Pleural Effusion", "Pleural Other", "Fracture", "Support Devices")
#: label -> canonical findings (radharmony.vocabulary); the CheXpert labeler files "fibrosis"
#: under Pleural Other, and its No Finding ignores Support Devices (a device, never implied absent)
LABEL_MAP = {
    "No Finding": (("no_finding", "exact"),),
    "Enlarged Cardiomediastinum": (("enlarged_cardiomediastinum", "exact"),),
    "Cardiomegaly": (("cardiomegaly", "exact"),),
    "Lung Opacity": (("lung_opacity", "exact"),),
    "Lung Lesion": (("lung_lesion", "exact"),),
    "Edema": (("edema", "exact"),),
    "Consolidation": (("consolidation", "exact"),),
    "Pneumonia": (("pneumonia", "exact"),),
    "Atelectasis": (("atelectasis", "exact"),),
    "Pneumothorax": (("pneumothorax", "exact"),),
    "Pleural Effusion": (("pleural_effusion", "exact"),),
    "Pleural Other": (("pleural_thickening", "broader"), ("fibrosis", "broader"),
                      ("pleural_other", "approximate")),
    "Fracture": (("fracture", "exact"),),
    "Support Devices": (("support_devices", "exact"),),
}
COLUMNS = ("Path", "Sex", "Age", "Frontal/Lateral", "AP/PA") + LABELS
#: positive, negative, uncertain; an empty cell is "not mentioned" (NaN)
LABEL_CODES = {"1.0": 1.0, "0.0": 0.0, "-1.0": -1.0, "1": 1.0, "0": 0.0, "-1": -1.0}
#: raw view (``AP/PA``, else ``Frontal/Lateral``) -> canonical; a frontal image without AP/PA
#: has no canonical view
VIEW_MAP = {"AP": "AP", "PA": "PA", "LL": "LATERAL", "RL": "LATERAL", "LATERAL": "LATERAL",
            "FRONTAL": None}
SEX_MAP = {"Male": "M", "Female": "F"}  # "Unknown" -> missing
SPLIT_MAP = {"train": "train", "valid": "valid"}  # folder -> split
EXTRA_COLS = ("patient_sex", "patient_age", "frontal_lateral", "ap_pa", "split", "split_raw")
ACCESS = ("Stanford AIMI, free registration: Stanford University School of Medicine CheXpert "
          "Dataset Research Use Agreement (non-commercial research)")

SPEC = DatasetSpec(
    identity=Identity("chexpert"),
    key="chexpert", title="CheXpert v1.0 (train)", metadata_files=("train.csv",),
    age_col="patient_age", sex_col="patient_sex",
    label_cols=LABELS, extra_cols=EXTRA_COLS, outputs=frozenset({"cls"}), view_map=VIEW_MAP,
    column_types={"patient_age": "Int64"}, access=ACCESS,
    expected={"images": 223_414, "studies": 187_641, "patients": 64_540}, label_map=LABEL_MAP)
VALID_SPEC = replace(SPEC, key="chexpert_valid", title="CheXpert v1.0 (valid)",
                     metadata_files=("valid.csv",),
                     expected={"images": 234, "studies": 200, "patients": 200})


# -- harmonizer -----------------------------------------------------------------------------------
class CheXpertHarmonizer(BaseHarmonizer):
    """CheXpert train: 223,414 images, 187,641 studies, 64,540 patients."""
    spec = SPEC
    metadata_description = "the CheXpert table train.csv"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_csv_table(inputs.metadata, COLUMNS, description=self.metadata_description)

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        path = raw["Path"]
        check_cells(path.str.fullmatch(r"[^/]+/(train|valid)/patient\d+/study\d+/[^/]+\.jpg"),
                    path, source=source, what="Path is not <release>/<split>/patient/study/"
                    "view.jpg", expected="e.g. CheXpert-v1.0-small/train/patient00001/study1/"
                    "view1_frontal.jpg")
        rel = path.str.replace(r"^[^/]+/", "", regex=True)
        study = rel.str.replace(r"^[^/]+/|/[^/]+$", "", regex=True)
        view = raw["AP/PA"].fillna(raw["Frontal/Lateral"])
        df = pd.DataFrame({
            "patient_id": study.str.replace(r"/.*$", "", regex=True), "study_id": study,
            "image_path": rel, "view_position": view.astype(object), "report": None})
        df[list(LABELS)] = decode_cells(raw[list(LABELS)], LABEL_CODES, source=source)
        df["patient_sex"] = raw["Sex"].map(SEX_MAP)
        df["patient_age"] = pd.to_numeric(raw["Age"]).astype("Int64")
        df["frontal_lateral"] = raw["Frontal/Lateral"]
        df["ap_pa"] = raw["AP/PA"]
        df["split_raw"] = rel.str.replace(r"/.*$", "", regex=True)
        df["split"] = df["split_raw"].map(SPLIT_MAP)
        return df


class CheXpertValidHarmonizer(CheXpertHarmonizer):
    """CheXpert validation (radiologist-labelled, no uncertain labels): 234 images."""
    spec = VALID_SPEC
    metadata_description = "the CheXpert table valid.csv"


# -- thin dataset classes --------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class CheXpertDataset(UncertainLabelsMixin, BaseRadiologicalDataset):
        """CheXpert train; ``base_image_dir`` is the release folder (``CheXpert-v1.0-small/``).

        ``uncertain=`` (keyword): ``"keep"`` (default, -1 in ``cls``), ``"zeros"`` or ``"ones"``.
        """
        harmonizer_class = CheXpertHarmonizer

    class CheXpertValidDataset(UncertainLabelsMixin, BaseRadiologicalDataset):
        """CheXpert validation split; ``base_image_dir`` is the release folder."""
        harmonizer_class = CheXpertValidHarmonizer

    return CheXpertDataset, CheXpertValidDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["CheXpertHarmonizer", "CheXpertDataset", "CheXpertValidHarmonizer",
           "CheXpertValidDataset"]
