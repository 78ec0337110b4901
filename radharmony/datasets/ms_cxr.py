"""MS-CXR (phrase grounding) and MS-CXR-T (temporal pairs) on MIMIC-CXR-JPG images.

**MS-CXR** (PhysioNet ``ms-cxr``, Boecking et al., ECCV 2022): ``MS_CXR_Local_Alignment_v1.1.0.csv``
(``v1.0.0`` names accepted), columns :data:`COLUMNS`, one row per phrase-box pair: ``label_text``
is the phrase, ``x,y,w,h`` its box in pixels of the listed JPEG (``image_width`` x
``image_height``), ``category_name`` one of 8 findings, ``split`` the authors' own split (not
MIMIC's). Harmonized: one row per image; every box is kept (normalized by the row's own image
size, ``annotator`` None) with its phrase under ``"phrase"``; ``output_bbox=True`` also gives
``bbox_phrases`` (one phrase per box). A category is 1 when the image has a box of it, else NaN
(an unboxed finding is not known absent).

**MS-CXR-T** (PhysioNet ``ms-cxr-t`` 1.0.0, Bannur et al., 2023):
``MS_CXR_T_temporal_image_classification_v1.0.0.csv``, one row per current image with its prior:
``subject_id, study_id, dicom_id, previous_study_id, previous_dicom_id`` and per finding
``<f>_progression`` (``improving`` / ``stable`` / ``worsening`` or empty). Harmonized: one row per
current image; label columns ``<f>_<class>`` (15, one-hot per finding, NaN when the finding is
unlabelled); samples carry ``prior_img`` beside ``img`` (same transform and cache).

Joins with ``mimic_cxr_jpg``: ``image_path`` ``files/p<2 digits>/p<subject>/s<study>/<dicom_id>.jpg``,
``patient_id`` the subject id, ``study_id`` the study id (no ``p``/``s``), ``sample_id``
``<key>:<dicom_id>`` -- MIMIC-CXR-JPG's values; ``base_image_dir`` is the MIMIC-CXR-JPG root.

Unverified (no real file available): MS-CXR-T's columns come from a third-party loader only;
its ``dicom_id`` may hold a ``p10/p<subject>/s<study>/<hash>`` path -- both forms are read; any
``<f>_label_quality`` columns are ignored.
"""

from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.boxes import box_record
from ..spec import DatasetSpec, Identity
from ..table.read_csv import check_cells, lists_by, numeric_columns, read_table, require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("dicom_id", "category_name", "label_text", "path", "x", "y", "w", "h",
           "image_width", "image_height", "split")
CATEGORIES = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Lung Opacity",
              "Pleural Effusion", "Pneumonia", "Pneumothorax")
FINDINGS = ("consolidation", "edema", "pleural_effusion", "pneumonia", "pneumothorax")
CLASSES = ("improving", "stable", "worsening")
PAIR_COLUMNS = ("subject_id", "study_id", "dicom_id", "previous_study_id", "previous_dicom_id")
PROGRESSION = tuple(f"{f}_{c}" for f in FINDINGS for c in CLASSES)
SPLIT_MAP = {"train": "train", "val": "valid", "validation": "valid", "test": "test"}
LABEL_MAP = {
    "Atelectasis": (("atelectasis", "exact"),), "Cardiomegaly": (("cardiomegaly", "exact"),),
    "Consolidation": (("consolidation", "exact"),), "Edema": (("edema", "exact"),),
    "Lung Opacity": (("lung_opacity", "exact"),),
    "Pleural Effusion": (("pleural_effusion", "exact"),),
    "Pneumonia": (("pneumonia", "exact"),), "Pneumothorax": (("pneumothorax", "exact"),),
}
#: a progression label says the finding is present in the current image
PAIR_LABEL_MAP = {f"{f}_{c}": ((f, "narrower"),) for f in FINDINGS for c in CLASSES}
ACCESS = "PhysioNet (credentialed access, PhysioNet Credentialed Health Data License 1.5.0)"
SPEC = DatasetSpec(
    identity=Identity("mimic_cxr_jpg"),
    label_map=LABEL_MAP, key="ms_cxr", title="MS-CXR (phrase grounding on MIMIC-CXR-JPG)",
    metadata_files=("MS_CXR_Local_Alignment_v1.1.0.csv", "MS_CXR_Local_Alignment_v1.0.0.csv"),
    label_cols=CATEGORIES, extra_cols=("dicom_id", "phrases", "split", "split_raw", "boxes"),
    column_types={"phrases": "json"},
    outputs=frozenset({"cls", "bbox"}), id_col="dicom_id", access=ACCESS + "; ms-cxr 1.1.0",
    expected={"pairs": 1_162, "patients": 851})
