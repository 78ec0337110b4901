"""CXR-LT (PhysioNet ``cxr-lt-iccv-workshop-cvamd`` 2.0.0): long-tailed label overlays on
MIMIC-CXR-JPG -- 45 labels (CXR-LT 2024, key ``cxr_lt``) and 26 labels (CXR-LT 2023, key
``cxr_lt_2023``) for the 377,110 MIMIC-CXR-JPG images.

Layout (the release, under the MIMIC-CXR-JPG root or, as PhysioNet's download puts it, in
``cxr-lt-iccv-workshop-cvamd/2.0.0/`` beside ``mimic-cxr-jpg/2.1.0/``)::

    cxr-lt-2024/labels.csv                    one row per image, 45 labels + split
    cxr-lt-2023/train.csv, development.csv, test.csv   one row per image, 26 labels

Rows: ``dicom_id``, ``subject_id``, ``study_id``, the image path (``fpath`` or ``path``,
``files/p1X/p<subject>/s<study>/<dicom_id>.jpg``), optionally ``ViewPosition``, then one ``0`` /
``1`` column per label named as in :data:`LABELS_2024` / :data:`LABELS_2023` (2024 writes
``Normal`` where 2023 writes ``No Finding``). The 2024 ``split`` is ``train`` / ``val`` /
``test`` (``development`` also read); 2023's split is the file. Labels come from the reports
(text mining, noisy), per study, 1 = mentioned, 0 = not; an empty cell is NaN.

Harmonized: one row per image with MIMIC-CXR-JPG's ``image_path``, ``patient_id`` (subject),
``study_id`` and ``sample_id`` ``<key>:<dicom_id>``: the same images and patients as
``mimic_cxr_jpg`` (one identity family; ``base_image_dir`` is the MIMIC-CXR-JPG root, so both
keys read and cache the same files).

Unverified (no real file available here; from third-party loaders): the metadata columns'
names and order (``fpath`` vs ``path``, whether ``ViewPosition`` is there) and the 2024 split
spellings -- columns are found by name and reading warns (``UnverifiedFormatWarning``) naming
the file; a label column absent from a file is NaN with a warning. The 2024 task files
(``*_labeled_task{1,2,3}.csv``: the gold-standard and zero-shot subsets) are not read.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import warn_unverified
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, numeric_columns, read_table, require_columns
from .mimic import VIEW_MAP, image_file
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
LABELS_2024 = (
    "Adenopathy", "Atelectasis", "Azygos Lobe", "Bulla", "Calcification of the Aorta",
    "Cardiomegaly", "Cardiomyopathy", "Clavicle Fracture", "Consolidation", "Edema",
    "Emphysema", "Enlarged Cardiomediastinum", "Fibrosis", "Fissure", "Fracture", "Granuloma",
    "Hernia", "Hilum", "Hydropneumothorax", "Infarction", "Infiltration", "Kyphosis",
    "Lobar Atelectasis", "Lung Lesion", "Lung Opacity", "Mass", "Nodule", "Normal",
    "Osteopenia", "Pleural Effusion", "Pleural Other", "Pleural Thickening",
    "Pneumomediastinum", "Pneumonia", "Pneumoperitoneum", "Pneumothorax", "Pulmonary Embolism",
    "Pulmonary Hypertension", "Rib Fracture", "Round(ed) Atelectasis", "Scoliosis",
    "Subcutaneous Emphysema", "Support Devices", "Tortuous Aorta", "Tuberculosis")
LABELS_2023 = (
    "Atelectasis", "Calcification of the Aorta", "Cardiomegaly", "Consolidation", "Edema",
    "Emphysema", "Enlarged Cardiomediastinum", "Fibrosis", "Fracture", "Hernia", "Infiltration",
    "Lung Lesion", "Lung Opacity", "Mass", "No Finding", "Nodule", "Pleural Effusion",
    "Pleural Other", "Pleural Thickening", "Pneumomediastinum", "Pneumonia", "Pneumoperitoneum",
    "Pneumothorax", "Subcutaneous Emphysema", "Support Devices", "Tortuous Aorta")
IDS = ("dicom_id", "subject_id", "study_id")
#: label -> canonical findings (radharmony.vocabulary); None: no canonical counterpart
LABEL_MAP_ALL = {
    "Adenopathy": None, "Atelectasis": (("atelectasis", "exact"),), "Azygos Lobe": None,
    "Bulla": None, "Calcification of the Aorta": (("aortic_calcification", "exact"),),
    "Cardiomegaly": (("cardiomegaly", "exact"),), "Cardiomyopathy": None,
    "Clavicle Fracture": (("clavicle_fracture", "exact"),),
    "Consolidation": (("consolidation", "exact"),), "Edema": (("edema", "exact"),),
    "Emphysema": (("emphysema", "exact"),),
    "Enlarged Cardiomediastinum": (("enlarged_cardiomediastinum", "exact"),),
    "Fibrosis": (("fibrosis", "exact"),), "Fissure": None, "Fracture": (("fracture", "exact"),),
    "Granuloma": (("granuloma", "exact"),), "Hernia": (("hiatal_hernia", "approximate"),),
    "Hilum": None, "Hydropneumothorax": (("hydropneumothorax", "exact"),), "Infarction": None,
    "Infiltration": (("infiltration", "exact"),), "Kyphosis": None,
    "Lobar Atelectasis": (("atelectasis", "narrower"),),
    "Lung Lesion": (("lung_lesion", "exact"),), "Lung Opacity": (("lung_opacity", "exact"),),
    "Mass": (("mass", "exact"),), "Nodule": (("nodule", "exact"),),
    "Normal": (("no_finding", "exact"),), "No Finding": (("no_finding", "exact"),),
    "Osteopenia": None, "Pleural Effusion": (("pleural_effusion", "exact"),),
    "Pleural Other": (("pleural_thickening", "broader"), ("fibrosis", "broader"),
                      ("pleural_other", "approximate")),
    "Pleural Thickening": (("pleural_thickening", "exact"),),
    "Pneumomediastinum": (("pneumomediastinum", "exact"),),
    "Pneumonia": (("pneumonia", "exact"),), "Pneumoperitoneum": (("pneumoperitoneum", "exact"),),
    "Pneumothorax": (("pneumothorax", "exact"),), "Pulmonary Embolism": None,
    "Pulmonary Hypertension": None, "Rib Fracture": (("rib_fracture", "exact"),),
    "Round(ed) Atelectasis": (("atelectasis", "narrower"),),
    "Scoliosis": (("scoliosis", "exact"),),
    "Subcutaneous Emphysema": (("subcutaneous_emphysema", "exact"),),
    "Support Devices": (("support_devices", "exact"),), "Tortuous Aorta": None,
    "Tuberculosis": (("tuberculosis", "exact"),),
}
SPLIT_MAP = {"train": "train", "val": "valid", "validate": "valid", "validation": "valid",
             "development": "valid", "dev": "valid", "test": "test"}
#: CXR-LT 2023's files and the split each holds, best first (train.csv is the metadata)
FILES_2023 = {"development": ("cxr-lt-2023/development.csv", "development.csv"),
              "test": ("cxr-lt-2023/test.csv", "test.csv")}
#: the release folder as PhysioNet's download lays it out beside ``mimic-cxr-jpg/<version>``
RELEASE = "cxr-lt-iccv-workshop-cvamd/2.0.0"
ACCESS = ("PhysioNet cxr-lt-iccv-workshop-cvamd 2.0.0, credentialed access (PhysioNet "
          "Credentialed Health Data License 1.5.0); images: mimic-cxr-jpg 2.1.0")
SPEC = DatasetSpec(
    identity=Identity("mimic_cxr_jpg"),
    key="cxr_lt", title="CXR-LT 2024 (45 long-tail labels on MIMIC-CXR-JPG)",
    metadata_files=("cxr-lt-2024/labels.csv", f"{RELEASE}/cxr-lt-2024/labels.csv"),
    label_cols=LABELS_2024,
    label_map={c: LABEL_MAP_ALL[c] for c in LABELS_2024},
    extra_cols=("dicom_id", "split", "split_raw"), outputs=frozenset({"cls"}),
    view_map=VIEW_MAP, id_col="dicom_id", access=ACCESS,
    expected={"images": 377_110, "labels": 45})
SPEC_2023 = replace(
    SPEC, key="cxr_lt_2023", title="CXR-LT 2023 (26 long-tail labels on MIMIC-CXR-JPG)",
    metadata_files=("cxr-lt-2023/train.csv", f"{RELEASE}/cxr-lt-2023/train.csv"),
    label_cols=LABELS_2023,
    label_map={c: LABEL_MAP_ALL[c] for c in LABELS_2023}, expected={"images": 377_110,
                                                                    "labels": 26})


# -- harmonizers ----------------------------------------------------------------------------------
class CXRLTHarmonizer(BaseHarmonizer):
    """CXR-LT 2024: 45 labels for MIMIC-CXR-JPG's 377,110 images, its own split."""

    spec = SPEC
    metadata_description = "the CXR-LT 2024 label table cxr-lt-2024/labels.csv"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        warn_unverified(inputs.metadata, "the CXR-LT column list (fpath/path, ViewPosition, "
                                         "split spellings) is")
        return self._read_labels(inputs.metadata)

    def _read_labels(self, path: Path) -> pd.DataFrame:
        return read_table(path, description=self.metadata_description, columns=IDS,
                          dtype={c: str for c in (*IDS, "fpath", "path", "ViewPosition", "split")})

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        require_columns(raw, IDS, source=source, description="a CXR-LT label table")
        ids = {c: raw[c].astype(str).str.strip() for c in IDS}
        built = [image_file(s, t, d) for s, t, d in zip(ids["subject_id"], ids["study_id"],
                                                        ids["dicom_id"])]
        listed = next((raw[c] for c in ("fpath", "path") if c in raw.columns), None)
        if listed is not None:  # the file's own path must name the same image
            listed = listed.astype(str).str.strip().str.lstrip("/")
            check_cells(listed.str.removeprefix("files/").eq(
                pd.Series(built, index=raw.index).str.removeprefix("files/")), listed,
                source=source, what="the image path does not match dicom_id/subject_id/study_id",
                expected="files/p<2 digits>/p<subject_id>/s<study_id>/<dicom_id>.jpg")
        view = raw["ViewPosition"] if "ViewPosition" in raw.columns else None
        df = pd.DataFrame({"patient_id": ids["subject_id"].to_numpy(object),
                           "study_id": ids["study_id"].to_numpy(object),
                           "image_path": np.array(built, object),
                           "view_position": None if view is None else view.to_numpy(object),
                           "report": None})
        labels = cls.spec.label_cols
        absent = [c for c in labels if c not in raw.columns]
        if absent:
            warnings.warn(f"{source}: {len(absent)} CXR-LT label columns absent ({absent[:4]}"
                          f"...); they are NaN", stacklevel=2)
        present = numeric_columns(raw, [c for c in labels if c in raw.columns], source=source)
        values = present.reindex(columns=list(labels)).to_numpy(np.float32)
        check_cells(pd.Series((np.isin(values, (0.0, 1.0)) | np.isnan(values)).all(axis=1),
                              index=raw.index), raw["dicom_id"], source=source,
                    what="a label cell is not 0, 1 or empty", expected="0 or 1 per label")
        df[list(labels)] = values
        df["dicom_id"] = ids["dicom_id"].to_numpy(object)
        split = raw["split"].astype(object) if "split" in raw.columns else \
            pd.Series(None, index=raw.index, dtype=object)
        df["split_raw"] = split.to_numpy(object)
        df["split"] = split.str.strip().str.lower().map(SPLIT_MAP).to_numpy(object)
        return df


