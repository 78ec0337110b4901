"""A CheXpert-Plus replica in the real on-disk format (the PNG release by default).

Layout::

    <root>/df_chexpert_plus_240401.csv            27 columns, one row per image
    <root>/chexbert_labels.zip                    findings_fixed.json, impression_fixed.json,
                                                  report_fixed.json (JSON Lines)
    <root>/PNG/{train,valid}/patient<N>/study<N>/view<K>_<frontal|lateral>.png

Quirks reproduced: ``path_to_image`` ends in ``.jpg`` while the PNG release stores ``.png``;
``age`` a float (``62.0``); demographics as text (``"No"``); null section fields and a
multi-line ``report`` (quoted newlines) in the real layout (``NARRATIVE:``, ``CLINICAL
HISTORY:`` or ``HISTORY:``, ``COMPARISON: None.``, ``PROCEDURE COMMENTS:``, ``FINDINGS:``,
``IMPRESSION:``), one report per study repeated on each of its images, its sections also in
the ``section_*`` columns; CheXbert values ``1``/``0``/``-1`` with absent keys;
``split`` ``train``/``valid``; 8-bit PNGs.
"""

from __future__ import annotations

import csv
import json
import re
import zipfile
from pathlib import Path

import numpy as np

from ..datasets.chexpert import LABELS
from ..datasets.chexpert_plus import COLUMNS
from . import register_fake
from .images import synthetic_cxr, write_png


def _number(path: str, part: str) -> int:
    m = re.search(part + r"(\d+)", path)
    return int(m.group(1)) if m else 0


def report_fields(k: int) -> dict:
    """The ``report`` of study number ``k`` and its ``section_*`` fields (empty: absent),
    laid out as CheXpert-Plus's reports are."""
    history = ("61 years of age, Female, cough.", "Shortness of breath.")[k % 2]
    comparison = "None." if k % 3 != 2 else "06/2017"
    procedure = ("Two views of the chest.", "Single view of the chest.")[k % 2]
    findings = "" if k % 3 == 0 else "The lungs are clear.\nNo effusion."
    impression = "1. No acute cardiopulmonary process."
    head = ("CLINICAL HISTORY", "HISTORY")[k % 2]
    report = (f"NARRATIVE:\nRADIOGRAPHIC EXAMINATION OF THE CHEST: 6/3/17\n\n{head}: {history}"
              f"\n\nCOMPARISON: {comparison}\n\nPROCEDURE COMMENTS: {procedure}\n\n"
              f"FINDINGS:\n{findings}\n\nIMPRESSION:\n{impression}")
    return {"report": report,
            "section_narrative": "RADIOGRAPHIC EXAMINATION OF THE CHEST: 6/3/17",
            "section_clinical_history": history if k % 2 == 0 else "",
            "section_history": history if k % 2 else "", "section_comparison": comparison,
            "section_procedure_comments": procedure, "section_findings": findings,
            "section_impression": impression}


def plus_rows(paths: list[str], *, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """``(table rows as dicts, CheXbert label objects)`` for CheXpert-style ``paths``."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    studies: dict[str, int] = {}  # study folder -> its number (one report per study)
    for order, p in enumerate(paths):
        lateral = "lateral" in p
        k = studies.setdefault(p.rsplit("/", 1)[0], len(studies))
        rec = dict.fromkeys(COLUMNS, "")
        rec.update(report_fields(k))
        rec.update({
            "path_to_image": p, "path_to_dcm": p[:-4] + ".dcm",
            "frontal_lateral": "Lateral" if lateral else "Frontal",
            "ap_pa": "" if lateral else ("AP", "PA")[order % 2],
            "deid_patient_id": f"pid{_number(p, 'patient') * 7919 % 10**6:06d}",
            "patient_report_date_order": str(_number(p, "study")),
            "section_end_of_impression": "2-ABNORMAL, PREVIOUSLY REPORTED\nEND",
            "section_accession_number": str(9_000_000 + k),
            "age": f"{float(rng.integers(18, 90))}", "sex": ("Female", "Male")[order % 2],
            "race": "White", "ethnicity": "Non-Hispanic/Non-Latino",
            "interpreter_needed": "No", "insurance_type": "Private Insurance",
            "recent_bmi": "" if order % 4 == 1 else f"{rng.uniform(17, 35):.1f}",
            "deceased": "No", "split": p.split("/")[0]})
        rows.append(rec)
        lab = {"path_to_image": p}
        for name in LABELS:
            v = int(rng.choice([1, 0, -1, 9, 9]))
            if v != 9:
                lab[name] = v
        labels.append(lab)
    return rows, labels


def write_plus_tables(root: str | Path, paths: list[str], *, seed: int = 0,
                      labels: bool = True) -> Path:
    """Write the table (and the zipped CheXbert labels) for ``paths``; returns the CSV."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rows, labs = plus_rows(paths, seed=seed)
    table = root / "df_chexpert_plus_240401.csv"
    with open(table, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        w.writeheader()
        w.writerows(rows)
    if labels:
        with zipfile.ZipFile(root / "chexbert_labels.zip", "w") as zf:
            body = "".join(json.dumps(x) + "\n" for x in labs)
            for name in ("findings_fixed.json", "impression_fixed.json", "report_fixed.json"):
                zf.writestr(f"chexbert_labels/{name}", body)
    return table


def default_paths(n_patients: int = 5, patients: list[int] | None = None) -> list[str]:
    """CheXpert paths of ``patients`` (numbers; default ``1..n_patients``, the last in valid)."""
    out = []
    patients = list(range(1, n_patients + 1)) if patients is None else list(patients)
    for p in patients:
        split = "valid" if p == patients[-1] else "train"
        for s in range(1, 1 + (p % 2) + 1):
            out.append(f"{split}/patient{p:05d}/study{s}/view1_frontal.jpg")
            if s == 1:
                out.append(f"{split}/patient{p:05d}/study{s}/view2_lateral.jpg")
    return out


def write_chexpert_plus(root: str | Path, *, n_patients: int = 5, seed: int = 0,
                        images: bool = True, patients: list[int] | None = None) -> Path:
    """Write the replica under ``root``; returns the PNG image folder ``root/PNG``.
    ``patients``: CheXpert patient numbers to write (e.g. those of a CheXpert replica)."""
    root = Path(root)
    paths = default_paths(n_patients, patients)
    write_plus_tables(root, paths, seed=seed)
    rng = np.random.default_rng(seed + 1)
    if images:
        for p in paths:
            write_png(root / "PNG" / (p[:-4] + ".png"), synthetic_cxr(320, 300, rng=rng, bits=8))
    (root / "PNG").mkdir(parents=True, exist_ok=True)
    return root / "PNG"


@register_fake("chexpert_plus")
def make(root: Path) -> dict:
    """Contract-suite maker: the PNG release of 5 patients."""
    return {"base_image_dir": write_chexpert_plus(root)}
