"""MIMIC-CXR-JPG 2.x (PhysioNet): 377,110 JPEGs of 227,827 studies, CheXpert and NegBio labels.

Source of truth: ``mimic-cxr-2.0.0-metadata.csv.gz`` (one row per image: ``dicom_id,
subject_id, study_id, PerformedProcedureStepDescription, ViewPosition, Rows, Columns,
StudyDate, StudyTime, ProcedureCodeSequence_CodeMeaning, ViewCodeSequence_CodeMeaning,
PatientOrientationCodeSequence_CodeMeaning``). Read beside it: the per-*study* label tables
``mimic-cxr-2.0.0-chexpert.csv.gz`` and ``mimic-cxr-2.0.0-negbio.csv.gz`` (``subject_id,
study_id`` then 14 findings, values ``1.0`` / ``0.0`` / ``-1.0`` uncertain / empty = not
mentioned), and the official split ``mimic-cxr-2.0.0-split.csv.gz`` (``dicom_id, study_id,
subject_id, split`` with ``train`` / ``validate`` / ``test``). Reports are not part of
MIMIC-CXR-JPG: extract MIMIC-CXR's ``mimic-cxr-reports.zip`` into the same root and each study's
``files/pXX/p<subject>/s<study>.txt`` becomes the ``report`` (as written, stripped).

Harmonized: one row per image ``files/p<first 2 digits>/p<subject>/s<study>/<dicom_id>.jpg``;
the CheXpert labeler's values are the label columns (1, 0, -1 and NaN kept distinct), NegBio's
are the ``negbio_*`` columns; every image of a study carries its study's labels (labels come
from the study's report; no value crosses to another study of the patient). No table is
bundled for tests: the counts below are the published ones.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.labels import UncertainLabelsMixin
from ..errors import MetadataNotFoundError
from ..spec import DatasetSpec, Identity
from .chexpert import LABEL_MAP as CHEXPERT_LABEL_MAP
from .report_labels import ReportLabelsDataset, ReportLabelsHarmonizer
from ..table.locate import find_optional
from ..table.read_csv import numeric_columns, read_table, require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
VERSION = "2.0.0"  # MIMIC-CXR-JPG 2.1.0 still ships the 2.0.0-named tables
METADATA_COLUMNS = ("dicom_id", "subject_id", "study_id", "PerformedProcedureStepDescription",
                    "ViewPosition", "Rows", "Columns", "StudyDate", "StudyTime",
                    "ProcedureCodeSequence_CodeMeaning", "ViewCodeSequence_CodeMeaning",
                    "PatientOrientationCodeSequence_CodeMeaning")
LABEL_COLS = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema",
              "Enlarged Cardiomediastinum", "Fracture", "Lung Lesion", "Lung Opacity",
              "No Finding", "Pleural Effusion", "Pleural Other", "Pneumonia", "Pneumothorax",
              "Support Devices")
#: the CheXpert labeler's 14 observations, mapped as CheXpert's (radharmony.vocabulary)
LABEL_MAP = CHEXPERT_LABEL_MAP
NEGBIO_COLS = tuple(f"negbio_{c}" for c in LABEL_COLS)
SPLIT_COLUMNS = ("dicom_id", "study_id", "subject_id", "split")
SIDE_COLUMNS = {"chexpert": ("subject_id", "study_id", *LABEL_COLS),
                "negbio": ("subject_id", "study_id", *LABEL_COLS), "split": SPLIT_COLUMNS}
SIDE_FILES = {kind: (f"mimic-cxr-{VERSION}-{kind}.csv.gz", f"mimic-cxr-{VERSION}-{kind}.csv")
              for kind in ("chexpert", "negbio", "split")}
VIEW_MAP = {"PA": "PA", "AP": "AP", "LATERAL": "LATERAL", "LL": "LATERAL", "LAO": "LAO",
            "RAO": "RAO"}
SPLIT_MAP = {"train": "train", "validate": "valid", "test": "test"}  # MIMIC's name -> split
EXTRA_COLS = ("dicom_id", "split", "split_raw", "study_date", "study_time", "rows", "columns", "procedure",
              *NEGBIO_COLS)
SPEC = DatasetSpec(
    identity=Identity("mimic_cxr_jpg"),
    key="mimic_cxr_jpg", title="MIMIC-CXR-JPG 2.x",
    metadata_files=(f"mimic-cxr-{VERSION}-metadata.csv.gz", f"mimic-cxr-{VERSION}-metadata.csv"),
    label_cols=LABEL_COLS, extra_cols=EXTRA_COLS, outputs=frozenset({"cls", "report"}),
    label_map=LABEL_MAP,
    view_map=VIEW_MAP, id_col="dicom_id",
    column_types={"study_date": "Int64", "study_time": "float64", "rows": "Int64",
                  "columns": "Int64", **{c: "float32" for c in NEGBIO_COLS}},
    expected={"images": 377_110, "studies": 227_827, "patients": 65_379},  # published
    access=("PhysioNet mimic-cxr-jpg 2.1.0, credentialed access, PhysioNet Credentialed "
            "Health Data License 1.5.0 (reports: mimic-cxr 2.1.0)"))


#: report trees, best first: ``files/`` beside the images, or the reports archive extracted
#: into ``mimic-cxr-reports/`` under the image root
REPORT_ROOTS = {"reports": "files", "reports_extracted": "mimic-cxr-reports/files"}


def image_file(subject, study, dicom) -> str:
    """``files/p10/p10000032/s50414267/<dicom>.jpg`` -- where MIMIC-CXR-JPG keeps an image
    (also the image link of the MIMIC-based VQA sets)."""
    subject, study = str(subject), str(study)
    return f"files/p{subject[:2]}/p{subject}/s{study}/{dicom}.jpg"


def files_path(path: str) -> str:
    """An image path of a MIMIC-based set relative to MIMIC-CXR-JPG's root: ``p10/...`` (the
    form relative to ``files/``) gains its ``files/``; ``files/p10/...`` stays."""
    return path if path.startswith("files/") or not path[:1] == "p" else "files/" + path


def report_file(subject: str, study: str) -> str:
    """``files/p10/p10000032/s50414267.txt`` -- where MIMIC-CXR keeps a study's report."""
    return f"files/p{subject[:2]}/p{subject}/s{study}.txt"