PAIR_SPEC = DatasetSpec(
    identity=Identity("mimic_cxr_jpg"),
    label_map=PAIR_LABEL_MAP, key="ms_cxr_t", title="MS-CXR-T (temporal image classification)",
    metadata_files=("MS_CXR_T_temporal_image_classification_v1.0.0.csv",),
    label_cols=PROGRESSION, extra_cols=("dicom_id", "prior_study_id", "prior_dicom_id",
                                        "prior_image_path", *(f + "_progression" for f in FINDINGS)),
    outputs=frozenset({"cls"}), id_col="dicom_id", access=ACCESS + "; ms-cxr-t 1.0.0",
    expected={"labels": 1_326})


# -- pure helpers ---------------------------------------------------------------------------------
def mimic_path(subject: str, study: str, dicom: str) -> str:
    """MIMIC-CXR-JPG's image path of one image (as ``mimic_cxr_jpg`` writes it)."""
    return f"files/p{subject[:2]}/p{subject}/s{study}/{dicom}.jpg"


def _ids(value: str, subject: str, study: str) -> tuple[str, str, str]:
    """``(subject, study, dicom)`` from a plain dicom id or a ``p10/p<subj>/s<study>/<id>`` path."""
    m = re.fullmatch(r"(?:files/)?p\d\d/p(\d+)/s(\d+)/([^/]+?)(?:\.jpg)?", value)
    return (m.group(1), m.group(2), m.group(3)) if m else (subject, study, value)


# -- harmonizers ----------------------------------------------------------------------------------
class MSCXRHarmonizer(BaseHarmonizer):
    """MS-CXR: 1,162 phrase-box pairs on MIMIC-CXR-JPG images (8 findings)."""

    spec = SPEC
    metadata_description = "the MS-CXR table MS_CXR_Local_Alignment_v1.1.0.csv"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_table(inputs.metadata, description=self.metadata_description, columns=COLUMNS,
                          dtype={"dicom_id": str, "path": str, "label_text": str})

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        require_columns(raw, COLUMNS, source=source, description="the MS-CXR table")
        path = raw["path"].str.strip().str.replace(r"^/+", "", regex=True)
        found = path.str.extract(r"p(\d+)/s(\d+)/[^/]+$")
        check_cells(found[0].notna(), path, source=source, what="path has no p<subject>/s<study>",
                    expected="files/p10/p10233088/s54276838/<dicom_id>.jpg")
        num = numeric_columns(raw, ("x", "y", "w", "h", "image_width", "image_height"),
                              source=source)
        ids = pd.Index(pd.unique(path))
        first = ~path.duplicated()
        recs = [dict(box_record(c, None, x / iw, y / ih, (x + w) / iw, (y + h) / ih), phrase=t)
                for c, t, x, y, w, h, iw, ih in zip(raw["category_name"], raw["label_text"],
                                                    *num.to_numpy().T)]
        df = pd.DataFrame({"patient_id": found[0][first].to_numpy(object),
                           "study_id": found[1][first].to_numpy(object), "image_path": ids,
                           "view_position": None, "report": None})
        boxes = lists_by(ids, path, np.array(recs + [None], object)[:-1])
        for c in CATEGORIES:
            df[c] = [1.0 if any(b["label"] == c for b in bs) else np.nan for bs in boxes]
        df["dicom_id"] = raw["dicom_id"][first].to_numpy(object)
        df["phrases"] = [list(dict.fromkeys(b["phrase"] for b in bs)) for bs in boxes]
        df["split_raw"] = raw["split"][first].to_numpy(object)
        df["split"] = raw["split"][first].map(SPLIT_MAP).to_numpy(object)
        df["boxes"] = boxes
        return df


