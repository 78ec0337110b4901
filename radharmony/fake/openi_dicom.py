"""The OpenI DICOM replica: :func:`radharmony.fake.openi.write_openi` with ``dicom=True``.

Layout::

    <root>/NLMCXR_reports.tgz, <root>/nlmcxr_dicom_metadata.csv.gz   as for ``openi``
    <root>/NLMCXR_dcm/<n>/<n>_IM-<serial>-<k>001.dcm   (odd reports; even ones flat in the root)

Quirks reproduced: CR DICOMs, 12 bits stored in 16, MONOCHROME1 with a VOI window; both folder
layouts in circulation; report 1's XML ids ``CXR1_1_IM-...`` against the file ``1_IM-....dcm``.
"""

from __future__ import annotations

from pathlib import Path

from . import register_fake
from .openi import write_openi


@register_fake("openi_dicom")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 reports, 10 DICOMs (and the PNGs, for the joins)."""
    write_openi(root, dicom=True)
    return {"base_image_dir": root / "NLMCXR_dcm"}