# -- harmonizer -----------------------------------------------------------------------------------
class MIMICCXRJPGHarmonizer(ReportLabelsHarmonizer, BaseHarmonizer):
    """MIMIC-CXR-JPG: 377,110 images, 227,827 studies, 65,379 patients; official split."""

    spec = SPEC
    metadata_description = f"the MIMIC-CXR-JPG metadata (mimic-cxr-{VERSION}-metadata.csv.gz)"

    def inputs(self, path: Path) -> Inputs:
        """The metadata table, the label and split tables (beside it or near the images) and
        the report trees ``files/`` under the image root or its ``mimic-cxr-reports/``."""
        files = {kind: find_optional(names, path.parent, self.base_image_dir)
                 for kind, names in SIDE_FILES.items()}
        folders = {}
        for role, sub in REPORT_ROOTS.items():
            root = None if self.base_image_dir is None else self.base_image_dir / sub
            folders[role] = (root if root is not None and root.is_dir() else None, (".txt",))
        return Inputs(path, files, folders)

    def read(self, inputs: Inputs) -> dict:
        ids = {"dicom_id": str, "subject_id": str, "study_id": str}
        raw = {"metadata": read_table(inputs.metadata, description=self.metadata_description,
                                      columns=METADATA_COLUMNS,
                                      dtype={**ids, "ViewPosition": str})}
        for kind, names in SIDE_FILES.items():
            found = inputs.file(kind)
            raw[kind] = None if found is None else read_table(
                found, description=names[0], columns=SIDE_COLUMNS[kind], dtype=ids)
        raw["reports"] = self._read_reports(raw["metadata"], inputs)
        return raw

    @staticmethod
    def _read_reports(metadata: pd.DataFrame, inputs: Inputs) -> dict[str, str]:
        """The report text of each study, from the first report tree that holds any."""
        studies = metadata[["subject_id", "study_id"]].drop_duplicates().to_numpy(str)
        for role in REPORT_ROOTS:
            root, _ = inputs.folders[role]
            present = set(inputs.listing(role))
            texts = {}
            for subject, study in studies:
                rel = report_file(subject, study)[len("files/"):]
                if rel in present:
                    texts[study] = (root / rel).read_text(encoding="utf-8", errors="replace")
            if texts:
                return texts
        return {}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        meta = raw["metadata"]
        require_columns(meta, METADATA_COLUMNS, source=source,
                        description="the MIMIC-CXR-JPG metadata")
        ids = ["dicom_id", "subject_id", "study_id"]
        if meta[ids].isna().any(axis=None):
            warnings.warn(f"{source}: {int(meta[ids].isna().any(axis=1).sum())} rows without "
                          f"dicom_id, subject_id or study_id are dropped", stacklevel=2)
            meta = meta.dropna(subset=ids)
        subject, study = meta["subject_id"].astype(str), meta["study_id"].astype(str)
        reports = raw.get("reports") or {}
        df = pd.DataFrame({
            "patient_id": subject.to_numpy(object), "study_id": study.to_numpy(object),
            "image_path": ("files/p" + subject.str[:2] + "/p" + subject + "/s" + study + "/"
                           + meta["dicom_id"] + ".jpg").to_numpy(object),
            "view_position": meta["ViewPosition"].astype(object),
            "report": study.map(lambda s: (reports.get(s) or "").strip() or None)
            .to_numpy(object)})
        df[list(LABEL_COLS)] = _study_labels(raw.get("chexpert"), study, source)
        df["dicom_id"] = meta["dicom_id"].to_numpy(object)
        split = raw.get("split")
        df["split_raw"] = None if split is None else \
            split.drop_duplicates("dicom_id").set_index("dicom_id")["split"] \
            .reindex(meta["dicom_id"]).to_numpy(object)
        df["split"] = None if split is None else df["split_raw"].map(SPLIT_MAP)
        df["study_date"] = pd.array(pd.to_numeric(meta["StudyDate"], errors="coerce"),
                                    dtype="Int64")
        df["study_time"] = pd.to_numeric(meta["StudyTime"], errors="coerce").to_numpy()
        df["rows"] = pd.array(pd.to_numeric(meta["Rows"], errors="coerce"), dtype="Int64")
        df["columns"] = pd.array(pd.to_numeric(meta["Columns"], errors="coerce"), dtype="Int64")
        df["procedure"] = meta["PerformedProcedureStepDescription"].to_numpy(object)
        df[list(NEGBIO_COLS)] = _study_labels(raw.get("negbio"), study, source)
        if raw.get("chexpert") is not None:
            unlabeled = int((~study.isin(raw["chexpert"]["study_id"])).sum())
            if unlabeled:
                warnings.warn(f"{source}: {unlabeled} images belong to studies without a row "
                              f"in the CheXpert label table; their labels are missing",
                              stacklevel=2)
        return df


