"""BRAX as DICOM (``Anonymized_DICOMs/``) beside the PNG key ``brax``: the same spreadsheet,
labels, demographics and thin-strip filter (:mod:`radharmony.datasets.brax`).

Images: ``DicomPath`` of the spreadsheet (``Anonymized_DICOMs/id_<PatientID>/Study_<UID>/
Series_<UID>/image-<UID>.dcm``, the tree ``PngPath`` mirrors under ``images/``), read through
the DICOM path (modality and VOI LUTs, MONOCHROME1 inverted). A spreadsheet without
``DicomPath`` gets the mirrored path (``images/`` -> ``Anonymized_DICOMs/``, ``.png`` ->
``.dcm``). ``base_image_dir`` is the release root, as for ``brax``.

Joins with ``brax``: ``image_id`` is ``PngPath`` without ``.png`` -- ``brax``'s native id -- and
the native id here, so ``brax_dicom:images/id_<P>/.../image-<UID>`` and
``brax:images/id_<P>/.../image-<UID>`` name the same image; patients and studies are the same.

Unverified: whether every release version has ``DicomPath`` (the mirror is used without it)
and the DICOMs' photometric interpretation (both are read).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..annotations.labels import UncertainLabelsMixin
from ..table.read_csv import check_cells
from .brax import SPEC as PNG_SPEC
from .brax import BRAXHarmonizer
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
SPEC = replace(PNG_SPEC, key="brax_dicom", title="BRAX (DICOM)",
               extra_cols=PNG_SPEC.extra_cols + ("image_id",), id_col="image_id")


# -- harmonizer -----------------------------------------------------------------------------------
class BRAXDicomHarmonizer(BRAXHarmonizer):
    """BRAX DICOM: 40,967 DICOMs of 19,351 patients (the PNG key's rows)."""

    spec = SPEC

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        df = super().harmonize_raw(raw, source=source)
        png = df["image_path"]
        mirrored = "Anonymized_DICOMs/" + png.str.removeprefix("images/").str.slice(0, -4) + ".dcm"
        listed = df["dicom_path"].str.strip().str.lstrip("/")
        dicom = listed.where(listed.notna() & (listed != ""), mirrored)
        check_cells(dicom.str.lower().str.endswith(".dcm"), dicom, source=source,
                    what="DicomPath is not a .dcm path",
                    expected="Anonymized_DICOMs/id_<PatientID>/Study_<UID>/Series_<UID>/"
                             "image-<UID>.dcm")
        df["image_id"] = png.str.slice(0, -4).to_numpy(object)
        df["dicom_path"] = dicom.to_numpy(object)
        df["image_path"] = dicom.to_numpy(object)
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class BRAXDicomDataset(UncertainLabelsMixin, BaseRadiologicalDataset):
        """BRAX as DICOM; ``base_image_dir`` is the release root (holding
        ``Anonymized_DICOMs/`` and the spreadsheet). ``uncertain=`` as for ``brax``."""

        harmonizer_class = BRAXDicomHarmonizer

    return BRAXDicomDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["BRAXDicomHarmonizer", "BRAXDicomDataset"]
