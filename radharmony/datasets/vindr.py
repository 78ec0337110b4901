"""VinDr-CXR (VinBigData): 15,000 training DICOMs, each read by 3 of 17 radiologists, with boxes.

Source of truth: the VinBigData competition's ``train.csv`` (the same table torchxrayvision
ships as ``vinbigdata-train.csv.gz``): one row per (image, radiologist, finding) with columns
``image_id, class_name, class_id, rad_id, x_min, y_min, x_max, y_max``. A radiologist who saw
nothing writes one ``No finding`` row with empty box fields. Boxes are in the original DICOM's
pixels (the table has no image size), so the spec declares ``box_units="pixel"``.

Harmonized: one row per image (``<image_id>.dicom`` under the ``train/`` folder). A finding's
label is 1 when at least one of the image's radiologists marked it, else 0; ``No finding`` is 1
only when every radiologist wrote it. Every box is kept with its ``rad_id`` as annotator (no
merging; see :mod:`radharmony.annotations.boxes`). The table has no patient id and one image
per patient and study, so the image id serves as both; no view position is recorded per image.
The PhysioNet release's ``annotations_train.csv`` has the same columns less ``class_id`` and
more local labels: those are kept as boxes and listed in a warning.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..spec import DatasetSpec, Identity
from ..annotations.boxes import BOX_KEYS
from ..table.read_csv import lists_by, numeric_columns, read_table, records, require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("image_id", "class_name", "class_id", "rad_id", "x_min", "y_min", "x_max", "y_max")
REQUIRED = ("image_id", "class_name", "rad_id", "x_min", "y_min", "x_max", "y_max")
FINDINGS = ("Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly",
            "Consolidation", "ILD", "Infiltration", "Lung Opacity", "Nodule/Mass",
            "Other lesion", "Pleural effusion", "Pleural thickening", "Pneumothorax",
            "Pulmonary fibrosis")  # class_id 0..13 in this order
NO_FINDING = "No finding"  # class_id 14
#: label -> canonical findings (radharmony.vocabulary). Readers box the most specific class, so
#: "Lung Opacity" is the residual opacity (implies lung_opacity; its 0 excludes nothing);
#: "Nodule/Mass" is the compound; "Other lesion" may be anywhere (unmapped)
LABEL_MAP = {
    "Aortic enlargement": (("aortic_enlargement", "exact"),),
    "Atelectasis": (("atelectasis", "exact"),), "Calcification": (("calcification", "exact"),),
    "Cardiomegaly": (("cardiomegaly", "exact"),), "Consolidation": (("consolidation", "exact"),),
    "ILD": (("interstitial_lung_disease", "exact"),),
    "Infiltration": (("infiltration", "exact"),), "Lung Opacity": (("lung_opacity", "narrower"),),
    "Nodule/Mass": (("nodule_or_mass", "exact"),), "Other lesion": None,
    "Pleural effusion": (("pleural_effusion", "exact"),),
    "Pleural thickening": (("pleural_thickening", "exact"),),
    "Pneumothorax": (("pneumothorax", "exact"),), "Pulmonary fibrosis": (("fibrosis", "exact"),),
    "No finding": (("no_finding", "exact"),),
}
SPEC = DatasetSpec(
    identity=Identity("vindr_cxr"),
    key="vindr_cxr", title="VinDr-CXR (VinBigData training set)",
    metadata_files=("train.csv", "vinbigdata-train.csv.gz", "vinbigdata-train.csv",
                    "annotations_train.csv"),
    label_cols=(*FINDINGS, NO_FINDING), extra_cols=("rad_ids",),
    outputs=frozenset({"cls", "bbox"}), view_map={}, label_map=LABEL_MAP,
    expected={"images": 15_000, "studies": 15_000, "patients": 15_000, "boxes": 36_096,
              "radiologists_per_image": 3, "radiologists": 17, "rows": 67_914},
    access=("PhysioNet vindr-cxr 1.0.0 (credentialed, PhysioNet Restricted Health Data "
            "License 1.0.0) or Kaggle 'vinbigdata-chest-xray-abnormalities-detection' "
            "(competition rules)"),
    box_units="pixel")


# -- harmonizer -----------------------------------------------------------------------------------
class VinDrCXRHarmonizer(BaseHarmonizer):
    """VinDr-CXR training set: 15,000 images, 36,096 boxes by 17 radiologists (3 per image)."""

    spec = SPEC
    metadata_description = "the VinDr-CXR annotation table (train.csv)"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_table(inputs.metadata, description=self.metadata_description, columns=REQUIRED,
                          dtype={"image_id": str, "class_name": str, "rad_id": str})

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        require_columns(raw, REQUIRED, source=source, description="the VinDr-CXR table")
        raw = raw.dropna(subset=["image_id"])
        raw = raw.assign(**numeric_columns(raw, BOX_KEYS, source=source))
        ids = pd.Index(pd.unique(raw["image_id"]), name="image_id")
        names = raw["class_name"].astype(str).str.strip()
        unknown = sorted(set(names) - set(SPEC.label_cols))
        if unknown:
            warnings.warn(f"{source}: findings {unknown} are not VinDr-CXR's 15 global "
                          f"labels; they are kept as boxes only", stacklevel=2)
        rows = ids.get_indexer(raw["image_id"])
        finding = pd.Index(FINDINGS).get_indexer(names)
        marked = np.zeros((len(ids), len(FINDINGS)), np.float32)
        marked[rows[finding >= 0], finding[finding >= 0]] = 1.0
        any_finding = np.zeros(len(ids), bool)
        any_finding[rows[(names != NO_FINDING).to_numpy()]] = True
        df = pd.DataFrame({"patient_id": ids, "study_id": ids, "image_path": ids + ".dicom",
                           "view_position": None, "report": None})
        df[list(FINDINGS)] = marked
        df[NO_FINDING] = (~any_finding).astype(np.float32)
        readers = raw[["image_id", "rad_id"]].dropna().drop_duplicates()
        readers = readers.iloc[np.lexsort((readers["rad_id"].to_numpy(),
                                           readers["rad_id"].str.len().to_numpy()))]
        df["rad_ids"] = [",".join(r) for r in lists_by(ids, readers["image_id"],
                                                       readers["rad_id"].to_numpy(object))]
        df["boxes"] = _boxes_per_image(raw.assign(class_name=names), ids)
        return df


def _boxes_per_image(raw: pd.DataFrame, ids: pd.Index) -> list[list[dict]]:
    """Every row with a box as ``{"label", "annotator", x_min, y_min, x_max, y_max}``."""
    rows = raw.dropna(subset=list(BOX_KEYS))
    recs = records(label=rows["class_name"], annotator=rows["rad_id"],
                   **{k: rows[k].to_numpy(float) for k in BOX_KEYS})
    return lists_by(ids, rows["image_id"], recs)


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class VinDrCXRDataset(BaseRadiologicalDataset):
        """VinDr-CXR training set; ``base_image_dir`` is the folder of ``<image_id>.dicom`` files
        (``train/``); ``train.csv`` is found beside or above it."""

        harmonizer_class = VinDrCXRHarmonizer

    return VinDrCXRDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["VinDrCXRHarmonizer", "VinDrCXRDataset"]
