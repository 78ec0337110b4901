"""MIMIC-CXR 2.1.0 (PhysioNet ``mimic-cxr``): the 377,110 DICOMs of 227,835 studies and their
free-text reports -- the images ``mimic_cxr_jpg`` holds as JPEG, in one identity family with it.

Layout (``physionet.org/files/mimic-cxr/2.1.0/``)::

    cxr-record-list.csv.gz      one row per image: subject_id, study_id, dicom_id, path
                                (files/p10/p10000032/s50414267/<dicom_id>.dcm)
    cxr-study-list.csv.gz       one row per study (subject_id, study_id, path of its report)
    mimic-cxr-reports.zip       files/p10/p10000032/s50414267.txt, one report per study
    files/p1X/p<subject>/s<study>/<dicom_id>.dcm

MIMIC-CXR itself ships no labels, split or view: they are MIMIC-CXR-JPG's tables
(``mimic-cxr-2.0.0-{metadata,chexpert,negbio,split}.csv.gz``), read when found beside the record
list, near the image root or in the sibling release folder ``../../mimic-cxr-jpg/2.1.0/`` (or
``2.0.0``) as PhysioNet's download lays them out. The reports are read from the zip or from its
extraction (``files/`` or ``mimic-cxr-reports/files/`` under the image root).

Harmonized: one row per record-list image, ``image_path`` its ``path`` (the DICOM, read
through the DICOM path: modality and VOI LUTs, MONOCHROME1 inverted); everything else as
``mimic_cxr_jpg`` gives it (:mod:`radharmony.datasets.mimic`): the CheXpert labeler's labels
per study (1 / 0 / -1 / NaN), NegBio's in ``negbio_*``, MIMIC's split, the view and image
size from the JPG metadata (None without it, with a warning). ``patient_id``, ``study_id`` and
the native id ``dicom_id`` are MIMIC-CXR-JPG's, so ``mimic_cxr:<dicom_id>`` and
``mimic_cxr_jpg:<dicom_id>`` are the same image.

Counts: 377,110 images, 227,835 studies, 65,379 patients (PhysioNet; the JPG release labels
227,827 of the studies). Not read: ``cxr-study-list.csv.gz`` (each report's path follows from
its ids).
"""

from __future__ import annotations

import warnings
import zipfile
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..annotations.labels import UncertainLabelsMixin
from ..errors import MetadataError
from ..table.harmonizer import Inputs
from ..table.locate import find_optional
from ..table.read_csv import check_cells, read_table, require_columns
from .mimic import (METADATA_COLUMNS, SIDE_COLUMNS, SIDE_FILES, SPEC as JPG_SPEC,
                    MIMICCXRJPGHarmonizer, report_file)
from .report_labels import ReportLabelsDataset
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
RECORD_COLUMNS = ("subject_id", "study_id", "dicom_id", "path")
REPORTS_ZIP = "mimic-cxr-reports.zip"
#: MIMIC-CXR-JPG's versions looked for beside this release, as PhysioNet's download lays them
#: out (``<files>/mimic-cxr/2.1.0`` and ``<files>/mimic-cxr-jpg/<version>``)
JPG_VERSIONS = ("2.1.0", "2.0.0")
SPEC = replace(
    JPG_SPEC, key="mimic_cxr", title="MIMIC-CXR 2.1.0 (DICOM)",
    metadata_files=("cxr-record-list.csv.gz", "cxr-record-list.csv"),
    expected={"images": 377_110, "studies": 227_835, "patients": 65_379},
    access=("PhysioNet mimic-cxr 2.1.0, credentialed access, PhysioNet Credentialed Health "
            "Data License 1.5.0 (labels, split, views: mimic-cxr-jpg 2.1.0)"))