def _study_labels(table: pd.DataFrame | None, study: pd.Series, source: str) -> np.ndarray:
    """A label table's values for each image's study (NaN where absent), float32."""
    if table is None:
        return np.full((len(study), len(LABEL_COLS)), np.nan, np.float32)
    require_columns(table, ("study_id", *LABEL_COLS), source=source,
                    description="a MIMIC-CXR-JPG label table")
    per_study = table.drop_duplicates("study_id").set_index("study_id")
    values = numeric_columns(per_study, LABEL_COLS, source=source)
    return values.reindex(study).to_numpy(np.float32)


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class MIMICCXRJPGDataset(UncertainLabelsMixin, ReportLabelsDataset, BaseRadiologicalDataset):
        """MIMIC-CXR-JPG; ``base_image_dir`` is the release root (holding ``files/`` and the
        CSVs). The official split is the ``split`` column. ``uncertain=`` chooses what an
        uncertain (-1) CheXpert-labeler value becomes (see :class:`UncertainLabelsMixin`)."""

        harmonizer_class = MIMICCXRJPGHarmonizer

    class MIMICCXRJPGTestDataset(ReportLabelsDataset, BaseRadiologicalDataset):
        """The radiologist-labelled MIMIC-CXR-JPG test set; ``base_image_dir`` as for
        :class:`MIMICCXRJPGDataset`."""

        harmonizer_class = MIMICCXRJPGTestHarmonizer

    return MIMICCXRJPGDataset, MIMICCXRJPGTestDataset


__getattr__ = torch_side(__name__, _dataset_classes)


# -- the radiologist-labelled test set (MIMIC-CXR-JPG 2.1.0) ------------------------------------
#: 687 test studies labelled by radiologists (not the CheXpert labeler). Third-party facts, not
#: checked on the real file: one row per study, ``study_id`` then the 14 labels (values as in
#: the labeler tables) with ``Airspace Opacity`` for ``Lung Opacity``; column order unpinned.
TEST_LABEL_FILES = ("mimic-cxr-2.1.0-test-set-labeled.csv",)
TEST_RENAMES = {"Airspace Opacity": "Lung Opacity", "airspace opacity": "Lung Opacity"}
TEST_SPEC = replace(SPEC, key="mimic_cxr_jpg_test",
                    title="MIMIC-CXR-JPG 2.1.0 radiologist-labelled test set",
                    expected={"studies": 687})


class MIMICCXRJPGTestHarmonizer(MIMICCXRJPGHarmonizer):
    """The test studies of ``mimic-cxr-2.1.0-test-set-labeled.csv`` (found beside the
    metadata), every image of each; its labels replace the CheXpert labeler's. Same images,
    ``image_path`` and ids as ``mimic_cxr_jpg``, so the two share the image cache."""

    spec = TEST_SPEC

    def inputs(self, path: Path) -> Inputs:
        inputs = super().inputs(path)
        inputs.files["test_labels"] = find_optional(TEST_LABEL_FILES, path.parent,
                                                    self.base_image_dir)
        return inputs

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        found = inputs.file("test_labels")
        if found is None:
            raise MetadataNotFoundError(TEST_LABEL_FILES[0], [path.parent / TEST_LABEL_FILES[0]],
                                        fix="download it from physionet.org/content/"
                                            "mimic-cxr-jpg/2.1.0/ into the release folder")
        raw = super().read(inputs)
        raw["chexpert"] = read_table(found, description=TEST_LABEL_FILES[0],
                                     columns=("study_id",), dtype={"study_id": str})
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        labels = raw["chexpert"].rename(columns=TEST_RENAMES)
        labels = labels.assign(study_id=labels["study_id"].astype(str).str.strip()
                               .str.removeprefix("s"))
        meta = raw["metadata"]
        meta = meta[meta["study_id"].astype(str).isin(set(labels["study_id"]))]
        return super().harmonize_raw({**raw, "metadata": meta, "chexpert": labels},
                                     source=source)


__all__ = ["MIMICCXRJPGHarmonizer", "MIMICCXRJPGDataset", "MIMICCXRJPGTestHarmonizer",
           "MIMICCXRJPGTestDataset"]
