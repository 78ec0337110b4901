"""VinDr-CXR, PhysioNet release 1.0.0: all 28 labels and the official 3,000-image test set.

Source of truth: ``annotations/image_labels_{train,test}.csv`` -- ``image_id``, ``rad_id``
(train only), then 28 labels in :data:`LABELS` order (22 local + 6 global), cells ``0``/``1``.
Train has one row per (image, radiologist), three per image; test has one row per image, the
consensus of five radiologists. ``annotations/annotations_{train,test}.csv`` beside them hold
the boxes (``image_id``, ``rad_id``, ``class_name``, ``x_min`` ... ``y_max``, source DICOM
pixels; ``No finding`` rows with empty box fields) and are matched by name, in any column order.

Harmonized: one row per image; ``image_path`` is ``train/<image_id>.dicom`` or
``test/<image_id>.dicom`` under the release root (``base_image_dir``). A label is 1 when any of
the image's radiologists marked it; ``No finding`` is 1 only when every radiologist wrote it
(the rule of the Kaggle-table key ``vindr_cxr``). The test files' spelling ``Other disease``
is read as ``Other diseases``. ``patient_id`` = ``study_id`` = ``image_id`` (the release has
one image per patient and study, no patient id), so ``sample_id`` is ``<key>:<image_id>`` and
the train images join ``vindr_cxr`` and CheXmask's ``image_id`` by that id.

Unverified (no real PhysioNet file was available): the annotation files' column order and
whether ``annotations_test.csv`` carries ``rad_id`` (accepted with or without it; without it a
test box has no annotator).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.boxes import BOX_KEYS
from ..annotations.labels import decode_cells
from ..spec import DatasetSpec, Identity
from ..table.locate import find_side
from ..table.read_csv import lists_by, numeric_columns, read_table, records, \
    require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
LABELS = ("Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly",
          "Clavicle fracture", "Consolidation", "Edema", "Emphysema", "Enlarged PA", "ILD",
          "Infiltration", "Lung Opacity", "Lung cavity", "Lung cyst", "Mediastinal shift",
          "Nodule/Mass", "Pleural effusion", "Pleural thickening", "Pneumothorax",
          "Pulmonary fibrosis", "Rib fracture", "Other lesion", "COPD", "Lung tumor",
          "Pneumonia", "Tuberculosis", "Other diseases", "No finding")
LOCAL_LABELS = LABELS[:22]  # the box classes (plus "No finding" rows without a box)
NO_FINDING = "No finding"
SPELLINGS = {"Other disease": "Other diseases"}  # the test files' singular
BOX_COLUMNS = ("image_id", "class_name", *BOX_KEYS)
CELL_CODES = {"0": 0.0, "1": 1.0, "0.0": 0.0, "1.0": 1.0}
#: source label -> canonical findings (see docs/vocabulary.md); None: no canonical finding
LABEL_MAP = {
    "Aortic enlargement": (("aortic_enlargement", "exact"),),
    "Atelectasis": (("atelectasis", "exact"),),
    "Calcification": (("calcification", "exact"), ("aortic_calcification", "broader")),
    "Cardiomegaly": (("cardiomegaly", "exact"), ("enlarged_cardiomediastinum", "narrower")),
    "Clavicle fracture": (("clavicle_fracture", "exact"), ("fracture", "narrower")),
    "Consolidation": (("consolidation", "exact"),),
    "Edema": (("edema", "exact"),),
    "Emphysema": (("emphysema", "exact"),),
    "Enlarged PA": None,  # pulmonary artery enlargement: no canonical finding
    "ILD": (("interstitial_lung_disease", "exact"),),
    "Infiltration": (("infiltration", "exact"),),
    "Lung Opacity": (("lung_opacity", "exact"),),
    "Lung cavity": (("lung_lesion", "narrower"),),
    "Lung cyst": (("lung_lesion", "narrower"),),
    "Mediastinal shift": None,
    "Nodule/Mass": (("nodule_or_mass", "exact"), ("nodule", "broader"), ("mass", "broader"),
                    ("lung_lesion", "narrower")),
    "Pleural effusion": (("pleural_effusion", "exact"),),
    "Pleural thickening": (("pleural_thickening", "exact"), ("pleural_other", "narrower")),
    "Pneumothorax": (("pneumothorax", "exact"),),
    "Pulmonary fibrosis": (("fibrosis", "exact"),),
    "Rib fracture": (("rib_fracture", "exact"), ("fracture", "narrower")),
    "Other lesion": (("lung_lesion", "narrower"),),
    "COPD": (("copd", "exact"),),
    "Lung tumor": (("lung_lesion", "narrower"),),
    "Pneumonia": (("pneumonia", "exact"),),
    "Tuberculosis": (("tuberculosis", "exact"),),
    "Other diseases": None,
    "No finding": (("no_finding", "exact"),),
}
ACCESS = ("PhysioNet vindr-cxr 1.0.0 (credentialed access, PhysioNet Credentialed Health Data "
          "License 1.5.0; signed data use agreement)")
TRAIN_SPEC = DatasetSpec(
    identity=Identity("vindr_cxr"),
    label_map=LABEL_MAP, key="vindr_cxr_physionet", title="VinDr-CXR, PhysioNet release (train, 28 labels)",
    metadata_files=("annotations/image_labels_train.csv", "image_labels_train.csv"),
    label_cols=LABELS, extra_cols=("rad_ids", "split", "split_raw", "boxes"),
    outputs=frozenset({"cls", "bbox"}), id_col="study_id", box_units="pixel", access=ACCESS,
    expected={"images": 15_000, "studies": 15_000, "patients": 15_000, "rows": 45_000,
              "radiologists_per_image": 3, "radiologists": 17})
TEST_SPEC = replace(
    TRAIN_SPEC, key="vindr_cxr_test", title="VinDr-CXR, PhysioNet release (test, consensus)",
    metadata_files=("annotations/image_labels_test.csv", "image_labels_test.csv"),
    expected={"images": 3_000, "studies": 3_000, "patients": 3_000,
              "radiologists_per_image": 5})


# -- pure helpers ---------------------------------------------------------------------------------
def harmonize_labels(labels: pd.DataFrame, boxes: pd.DataFrame | None, *, split: str,
                     source: str, label_cols: tuple[str, ...] = LABELS,
                     box_classes: tuple[str, ...] | None = LOCAL_LABELS,
                     spellings: dict[str, str] = SPELLINGS) -> pd.DataFrame:
    """A VinDr image-label table (+ its box table) -> one row per image.

    ``label_cols`` are the label columns (one of them ``No finding``); ``box_classes`` the
    expected box classes (None: any; others warn); ``spellings`` renames label and box names."""
    labels = labels.rename(columns=spellings)
    require_columns(labels, ("image_id", *label_cols), source=source,
                    description="the VinDr image_labels table")
    labels = labels.dropna(subset=["image_id"])
    ids = pd.Index(pd.unique(labels["image_id"]), name="image_id")
    cells = decode_cells(labels[list(label_cols)], CELL_CODES, source=source)
    rows = ids.get_indexer(labels["image_id"])
    marked = np.zeros((len(ids), len(label_cols)), np.float32)
    np.maximum.at(marked, rows, np.nan_to_num(cells, nan=0.0))
    unanimous = np.ones(len(ids), np.float32)
    nf = label_cols.index(NO_FINDING)
    np.minimum.at(unanimous, rows, np.nan_to_num(cells[:, nf], nan=0.0))
    marked[:, nf] = unanimous
    df = pd.DataFrame({"patient_id": ids, "study_id": ids,
                       "image_path": f"{split}/" + ids + ".dicom", "view_position": None,
                       "report": None})
    df[list(label_cols)] = marked
    if "rad_id" in labels.columns:
        readers = labels[["image_id", "rad_id"]].dropna().drop_duplicates()
        readers = readers.iloc[np.lexsort((readers["rad_id"].to_numpy(),
                                           readers["rad_id"].str.len().to_numpy()))]
        df["rad_ids"] = [",".join(r) or None for r in
                         lists_by(ids, readers["image_id"], readers["rad_id"].to_numpy(object))]
    else:
        df["rad_ids"] = None
    df["split"] = split
    df["split_raw"] = split
    df["boxes"] = [[] for _ in range(len(ids))] if boxes is None else \
        box_lists(boxes, ids, source=source, box_classes=box_classes,
                                       spellings=spellings)
    return df


def box_lists(boxes: pd.DataFrame, ids: pd.Index, *, source: str,
              box_classes: tuple[str, ...] | None = LOCAL_LABELS,
              spellings: dict[str, str] = SPELLINGS) -> list[list[dict]]:
    """Every annotation row with a box as ``{"label", "annotator", x_min ... y_max}``."""
    where = f"{source} (annotations)"
    require_columns(boxes, BOX_COLUMNS, source=where, description="the VinDr-CXR annotations")
    boxes = boxes.assign(**numeric_columns(boxes, BOX_KEYS, source=where),
                         class_name=boxes["class_name"].astype(str).str.strip()
                         .replace(spellings))
    unknown = [] if box_classes is None else \
        sorted(set(boxes["class_name"]) - set(box_classes) - {NO_FINDING})
    if unknown:
        warnings.warn(f"{where}: box classes {unknown} are not this release's local labels; "
                      "they are kept as boxes", UserWarning, stacklevel=3)
    stray = sorted(set(boxes["image_id"].dropna()) - set(ids))
    if stray:
        warnings.warn(f"{where}: {len(stray)} boxed images are not in the label table and were "
                      f"dropped, e.g. {stray[0]}", UserWarning, stacklevel=3)
    rows = boxes.dropna(subset=list(BOX_KEYS))
    who = rows["rad_id"] if "rad_id" in rows.columns else [None] * len(rows)
    recs = records(label=rows["class_name"], annotator=who,
                   **{k: rows[k].to_numpy(float) for k in BOX_KEYS})
    return lists_by(ids, rows["image_id"], recs)


# -- harmonizers ----------------------------------------------------------------------------------
class VinDrPhysioNetHarmonizer(BaseHarmonizer):
    """VinDr-CXR PhysioNet train: 15,000 images, 3 of 17 radiologists each, 28 labels."""

    spec = TRAIN_SPEC
    split = "train"
    metadata_description = "the VinDr-CXR table annotations/image_labels_train.csv"

    def inputs(self, path: Path) -> Inputs:
        """The label table and the box table ``annotations_<split>.csv`` beside it."""
        box, looked = find_side((f"annotations_{self.split}.csv",), path.parent)
        return Inputs(path, {"boxes": box}, looked={"boxes": looked})

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        labels = read_table(path, description=self.metadata_description, columns=("image_id",),
                            dtype=str)
        name = f"annotations_{self.split}.csv"
        box_file = inputs.file("boxes")
        if box_file is None:
            warnings.warn(f"No {name} beside {path}: the table has no boxes", UserWarning,
                          stacklevel=3)
            return {"labels": labels, "boxes": None}
        boxes = read_table(box_file, description=f"the VinDr-CXR table {name}",
                           columns=BOX_COLUMNS, dtype={"image_id": str, "rad_id": str,
                                                       "rad_ID": str, "class_name": str})
        return {"labels": labels, "boxes": boxes}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        return harmonize_labels(raw["labels"], raw.get("boxes"), split=cls.split, source=source)


class VinDrTestHarmonizer(VinDrPhysioNetHarmonizer):
    """VinDr-CXR official test set: 3,000 images, labels by a 5-radiologist consensus."""

    spec = TEST_SPEC
    split = "test"
    metadata_description = "the VinDr-CXR table annotations/image_labels_test.csv"


# -- thin dataset classes --------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class VinDrPhysioNetDataset(BaseRadiologicalDataset):
        """VinDr-CXR PhysioNet train; ``base_image_dir`` is the release root (``1.0.0/``, holding
        ``train/``, ``test/`` and ``annotations/``)."""

        harmonizer_class = VinDrPhysioNetHarmonizer

    class VinDrTestDataset(BaseRadiologicalDataset):
        """VinDr-CXR official 3,000-image test set; ``base_image_dir`` is the release root."""

        harmonizer_class = VinDrTestHarmonizer

    return VinDrPhysioNetDataset, VinDrTestDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["VinDrPhysioNetHarmonizer", "VinDrPhysioNetDataset", "VinDrTestHarmonizer",
           "VinDrTestDataset"]
