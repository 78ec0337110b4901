"""A MIMIC-CXR 2.1.0 (DICOM) replica beside a MIMIC-CXR-JPG replica of the same studies, laid
out as PhysioNet's download puts the two releases.

Layout::

    <root>/mimic-cxr/2.1.0/cxr-record-list.csv.gz   subject_id,study_id,dicom_id,path
    <root>/mimic-cxr/2.1.0/cxr-study-list.csv.gz    subject_id,study_id,path
    <root>/mimic-cxr/2.1.0/mimic-cxr-reports.zip    files/p1X/p<subject>/s<study>.txt
    <root>/mimic-cxr/2.1.0/files/p1X/p<subject>/s<study>/<dicom_id>.dcm
    <root>/mimic-cxr-jpg/2.1.0/mimic-cxr-2.0.0-{metadata,chexpert,negbio,split}.csv.gz

Quirks reproduced: the JPG replica's dicom ids, studies and reports (``write_mimic``); DX
DICOMs of 12 bits stored in 16, every third MONOCHROME1 with a VOI window; reports only in
the zip (one study without one); the JPG tables in the sibling release folder.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from . import register_fake
from .dicom import write_dicom
from .images import synthetic_cxr
from .mimic import studies, write_mimic
from .tables import write_csv


def write_mimic_cxr(root: str | Path, *, n_subjects: int = 4, seed: int = 0,
                    images: bool = True) -> Path:
    """Write both releases under ``root``; returns the MIMIC-CXR release root
    (``root/mimic-cxr/2.1.0``, the ``base_image_dir``)."""
    root = Path(root)
    jpg = write_mimic(root / "mimic-cxr-jpg" / "2.1.0", n_subjects=n_subjects, seed=seed,
                      images=False)
    base = root / "mimic-cxr" / "2.1.0"
    base.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed + 2)
    records, study_list, n = [], [], 0
    with zipfile.ZipFile(base / "mimic-cxr-reports.zip", "w") as zf:
        for s in studies(jpg):
            folder = f"files/p{s['subject'][:2]}/p{s['subject']}"
            report = jpg / folder / f"s{s['study']}.txt"
            study_list.append([s["subject"], s["study"], f"{folder}/s{s['study']}.txt"])
            if report.is_file():  # the JPG replica leaves one study without a report
                zf.writestr(f"{folder}/s{s['study']}.txt", report.read_text())
                report.unlink()  # MIMIC-CXR-JPG itself ships no reports
            for dicom, view in zip(s["dicoms"], s["views"]):
                rel = f"{folder}/s{s['study']}/{dicom}.dcm"
                records.append([s["subject"], s["study"], dicom, rel])
                if images:
                    img = synthetic_cxr(320, 256, rng=rng)
                    mono1 = n % 3 == 2
                    write_dicom(base / rel, 4095 - img if mono1 else img, bits_stored=12,
                                photometric="MONOCHROME1" if mono1 else "MONOCHROME2",
                                Modality="DX", PatientID=s["subject"], ViewPosition=view,
                                WindowCenter="2048", WindowWidth="4096")
                n += 1
    write_csv(base / "cxr-record-list.csv.gz", ["subject_id", "study_id", "dicom_id", "path"],
              records)
    write_csv(base / "cxr-study-list.csv.gz", ["subject_id", "study_id", "path"], study_list)
    return base


@register_fake("mimic_cxr")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 patients' DICOMs, reports in the zip, the JPG tables beside."""
    return {"base_image_dir": write_mimic_cxr(root)}
