"""A PadChest replica in the real on-disk format.

Layout, as the ``<N>.zip`` archives and the table ship::

    <root>/<ImageDir>/<StudyID>_<suffix>.png      (16-bit grayscale, 12 bits used)
    <root>/PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz

Quirks reproduced: the unnamed leading index column; Python list literals for ``Labels`` and
``Localizations`` (terms with leading spaces, ``''`` terms); numpy-printed
``LabelsLocalizationsBySentence`` / ``labelCUIS`` whose line wraps put newlines inside quoted
fields; missing ``Labels``/``Report`` written as ``nan``; DICOM fields ``None``; reports with a
leading space; a study with two images; terms that a substring match would get wrong
(``pericardial effusion``, ``pseudonodule``, ``subcutaneous emphysema``).
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np

from ..datasets.padchest import COLUMNS
from . import register_fake
from .images import synthetic_cxr, write_png

HEADER = COLUMNS  # the real header; the real-table test pins it
FILE = "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz"
TERM_SETS = [["normal"], ["pleural effusion", " pneumonia"], [" pericardial effusion"],
             ["pseudonodule", "COPD signs"], ["nodule", "", "unchanged"],
             ["subcutaneous emphysema", " laminar atelectasis"], ["cardiomegaly", " hiatal hernia"],
             [""], ["callus rib fracture", "infiltrates"]]
PROJECTIONS = (("PA", "POSTEROANTERIOR"), ("L", "LATERAL"), ("AP_horizontal", "None"),
               ("AP", "AP"), ("COSTAL", "None"), ("UNK", "None"))


def numpy_text(items: list[str], *, width: int = 75) -> str:
    """``items`` as numpy prints a 1-D string array: ``['a' 'b']``, wrapped with newlines."""
    line, lines = "[", []
    for i, s in enumerate(items):
        piece = repr(s) + ("]" if i == len(items) - 1 else "")
        if len(line) + len(piece) + 1 > width and line.strip("["):
            lines.append(line.rstrip())
            line = " "
        line += piece + ("" if i == len(items) - 1 else " ")
    return "\n".join(lines + [line if items else "[]"])


def sentences_text(sentences: list[list[str]]) -> str:
    """``LabelsLocalizationsBySentence``: numpy 2-D print when rows are equal length (one row
    a line), else the Python list repr."""
    if len({len(s) for s in sentences}) == 1 and len(sentences) > 1:
        return "[" + "\n ".join(repr(s) for s in sentences) + "]"
    return repr(sentences)


def padchest_row(image_id: str, image_dir: int, study: str, patient: str, *,
                 labels: list[str] | None = None, report: str = " sin hallazg patolog .",
                 projection: str = "PA", view: str = "POSTEROANTERIOR", sex: str = "F",
                 birth: str = "1950.0", date: int = 20150914, index: int = 0) -> list:
    """One row of the table; ``labels=None`` writes a missing ``Labels`` (``nan``)."""
    terms = labels if labels is not None else []
    sentences = [[t.strip()] for t in terms if t.strip()] or [["normal"]]
    return [index, image_id, image_dir, date, study, patient, birth, sex, view, projection,
            "Manual review of DICOM fields", "No", "CR", "ImagingDynamicsCompanyLtd",
            "MONOCHROME2", 0, "None", "None", 12, 2092, 2251, 1728, 1872, 250, 2, 2500, 10,
            "-1.42", 4765777 + index, report if report is not None else "nan",
            "Physician" if index % 3 else "RNN_model",
            repr(terms) if labels is not None else "nan",
            repr(["loc basal"] if terms else []), sentences_text(sentences),
            numpy_text([f"C{1000000 + 7919 * i:07d}" for i in range(len(terms) * 3)]), "[]"]


def write_table(path: str | Path, rows) -> Path:
    """Write rows (gzip when the name ends in .gz) with the real header."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(rows)
    return path


def write_padchest(root: str | Path, *, n_patients: int = 6, seed: int = 0, images: bool = True,
                   image_size: tuple[int, int] = (300, 280), flat: bool = False) -> Path:
    """Write a PadChest replica under ``root`` and return ``root`` (the image root).

    ``flat``: every PNG directly in ``root`` (TorchXRayVision's layout) instead of the
    release's ``<ImageDir>/<ImageID>``."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_patients):
        patient = str(int(rng.integers(10**17, 10**18))) + str(p)
        sex, birth = ("M", "F", "O")[p % 3], ("1950.0", "1987.0", "None")[p % 3]
        for s in range(int(rng.integers(1, 3))):
            study = str(int(rng.integers(10**17, 10**18))) + f"{p}{s}"
            terms = TERM_SETS[len(rows) % len(TERM_SETS)]
            report = " " + " . ".join(t.strip() or "sin hallazg" for t in terms) + " ."
            for v in range(1 + (s == 0)):  # the first study has a PA and a lateral
                proj, view = PROJECTIONS[1] if v else PROJECTIONS[len(rows) % len(PROJECTIONS)]
                i = len(rows)
                rows.append(padchest_row(
                    f"{study}_{''.join(rng.choice(list('abcdefghijk0123456789'), 6))}.png",
                    (0, 1, 54)[i % 3], study, patient, index=i, projection=proj, view=view,
                    labels=None if i == 3 else terms, report=None if i == 4 else report,
                    sex=sex, birth=birth, date=20140101 + i))
    write_table(root / FILE, rows)
    if images:
        h, w = image_size
        for r in rows:
            img = synthetic_cxr(int(h * rng.uniform(0.8, 1)), int(w * rng.uniform(0.8, 1)),
                                rng=rng)
            write_png(root / r[1] if flat else root / str(r[2]) / r[1], img)
    return root


@register_fake("padchest")
def make(root: Path) -> dict:
    """Contract-suite maker: a small replica with 16-bit PNGs."""
    return {"base_image_dir": write_padchest(root)}
