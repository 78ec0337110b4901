"""A MIMIC-CXR-JPG 2.1.0 replica in the real on-disk format (plus MIMIC-CXR's reports).

Layout (``physionet.org/files/mimic-cxr-jpg/2.1.0/`` with ``mimic-cxr-reports.zip`` extracted
into it)::

    <root>/mimic-cxr-2.0.0-metadata.csv.gz   one row per image
    <root>/mimic-cxr-2.0.0-chexpert.csv.gz   one row per study, 14 findings
    <root>/mimic-cxr-2.0.0-negbio.csv.gz     same columns, NegBio's values
    <root>/mimic-cxr-2.0.0-split.csv.gz      dicom_id,study_id,subject_id,split
    <root>/mimic-cxr-2.1.0-test-set-labeled.csv   study_id + 14 labels (radiologists)
    <root>/files/p10/p10000032/s50414267/<dicom_id>.jpg    8-bit grayscale JPEG
    <root>/files/p10/p10000032/s50414267.txt               the study's free-text report

Quirks reproduced: dicom ids of five 8-hex groups; ``p`` + first two digits folders; label
values ``1.0`` / ``0.0`` / ``-1.0`` / empty; CheXpert and NegBio disagreeing; one study with no
label row; one study without a report; an empty ``ViewPosition``; ``StudyTime`` with fractions;
split ``validate`` (not ``val``); reports with the ``FINAL REPORT`` banner and indented lines.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv

METADATA = ["dicom_id", "subject_id", "study_id", "PerformedProcedureStepDescription",
            "ViewPosition", "Rows", "Columns", "StudyDate", "StudyTime",
            "ProcedureCodeSequence_CodeMeaning", "ViewCodeSequence_CodeMeaning",
            "PatientOrientationCodeSequence_CodeMeaning"]
LABELS = ["Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Enlarged Cardiomediastinum",
          "Fracture", "Lung Lesion", "Lung Opacity", "No Finding", "Pleural Effusion",
          "Pleural Other", "Pneumonia", "Pneumothorax", "Support Devices"]
VIEWS = [("PA", "postero-anterior", "Erect"), ("LATERAL", "lateral", "Erect"),
         ("AP", "antero-posterior", "Erect"), ("LL", "left lateral", "Erect"),
         ("", "", "")]
TEST_NAMES = {"Lung Opacity": "Airspace Opacity"}  # the test-set file's spelling
REPORT = ("                                 FINAL REPORT\n EXAMINATION:  CHEST (PA AND LAT)\n \n"
          " INDICATION:  ___F with cough\n \n COMPARISON:  ___\n \n FINDINGS: \n \n"
          " {findings}\n \n IMPRESSION: \n \n {impression}\n")


def write_mimic(root: str | Path, *, n_subjects: int = 3, seed: int = 0, images: bool = True,
                image_size: tuple[int, int] = (320, 256), subjects: list[str] | None = None
                ) -> Path:
    """Write the replica under ``root`` and return ``root`` (the ``base_image_dir``).
    ``subjects``: the 8-digit subject ids to write (e.g. shared with an MS-CXR replica)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    meta, chexpert, negbio, split = [], [], [], []
    n_subjects = n_subjects if subjects is None else len(subjects)
    for s in range(n_subjects):
        subject = str(10000032 + 1_000_000 * s + int(rng.integers(0, 99999)))
        subject = subject if subjects is None else str(subjects[s])
        for k in range(2 if s < 2 else 1):
            study = str(50000000 + int(rng.integers(0, 9999999)))
            part = ["train", "validate", "test"][s % 3]
            folder = root / "files" / f"p{subject[:2]}" / f"p{subject}"
            for v in range(1 + (s + k) % 3):
                dicom = "-".join(f"{int(x):08x}" for x in rng.integers(0, 2**32, 5))
                view, code, orient = VIEWS[(s + k + v) % len(VIEWS)]
                h, w = image_size if v % 2 == 0 else image_size[::-1]
                meta.append([dicom, subject, study, "CHEST (PA AND LAT)", view, h, w,
                             21800506 + k, f"{213014 + v}.531", "CHEST (PA AND LAT)", code,
                             orient])
                split.append([dicom, study, subject, part])
                if images:
                    import cv2

                    (folder / f"s{study}").mkdir(parents=True, exist_ok=True)
                    cv2.imwrite(str(folder / f"s{study}" / f"{dicom}.jpg"),
                                synthetic_cxr(h, w, rng=rng, bits=8),
                                [cv2.IMWRITE_JPEG_QUALITY, 95])
            values = rng.choice(["1.0", "0.0", "-1.0", "", "", ""], len(LABELS))
            if not (s == 0 and k == 1):  # this study has no label row
                chexpert.append([subject, study, *values])
                negbio.append([subject, study, *np.where(values == "-1.0", "1.0", values)])
            if not (s == 1 and k == 0):  # this study has no report
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"s{study}.txt").write_text(REPORT.format(
                    findings="Heart size is normal. No pleural effusion.",
                    impression="No acute cardiopulmonary process."))
    write_csv(root / "mimic-cxr-2.0.0-metadata.csv.gz", METADATA, meta)
    for name, rows in (("chexpert", chexpert), ("negbio", negbio)):
        write_csv(root / f"mimic-cxr-2.0.0-{name}.csv.gz", ["subject_id", "study_id", *LABELS],
                  rows)
    write_csv(root / "mimic-cxr-2.0.0-split.csv.gz",
              ["dicom_id", "study_id", "subject_id", "split"], split)
    test = sorted({r[1] for r in split if r[3] == "test"})  # radiologists' labels, 2.1.0
    write_csv(root / "mimic-cxr-2.1.0-test-set-labeled.csv",
              ["study_id", *[TEST_NAMES.get(c, c) for c in LABELS]],
              [[study, *rng.choice(["1.0", "0.0", "-1.0", ""], len(LABELS))] for study in test])
    return root


def studies(root: str | Path) -> list[dict]:
    """The studies of a replica :func:`write_mimic` wrote under ``root``, in file order:
    ``subject``, ``study``, ``date``, ``split`` and parallel ``dicoms`` / ``views`` lists (the
    VQA replicas built over MIMIC ask about these)."""
    import pandas as pd

    root = Path(root)
    meta = pd.read_csv(root / "mimic-cxr-2.0.0-metadata.csv.gz", dtype=str,
                       keep_default_na=False)
    split = pd.read_csv(root / "mimic-cxr-2.0.0-split.csv.gz", dtype=str)
    part = dict(zip(split["dicom_id"], split["split"]))
    out: dict = {}
    for r in meta.itertuples():
        s = out.setdefault(r.study_id, {"subject": r.subject_id, "study": r.study_id,
                                        "date": int(r.StudyDate), "split": part[r.dicom_id],
                                        "dicoms": [], "views": []})
        s["dicoms"].append(r.dicom_id)
        s["views"].append(r.ViewPosition)
    return list(out.values())


@register_fake("mimic_cxr_jpg", "mimic_cxr_jpg_test")
def make(root: Path) -> dict:
    """Contract-suite maker (both keys share the replica): 6 patients, JPEGs and reports, two
    of the patients in the labelled test split."""
    return {"base_image_dir": write_mimic(root, n_subjects=6)}