class CXRLT2023Harmonizer(CXRLTHarmonizer):
    """CXR-LT 2023: 26 labels; its train / development / test files are its split."""

    spec = SPEC_2023
    metadata_description = "the CXR-LT 2023 training table cxr-lt-2023/train.csv"

    def inputs(self, path: Path) -> Inputs:
        """``train.csv`` and, beside it, ``development.csv`` and ``test.csv``."""
        return Inputs(path, {part: next((path.parent / Path(n).name for n in names
                                         if (path.parent / Path(n).name).is_file()), None)
                             for part, names in FILES_2023.items()})

    def read(self, inputs: Inputs) -> pd.DataFrame:
        warn_unverified(inputs.metadata, "the CXR-LT 2023 column list (fpath/path, "
                                         "ViewPosition; development.csv, test.csv alike) is")
        parts = [("train", inputs.metadata)] + [(p, inputs.file(p)) for p in FILES_2023]
        return pd.concat([self._read_labels(path).assign(split=part) for part, path in parts
                          if path is not None], ignore_index=True)


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class CXRLTDataset(BaseRadiologicalDataset):
        """CXR-LT 2024; ``base_image_dir`` is the MIMIC-CXR-JPG root (``files/`` under it),
        ``csv_path`` the release's ``cxr-lt-2024/labels.csv`` (found beside or above)."""

        harmonizer_class = CXRLTHarmonizer

    class CXRLT2023Dataset(BaseRadiologicalDataset):
        """CXR-LT 2023; ``base_image_dir`` as for :class:`CXRLTDataset`, ``csv_path`` the
        release's ``cxr-lt-2023/train.csv`` (``development.csv`` and ``test.csv`` beside it)."""

        harmonizer_class = CXRLT2023Harmonizer

    return CXRLTDataset, CXRLT2023Dataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["CXRLTHarmonizer", "CXRLT2023Harmonizer", "CXRLTDataset", "CXRLT2023Dataset"]
