"""An RSNA-STR Pulmonary Embolism replica in the real on-disk format (the Kaggle release).

Layout (``<root>`` is ``base_image_dir``)::

    <root>/train.csv
    <root>/train/<StudyInstanceUID>/<SeriesInstanceUID>/<SOPInstanceUID>.dcm

Quirks reproduced: file names are the SOP UIDs (no slice order in them); instance numbers run
against the stack (:func:`radharmony.fake.volumes.write_dicom_series`); ``train.csv`` lists
each study's slices in a shuffled order, never the z order; the 13 exam labels repeated on
every slice of the exam; a negative exam has both RV/LV ratio labels 0; one exam is
indeterminate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.rsna_pe import COLUMNS, EXAM_LABELS, TREE
from .tables import write_csv
from .volumes import AXIAL, slice_positions, synthetic_ct, write_dicom_series

ROOT_UID = "1.2.826.0.1.3680043.8.498"
#: the exam labels of a positive, a negative and an indeterminate exam (others 0)
EXAMS = {"positive": {"rv_lv_ratio_gte_1": 1, "rightsided_pe": 1, "central_pe": 1},
         "positive_lt": {"rv_lv_ratio_lt_1": 1, "leftsided_pe": 1, "chronic_pe": 1},
         "negative": {"negative_exam_for_pe": 1},
         "indeterminate": {"indeterminate": 1, "qa_contrast": 1}}


def uid(*parts: int) -> str:
    return ".".join([ROOT_UID, *map(str, parts)])


def write_series(root: Path, study: str, series: str, hu: np.ndarray, *, z0: float,
                 orientation=AXIAL, step: float = 1.25, seed: int = 0) -> list[str]:
    """One study's series under ``root/train``: ``hu`` (slices along the normal of
    ``orientation``, rows, columns) stored with intercept -1024, files named by their SOP UIDs
    (seeded, in an order of their own); returns the SOP UIDs in the slices' order (ascending along the normal)."""
    import pydicom

    folder = root / TREE / study / series
    positions = slice_positions(len(hu), orientation, origin=(-170.0, -160.0, z0), step=step)
    paths = write_dicom_series(folder, (hu.astype(np.int32) + 1024).astype(np.int16),
                               orientation=orientation, positions=positions, intercept=-1024.0,
                               series_uid=series, StudyInstanceUID=study, seed=seed,
                               names="tmp{:05d}.dcm")
    names = np.random.default_rng(seed).permutation(len(paths)) + 1001  # no z order in them
    sops = []
    for path, name in zip(paths, names.tolist()):
        ds = pydicom.dcmread(path)
        sop = f"{series}.{name}"  # seeded (pages and tests stay the same run to run)
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = sop
        ds.save_as(folder / f"{sop}.dcm", enforce_file_format=True)
        path.unlink()
        sops.append(sop)
    return sops


def write_rsna_pe(root: str | Path, *, n_studies: int = 3, seed: int = 0,
                  shape=(10, 20, 24), exams=("positive", "negative", "indeterminate",
                                             "positive_lt")) -> Path:
    """Write an RSNA-STR PE replica under ``root`` and return it. Study ``i`` has one series
    of ``shape`` slices and the exam labels of ``exams[i % 4]``; a positive exam's slices 3,
    4 and 5 in world z order (from the feet) show PE. The CSV lists each study's slices
    shuffled."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_studies):
        study, series = uid(seed, i + 1), uid(seed, i + 1, 2)
        kind = exams[i % len(exams)]
        sops = write_series(root, study, series, synthetic_ct(shape, rng=rng),
                            z0=-250.0 - 20 * i, seed=seed + i)
        exam = {c: EXAMS[kind].get(c, 0) for c in EXAM_LABELS}
        pe = [int(kind.startswith("positive") and 3 <= k <= 5) for k in range(len(sops))]
        order = rng.permutation(len(sops))
        while len(sops) > 1 and (order == np.arange(len(sops))).all():
            order = rng.permutation(len(sops))
        for k in order.tolist():
            rows.append([study, series, sops[k], pe[k], *exam.values()])
    write_csv(root / "train.csv", COLUMNS, rows, newline="\n")
    return root


@register_fake("rsna_pe")
def make(root: Path) -> dict:
    """Contract-suite maker: four exams (positive, negative, indeterminate, positive)."""
    return {"base_image_dir": write_rsna_pe(root, n_studies=4)}
