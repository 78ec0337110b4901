"""An EmoryCXR v2 replica in the layout its holders describe.

Layout::

    <root>/DEID_PNG/<empi_anon>/<AccessionNumber_anon>/<SOP>.png   8-bit PNG
    <root>/TABLES/metadata.csv         empi_anon,AccessionNumber_anon,ImagePath,ViewPosition,
                                       Sex,Age,BMI,Race,Ethnicity,Frontal,InstitutionName_anon,
                                       StudyDate_anon
    <root>/TABLES/finding_labels.csv   AccessionNumber_anon + the 14 CheXpert labels (1/0/empty)
    <root>/TABLES/reports.csv          AccessionNumber_anon,deid_report

Quirks reproduced: numeric anonymized ids; labels and reports per study (broadcast to its
images); an accession without a label row and one without a report; ``Sex`` written
``Male``/``Female``; a blank ``ViewPosition``; a multi-line report. The column order is a guess
(no source pins it; the harmonizer finds columns by name).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets.chexpert import LABELS
from . import register_fake
from .images import synthetic_cxr, write_png
from .tables import write_csv

METADATA = ["empi_anon", "AccessionNumber_anon", "ImagePath", "ViewPosition", "Sex", "Age",
            "BMI", "Race", "Ethnicity", "Frontal", "InstitutionName_anon", "StudyDate_anon"]
REPORT = ("EXAM: XR CHEST PA AND LATERAL\nFINDINGS: {findings}\n"
          "IMPRESSION: {impression}")


def write_emory_cxr(root: str | Path, *, n_patients: int = 4, seed: int = 0,
                    images: bool = True) -> Path:
    """Write the replica under ``root``; returns ``root/DEID_PNG`` (the ``base_image_dir``)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    png = root / "DEID_PNG"
    png.mkdir(parents=True, exist_ok=True)
    meta, labels, reports = [], [], []
    for p in range(n_patients):
        empi = str(int(rng.integers(10**8, 10**9)))
        for s in range(1 + p % 2):
            acc = str(int(rng.integers(10**9, 10**10)))
            for v in range(2):
                sop = f"1.2.826.0.1.3680043.8.498.{int(rng.integers(10**11, 10**12))}"
                rel = f"{empi}/{acc}/{sop}.png"
                view = ("PA", "LL", "AP", "")[(p + s + v) % 4]
                meta.append([empi, acc, rel, view, ("Male", "Female")[p % 2], 40 + 7 * p,
                             f"{21.5 + p:.1f}", "African American or Black", "Not Hispanic",
                             str(view in ("PA", "AP")), f"HOSPITAL_{p % 2}",
                             f"2{p:03d}01{s + 1:02d}"])
                if images:
                    write_png(png / rel, synthetic_cxr(280, 240 + 20 * v, rng=rng, bits=8))
            if not (p == 1 and s == 0):  # this accession has no label row
                labels.append([acc, *rng.choice(["1", "0", "", ""], len(LABELS))])
            if not (p == 2 and s == 0):  # and this one no report
                reports.append([acc, REPORT.format(findings="Lungs are clear.\nNo effusion.",
                                                   impression="No acute disease.")])
    write_csv(root / "TABLES" / "metadata.csv", METADATA, meta)
    write_csv(root / "TABLES" / "finding_labels.csv", ["AccessionNumber_anon", *LABELS], labels)
    write_csv(root / "TABLES" / "reports.csv", ["AccessionNumber_anon", "deid_report"], reports)
    return png


@register_fake("emory_cxr")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 patients, 6 studies, 12 PNGs."""
    return {"base_image_dir": write_emory_cxr(root)}
