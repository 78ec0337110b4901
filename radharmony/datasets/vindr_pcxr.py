"""VinDr-PCXR (PhysioNet 1.0.0): 9,125 pediatric chest DICOMs, 15 diseases, boxes for 36 findings.

Source of truth: ``image_labels_{train,test}.csv`` at the **release root** (not under
``annotations/`` as in VinDr-CXR): ``image_id``, ``rad_ID`` (capital ID), then 15 labels in
:data:`LABELS` order, spelled as in the CSV (``Brocho-pneumonia``, ``Diagphramatic hernia``:
the paper's corrected names are not used), cells ``1.0``/``0.0``. ``annotations_{train,test}.csv``
beside them hold the boxes (``class_name``, ``x_min`` ... ``y_max`` in source DICOM pixels;
``No finding`` rows with empty box fields), read by column name.

Harmonized as VinDr-CXR's PhysioNet release (:mod:`radharmony.datasets.vindr_physionet`): one
row per image, ``image_path`` ``train/<image_id>.dicom`` / ``test/<image_id>.dicom`` under the
release root; a label is 1 when any reader marked it, ``No finding`` only when all did (one
radiologist per scan, so this is that reader's label). The release has no patient or study id:
``patient_id`` = ``study_id`` = ``image_id`` (each image its own group).

Unverified (no real file available): the annotation files' columns (assumed VinDr-CXR's, with
``rad_id`` or ``rad_ID``, both accepted) and the exact spellings of the 36 box classes (any
class is kept, none is warned about).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..spec import DatasetSpec
from .vindr_physionet import VinDrPhysioNetHarmonizer, harmonize_labels
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
LABELS = ("No finding", "Bronchitis", "Brocho-pneumonia", "Other disease", "Bronchiolitis",
          "Situs inversus", "Pneumonia", "Pleuro-pneumonia", "Diagphramatic hernia",
          "Tuberculosis", "Congenital emphysema", "CPAM", "Hyaline membrane disease",
          "Mediastinal tumor", "Lung tumor")
READER_ALIASES = {"rad_ID": "rad_id"}
#: published per-label positives of image_labels_train.csv / _test.csv
LABEL_COUNTS = {"train": {"No finding": 5_143, "Bronchitis": 842, "Pneumonia": 392},
                "test": {"No finding": 907, "Bronchitis": 174, "Pneumonia": 89}}
LABEL_MAP = {
    "No finding": (("no_finding", "exact"),),
    "Bronchitis": None,
    "Brocho-pneumonia": (("pneumonia", "narrower"),),
    "Other disease": None,
    "Bronchiolitis": None,
    "Situs inversus": None,
    "Pneumonia": (("pneumonia", "exact"),),
    "Pleuro-pneumonia": (("pneumonia", "narrower"),),
    "Diagphramatic hernia": None,  # diaphragmatic, not the hiatal hernia of the vocabulary
    "Tuberculosis": (("tuberculosis", "exact"),),
    "Congenital emphysema": (("emphysema", "narrower"),),
    "CPAM": (("lung_lesion", "narrower"),),
    "Hyaline membrane disease": None,
    "Mediastinal tumor": None,
    "Lung tumor": (("lung_lesion", "narrower"),),
}
ACCESS = ("PhysioNet vindr-pcxr 1.0.0 (restricted access, PhysioNet Restricted Health Data "
          "License 1.5.0; signed data use agreement)")
TRAIN_SPEC = DatasetSpec(
    label_map=LABEL_MAP, key="vindr_pcxr", title="VinDr-PCXR (train, pediatric)",
    metadata_files=("image_labels_train.csv",), label_cols=LABELS,
    extra_cols=("rad_ids", "split", "split_raw", "boxes"), outputs=frozenset({"cls", "bbox"}),
    id_col="study_id", box_units="pixel", access=ACCESS,
    expected={"images": 7_728, "studies": 7_728, "patients": 7_728, "multi_label": 223})
TEST_SPEC = replace(TRAIN_SPEC, key="vindr_pcxr_test", title="VinDr-PCXR (test, pediatric)",
                    metadata_files=("image_labels_test.csv",),
                    expected={"images": 1_397, "studies": 1_397, "patients": 1_397,
                              "multi_label": 41})


# -- harmonizers ----------------------------------------------------------------------------------
class VinDrPCXRHarmonizer(VinDrPhysioNetHarmonizer):
    """VinDr-PCXR train: 7,728 pediatric images, one radiologist each, 15 labels."""

    spec = TRAIN_SPEC
    split = "train"
    metadata_description = "the VinDr-PCXR table image_labels_train.csv"

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        return harmonize_labels(raw["labels"].rename(columns=READER_ALIASES),
                                None if raw.get("boxes") is None else
                                raw["boxes"].rename(columns=READER_ALIASES),
                                split=cls.split, source=source, label_cols=LABELS,
                                box_classes=None, spellings={})


class VinDrPCXRTestHarmonizer(VinDrPCXRHarmonizer):
    """VinDr-PCXR test: 1,397 pediatric images."""

    spec = TEST_SPEC
    split = "test"
    metadata_description = "the VinDr-PCXR table image_labels_test.csv"


# -- thin dataset classes --------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class VinDrPCXRDataset(BaseRadiologicalDataset):
        """VinDr-PCXR train; ``base_image_dir`` is the release root (``train/``, ``test/`` and the
        CSVs)."""

        harmonizer_class = VinDrPCXRHarmonizer

    class VinDrPCXRTestDataset(BaseRadiologicalDataset):
        """VinDr-PCXR test; ``base_image_dir`` is the release root."""

        harmonizer_class = VinDrPCXRTestHarmonizer

    return VinDrPCXRDataset, VinDrPCXRTestDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["VinDrPCXRHarmonizer", "VinDrPCXRDataset", "VinDrPCXRTestHarmonizer",
           "VinDrPCXRTestDataset"]
