"""OpenI / Indiana University chest X-rays as DICOM (``NLMCXR_dcm.tgz``, 7,470 files) beside the
PNG key ``openi``: the same reports, labels and MeSH tags (:mod:`radharmony.datasets.openi`).

Images: ``NLMCXR_dcm.tgz`` extracted (``base_image_dir``), one DICOM per image named
``<report n>_IM-<serial>-<k>001.dcm`` -- torchxrayvision's table of these headers lists them as
``./1_IM-0001-3001.dcm``; a third-party loader reads them in one folder per report
(``1/1_IM-0001-3001.dcm``). Each file is found by name wherever it is under the image root;
without a listing the path is the per-report form. The DICOMs are CR, 12 bits stored,
``MONOCHROME1`` (read through the DICOM path: modality and VOI LUTs, inverted to
MONOCHROME2); ``NLMCXR_reports.tgz`` is found beside or above the image root.

Joins with ``openi``: an XML ``parentImage`` id (``CXR1_1_IM-0001-3001``) names the PNG
``<id>.png`` and the DICOM of :func:`~radharmony.datasets.openi.dicom_imageid` (``CXR`` and
the ``_<n>_`` infix dropped: ``1_IM-0001-3001.dcm``). ``image_id`` keeps the XML id and is
the native id, so ``sample_id`` is ``openi_dicom:CXR1_1_IM-0001-3001`` where ``openi`` has
``openi:CXR1_1_IM-0001-3001``: the same image under the same id. Patients are each report
(the collection has no patient ids), as in ``openi``.

Unverified: the archive's folder layout (both forms above are read).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..table.harmonizer import Inputs
from ..table.locate import listed_paths
from .openi import SPEC as PNG_SPEC
from .openi import OpenIHarmonizer
from .report_labels import ReportLabelsDataset
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
SPEC = replace(
    PNG_SPEC, key="openi_dicom", title="OpenI Indiana University chest X-rays (DICOM)",
    extra_cols=PNG_SPEC.extra_cols + ("image_id",), id_col="image_id",
    expected={**PNG_SPEC.expected, "dicom_files": 7_470},
    access="openi.nlm.nih.gov (NLMCXR_dcm.tgz, NLMCXR_reports.tgz), CC BY-NC-ND 4.0")


def dicom_file(dicom_imageid: str) -> str:
    """The per-report DICOM path of an image: ``CXR1_IM-0001-3001`` -> ``1/1_IM-0001-3001.dcm``."""
    name = dicom_imageid.removeprefix("CXR")
    return f"{name.split('_', 1)[0]}/{name}.dcm"


# -- harmonizer -----------------------------------------------------------------------------------
class OpenIDicomHarmonizer(OpenIHarmonizer):
    """OpenI DICOM: 7,470 DICOMs of 3,955 reports (3,851 with images)."""

    spec = SPEC

    def inputs(self, path: Path) -> Inputs:
        """The reports archive, the DICOM header table and the image root's ``.dcm`` listing."""
        inputs = super().inputs(path)
        base = self.base_image_dir
        inputs.folders["dicom_images"] = (base if base is not None and base.is_dir() else None,
                                          (".dcm",))
        return inputs

    def read(self, inputs: Inputs) -> dict:
        return {**super().read(inputs), "files": inputs.by_name("dicom_images", suffix=".dcm")}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        df = super().harmonize_raw(raw, source=source)
        df["image_id"] = df["image_path"].str.slice(0, -len(".png"))
        names = df["dicom_imageid"].str.removeprefix("CXR")
        df["image_path"] = listed_paths(names, raw.get("files"),
                                        df["dicom_imageid"].map(dicom_file), source=source,
                                        fallback_text="<report>/<name>.dcm", what="DICOM file")
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class OpenIDicomDataset(ReportLabelsDataset, BaseRadiologicalDataset):
        """OpenI as DICOM; ``base_image_dir`` holds the extracted ``NLMCXR_dcm.tgz``;
        ``NLMCXR_reports.tgz`` is found beside or above it."""

        harmonizer_class = OpenIDicomHarmonizer

    return OpenIDicomDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["OpenIDicomHarmonizer", "OpenIDicomDataset"]
