"""The BRAX DICOM replica: :func:`radharmony.fake.brax.write_brax` with ``dicom=True``.

Layout::

    <root>/master_spreadsheet_update.csv     as for ``brax`` (``DicomPath`` and ``PngPath``)
    <root>/Anonymized_DICOMs/id_<PatientID>/Study_<UID>/Series_<UID>/image-<UID>.dcm

Quirks reproduced: DX DICOMs, 12 bits stored in 16, a third of them MONOCHROME1 (a guess: the
release's photometric interpretations are not documented); the thin strip's row without a file.
"""

from __future__ import annotations

from pathlib import Path

from . import register_fake
from .brax import write_brax


@register_fake("brax_dicom")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 patients, 12 DICOMs and PNGs (+ one thin strip row)."""
    return {"base_image_dir": write_brax(root, dicom=True)}
