"""A BIMCV-COVID19+ replica in the release's MIDS layout (archives already extracted).

Layout::

    <root>/covid19_posi/derivatives/labels/labels_covid19_posi.tsv   TAB, unnamed index first
    <root>/covid19_posi/participants.tsv          participant, modality_dicom, age, gender
    <root>/covid19_posi/sub-S0xxxx/ses-E0xxxx/mod-rx/
        sub-S0xxxx_ses-E0xxxx_run-1_bp-chest_vp-pa_cr.png (+ .json sidecar)
    <root>/bimcv_covid19_posi_subjects_1.tar-tvf.txt     ``tar -tvf`` lines of the archive

Quirks reproduced: 16-bit PNGs; a session with a PA and a lateral image; a session whose image
is both a PNG and a DICOM (``.dcm``), another with a DICOM only; a session without a labels
row; ``Labels`` printed as numpy does (``['COVID 19' 'pneumonia']``) and as Python does;
Spanish reports; ``participants.tsv`` ages printed as lists (``[64]``) and a ``None`` gender;
folder entries (``d`` lines) in the listing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..datasets.bimcv_covid19 import LABEL_FILES, LISTING
from . import register_fake
from .dicom import write_dicom
from .images import synthetic_cxr, write_png

RELEASE = "covid19_posi"
#: subject, session, [(run, view, modality, formats)], Labels cell or None, report
SESSIONS = [
    ("sub-S03044", "ses-E07985", [(1, "pa", "cr", ("png",)), (1, "ll", "cr", ("png",))],
     "['COVID 19' 'pneumonia' 'pleural effusion']",
     "Opacidades alveolares bilaterales compatibles con neumonía COVID 19. Derrame pleural."),
    ("sub-S03044", "ses-E08127", [(1, "ap", "dx", ("png", "dcm"))], "['COVID 19', 'infiltrates']",
     "Infiltrados intersticiales bilaterales, sin cambios."),
    ("sub-S03100", "ses-E07001", [(1, "pa", "cr", ("png",))], "['normal']",
     "Sin hallazgos patológicos."),
    ("sub-S03101", "ses-E07002", [(2, "ap", "dx", ("dcm",))], "['cardiomegaly' 'COVID 19']",
     "Cardiomegalia. Patrón compatible con COVID 19."),
    ("sub-S03102", "ses-E07003", [(1, "pa", "cr", ("png",))], None, None),
]
PARTICIPANTS = [("sub-S03044", "['CR', 'DX']", "[64, 64]", "M"),
                ("sub-S03100", "['CR']", "[41]", "F"), ("sub-S03101", "['DX']", "[80]", "None"),
                ("sub-S03102", "['CR']", "[57]", "F")]


def _tsv(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n",
                    encoding="utf-8")


def write_bimcv_covid19(root: str | Path, *, seed: int = 0, images: bool = True) -> Path:
    """Write the replica under ``root`` (the folder the archives were extracted in) and return
    it: 5 sessions of 4 subjects, 6 radiographs (one PNG + DICOM pair read once)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    labels, listing = [], [f"drwxr-xr-x bimcv/bimcv 0 2020-06-05 12:00 {RELEASE}/"]
    for k, (sub, ses, series, cell, report) in enumerate(SESSIONS):
        for run, view, modality, formats in series:
            stem = f"{RELEASE}/{sub}/{ses}/mod-rx/{sub}_{ses}_run-{run}_bp-chest_vp-{view}_" \
                   f"{modality}"
            img = synthetic_cxr(int(rng.integers(300, 360)), int(rng.integers(260, 320)),
                                rng=rng)
            for fmt in formats:
                listing.append(f"-rw-r--r-- bimcv/bimcv {int(rng.integers(10**5, 10**7))} "
                               f"2020-06-05 12:00 {stem}.{fmt}")
                if images and fmt == "png":
                    write_png(root / f"{stem}.png", img)
                elif images:
                    write_dicom(root / f"{stem}.dcm", img, Modality=modality.upper(),
                                ViewPosition=view.upper(), PatientID=sub)
            if images:
                (root / f"{stem}.json").write_text(json.dumps({"00080060": {"vr": "CS"}}))
        if cell is not None:
            labels.append([k, sub, ses, report, cell, "['loc basal']", "[['COVID 19']]",
                           "['C5203670']", "['C1282378']"])
    header = ["", "PatientID", "ReportID", "Report", "Labels", "Localizations",
              "LabelsLocalizationsBySentence", "labelCUIS", "LocalizationsCUIS"]
    _tsv(root / RELEASE / "derivatives" / "labels" / LABEL_FILES[0], header, labels)
    _tsv(root / RELEASE / "participants.tsv", ["participant", "modality_dicom", "age", "gender"],
         [list(p) for p in PARTICIPANTS])
    (root / f"bimcv_covid19_posi_subjects_1{LISTING}").write_text("\n".join(listing) + "\n")
    return root


@register_fake("bimcv_covid19")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 radiographs of 4 patients (PNG and DICOM)."""
    return {"base_image_dir": write_bimcv_covid19(root)}