class MSCXRTHarmonizer(BaseHarmonizer):
    """MS-CXR-T: 1,326 progression labels over 5 findings on current/prior image pairs."""

    spec = PAIR_SPEC
    metadata_description = "the MS-CXR-T table MS_CXR_T_temporal_image_classification_v1.0.0.csv"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_table(inputs.metadata, description=self.metadata_description, columns=PAIR_COLUMNS,
                          dtype=str)

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        require_columns(raw, PAIR_COLUMNS, source=source, description="the MS-CXR-T table")
        cur = [_ids(d, s, t) for d, s, t in zip(raw["dicom_id"], raw["subject_id"],
                                                 raw["study_id"])]
        prior = [_ids(d, s, t) for d, s, t in zip(raw["previous_dicom_id"], raw["subject_id"],
                                                   raw["previous_study_id"])]
        df = pd.DataFrame({"patient_id": [c[0] for c in cur], "study_id": [c[1] for c in cur],
                           "image_path": [mimic_path(*c) for c in cur], "view_position": None,
                           "report": None})
        text = {}
        for f in FINDINGS:
            col = f"{f}_progression"
            text[col] = raw[col].str.strip().str.lower() if col in raw.columns else \
                pd.Series([None] * len(raw), dtype=object)
            check_cells(text[col].isin(CLASSES) | text[col].isna(), raw.get(col, text[col]),
                        source=source, what=f"{col} is not a progression class",
                        expected=f"one of {list(CLASSES)} or empty")
            for c in CLASSES:
                df[f"{f}_{c}"] = np.where(text[col].isna(), np.nan,
                                          (text[col] == c).astype(np.float32))
        df["dicom_id"] = [c[2] for c in cur]
        df["prior_study_id"] = [p[1] for p in prior]
        df["prior_dicom_id"] = [p[2] for p in prior]
        df["prior_image_path"] = [mimic_path(*p) for p in prior]
        for col, values in text.items():
            df[col] = values.to_numpy(object)
        return df


# -- dataset classes ------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class MSCXRDataset(BaseRadiologicalDataset):
        """MS-CXR; ``base_image_dir`` is the MIMIC-CXR-JPG root (``files/`` under it).
        ``output_bbox=True`` adds ``bbox_phrases``, the grounded phrase of each box."""

        harmonizer_class = MSCXRHarmonizer

        def add_outputs(self, index: int, sample: dict, box) -> None:
            super().add_outputs(index, sample, box)
            if "bbox" in sample:
                chosen = self.box_selection.apply(self.rows.boxes[index])
                sample["bbox_phrases"] = [b.get("phrase") for b in chosen]

    class MSCXRTDataset(BaseRadiologicalDataset):
        """MS-CXR-T; ``base_image_dir`` is the MIMIC-CXR-JPG root. Every sample has ``img`` (the
        current image) and ``prior_img`` (the prior study's image, same transform and cache); with
        a user transform both are paths."""

        harmonizer_class = MSCXRTHarmonizer

        def _set_table(self, df: pd.DataFrame, *, derived: bool = False) -> None:
            super()._set_table(df, derived=derived)
            self._prior_paths = self.harmonized_df["prior_image_path"].to_numpy(dtype=object)

        def add_outputs(self, index: int, sample: dict, box) -> None:
            super().add_outputs(index, sample, box)
            prior = copy.copy(self)  # the same dataset, reading the prior images' paths
            prior.rows = dataclasses.replace(self.rows, paths=self._prior_paths)
            prior.__dict__.pop("_files", None)  # the prior images get their own file table
            if self.user_transform is None:
                arr, _ = prior.load_image(index)
                sample["prior_img"] = self.default_transform.to_tensor(arr, self.dtype)
            else:
                sample["prior_img"] = str(prior.image_file(index))

    return MSCXRDataset, MSCXRTDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["MSCXRHarmonizer", "MSCXRDataset", "MSCXRTHarmonizer", "MSCXRTDataset"]