# -- harmonizer -----------------------------------------------------------------------------------
class MIMICCXRHarmonizer(MIMICCXRJPGHarmonizer):
    """MIMIC-CXR 2.1.0: 377,110 DICOMs, 227,835 studies with reports, 65,379 patients."""

    spec = SPEC
    metadata_description = "the MIMIC-CXR record list (cxr-record-list.csv.gz)"

    def inputs(self, path: Path) -> Inputs:
        """The record list; MIMIC-CXR-JPG's tables (beside it, near the images or in the
        sibling JPG release); the reports zip and the extracted report trees."""
        jpg = [path.parent.parent.parent / "mimic-cxr-jpg" / v for v in JPG_VERSIONS]
        inputs = super().inputs(path)
        for kind, names in {**SIDE_FILES, "metadata": JPG_SPEC.metadata_files}.items():
            inputs.files[kind] = find_optional(names, path.parent, self.base_image_dir, *jpg)
        inputs.files["reports_zip"] = find_optional((REPORTS_ZIP,), path.parent,
                                                    self.base_image_dir)
        return inputs

    def read(self, inputs: Inputs) -> dict:
        ids = {"dicom_id": str, "subject_id": str, "study_id": str}
        records = read_table(inputs.metadata, description=self.metadata_description,
                             columns=RECORD_COLUMNS, dtype={**ids, "path": str})
        raw = {"records": records}
        found = inputs.file("metadata")
        raw["metadata"] = None if found is None else read_table(
            found, description=JPG_SPEC.metadata_files[0], columns=METADATA_COLUMNS,
            dtype={**ids, "ViewPosition": str})
        for kind, names in SIDE_FILES.items():
            found = inputs.file(kind)
            raw[kind] = None if found is None else read_table(
                found, description=names[0], columns=SIDE_COLUMNS[kind], dtype=ids)
        raw["reports"] = self._read_reports(records, inputs) or \
            _zip_reports(records, inputs.file("reports_zip"))
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        records = raw["records"]
        require_columns(records, RECORD_COLUMNS, source=source,
                        description="the MIMIC-CXR record list")
        path = records["path"].str.strip().str.lstrip("/")
        check_cells(path.str.fullmatch(r"files/p\d\d/p\d+/s\d+/[^/]+\.dcm"), path,
                    source=source, what="path is not files/pXX/p<subject>/s<study>/<id>.dcm",
                    expected="files/p10/p10000032/s50414267/<dicom_id>.dcm")
        jpg = raw.get("metadata")
        if jpg is None:
            warnings.warn(f"{source}: no mimic-cxr-2.0.0-metadata.csv.gz (MIMIC-CXR-JPG) found; "
                          f"view_position, image sizes and dates are missing", stacklevel=2)
            jpg = pd.DataFrame(columns=list(METADATA_COLUMNS), dtype=object)
        extra = [c for c in METADATA_COLUMNS if c not in RECORD_COLUMNS]
        meta = records[list(RECORD_COLUMNS[:3])].merge(
            jpg.drop_duplicates("dicom_id")[["dicom_id", *extra]], on="dicom_id", how="left")
        df = super().harmonize_raw({**raw, "metadata": meta[list(METADATA_COLUMNS)]},
                                   source=source)
        df["image_path"] = path.to_numpy(object)
        return df


def _zip_reports(records: pd.DataFrame, path: Path | None) -> dict[str, str]:
    """Each study's report from ``mimic-cxr-reports.zip`` (members ``files/pXX/p<subject>/
    s<study>.txt``, any leading folder accepted)."""
    if path is None:
        return {}
    try:
        with zipfile.ZipFile(path) as zf:
            members = {n[n.find("files/"):]: n for n in zf.namelist()
                       if n.endswith(".txt") and "files/" in n}
            out = {}
            for subject, study in records[["subject_id", "study_id"]].drop_duplicates() \
                    .to_numpy(str):
                name = members.get(report_file(subject, study))
                if name is not None:
                    out[study] = zf.read(name).decode("utf-8", errors="replace")
            return out
    except (zipfile.BadZipFile, OSError) as exc:
        raise MetadataError(f"{path} is not a readable zip archive",
                            expected=f"{REPORTS_ZIP} as downloaded",
                            found=f"{type(exc).__name__}: {exc}",
                            fix=f"re-download {REPORTS_ZIP}") from None


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class MIMICCXRDataset(UncertainLabelsMixin, ReportLabelsDataset, BaseRadiologicalDataset):
        """MIMIC-CXR (DICOM); ``base_image_dir`` is the release root (holding ``files/`` and
        ``cxr-record-list.csv.gz``). ``uncertain=`` as for ``mimic_cxr_jpg``."""

        harmonizer_class = MIMICCXRHarmonizer

    return MIMICCXRDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["MIMICCXRHarmonizer", "MIMICCXRDataset"]
