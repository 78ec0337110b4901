"""An RSNA 2024 Lumbar Spine replica in the real on-disk format (the Kaggle release).

Layout (``<root>`` is ``base_image_dir``)::

    <root>/train.csv                         study_id + the 25 severity columns
    <root>/train_series_descriptions.csv     study_id,series_id,series_description
    <root>/train_label_coordinates.csv       study_id,series_id,instance_number,condition,level,x,y
    <root>/train_images/<study_id>/<series_id>/<instance_number>.dcm

Quirks reproduced: MR slices (uint16, no rescale) named by their instance numbers; the
sagittal series' instance numbers run against the slice normal (instance 1 is the last slice
along it), so only the geometry orders them; the axial series holds two stacks at different
angles, its instance numbers running on from one stack to the next; one empty severity cell;
``bad_points=True`` adds a point on an instance number that does not exist and one outside its
image.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.rsna_lumbar_spine import (COORDINATE_COLUMNS, GRADED, SERIES_COLUMNS,
                                          SIDE_FILES, TREE)
from .tables import write_csv
from .volumes import SAGITTAL, slice_positions, write_dicom_series

#: rows, columns of every fake slice
PLANE = (16, 12)
SAGITTAL_SLICES = 5
#: the axial stacks' tilts about the left-right axis (degrees) and slices: one per disc
AXIAL_STACKS = ((-10.0, 3), (12.0, 3))
DESCRIPTIONS = ("Sagittal T1", "Sagittal T2/STIR", "Axial T2")
#: the stored value at each point's pixel (the rest is below 1,500)
MARK = 4000
#: the points of every study: series (1 sagittal T1, 2 sagittal T2/STIR, 3 axial T2), instance
#: number, condition, level, x, y
POINTS = ((2, 4, "Spinal Canal Stenosis", "L1/L2", 5, 3),
          (3, 5, "Left Subarticular Stenosis", "L4/L5", 4, 6),
          (1, 1, "Right Neural Foraminal Narrowing", "L5/S1", 0, 15))
#: the fake's severities: study i takes WORDS[(i + j) % 4] for column j (one empty cell)
WORDS = ("Normal/Mild", "Moderate", "Severe", "Normal/Mild")


def tilted_axial(degrees: float) -> tuple[float, ...]:
    """An axial orientation tilted about the left-right axis (the disc's angle)."""
    a = np.radians(degrees)
    return (1.0, 0.0, 0.0, 0.0, float(np.cos(a)), float(np.sin(a)))


def write_stacks(folder: Path, stacks, *, series_uid: str, first_instance: int = 1,
                 against: bool = False, marks=None, seed: int = 0, **tags
                 ) -> list[list[int]]:
    """One MR series of several stacks under ``folder``, file names the instance numbers
    (running on from stack to stack, from ``first_instance``): ``stacks`` is a list of
    ``(orientation, positions, stored)``; ``against``: instance numbers run against the slice
    normal; ``marks``: instance -> ``(x, y)`` pixels set to :data:`MARK` (where a point is
    drawn). Returns each stack's instance numbers in slice order (along the normal)."""
    import pydicom

    out, n = [], first_instance
    for k, (orientation, positions, stored) in enumerate(stacks):
        paths = write_dicom_series(folder, stored, orientation=orientation, positions=positions,
                                   series_uid=series_uid, modality="MR", intercept=0.0,
                                   shuffle=False, reverse_instances=False, seed=seed + k,
                                   names=f"tmp{k}_{{}}", **tags)
        numbers = list(range(n, n + len(paths)))
        numbers = numbers[::-1] if against else numbers
        for path, number in zip(paths, numbers):
            ds = pydicom.dcmread(path)
            ds.InstanceNumber = number
            for x, y in (marks or {}).get(number, ()):
                pixels = ds.pixel_array.copy()
                pixels[y, x] = MARK
                ds.PixelData = pixels.tobytes()
            ds.save_as(folder / f"{number}.dcm", enforce_file_format=True)
            path.unlink()
        out.append(numbers)
        n += len(paths)
    return out


def write_study(root: Path, study: int, *, rng, seed: int = 0) -> dict[str, list[list[int]]]:
    """One study's three series (sagittal T1, sagittal T2/STIR, axial T2 of two stacks);
    returns series id -> its stacks' instance numbers in slice order."""
    out = {}
    for s, description in enumerate(DESCRIPTIONS):
        series = f"{study}{s + 1}"
        if s < 2:
            positions = slice_positions(SAGITTAL_SLICES, SAGITTAL, origin=(20.0, -40.0, 30.0),
                                        step=4.0)
            stacks = [(SAGITTAL, positions, _stored(SAGITTAL_SLICES, rng))]
        else:
            stacks = [(tilted_axial(t), slice_positions(n, tilted_axial(t),
                                                        origin=(-30.0, -40.0, -20.0 + 40 * k),
                                                        step=4.0), _stored(n, rng))
                      for k, (t, n) in enumerate(AXIAL_STACKS)]
        out[series] = write_stacks(root / TREE / str(study) / series, stacks,
                                   series_uid=f"1.2.826.0.1.3680043.8.498.{seed}.{series}",
                                   against=s < 2, seed=seed + s, SeriesDescription=description,
                                   marks={n: [(x, y)] for r, n, _, _, x, y in POINTS if r == s + 1},
                                   StudyInstanceUID=f"1.2.826.0.1.3680043.8.498.{seed}.{study}")
    return out


def _stored(slices: int, rng) -> np.ndarray:
    return rng.integers(0, 1500, (slices, *PLANE)).astype(np.uint16)


def write_rsna_lumbar_spine(root: str | Path, *, n_studies: int = 2, seed: int = 0,
                            bad_points: bool = False) -> Path:
    """Write an RSNA 2024 Lumbar Spine replica under ``root`` and return it. Studies ``1001``,
    ``1002``, ...; series ``<study>1`` sagittal T1, ``<study>2`` sagittal T2/STIR,
    ``<study>3`` axial T2 (two stacks). Points (:data:`POINTS`, each pixel :data:`MARK`):
    spinal canal stenosis L1/L2 on the sagittal T2's instance 4 at (5, 3); left subarticular
    stenosis L4/L5 on the axial's second stack (instance 5) at (4, 6); right neural foraminal
    narrowing L5/S1 on the sagittal T1's instance 1 at (0, 15)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    train, series_rows, points = [], [], []
    for i in range(n_studies):
        study = 1001 + i
        write_study(root, study, rng=rng, seed=seed)
        words = [WORDS[(i + j) % len(WORDS)] for j in range(len(GRADED))]
        if i == 0:
            words[len(GRADED) - 1] = ""                   # an empty cell, as released
        train.append([study, *words])
        series_rows += [[study, f"{study}{s + 1}", d] for s, d in enumerate(DESCRIPTIONS)]
        points += [[study, f"{study}{r}", n, c, lv, float(x), float(y)]
                   for r, n, c, lv, x, y in POINTS]
        if bad_points and i == 0:
            points += [[study, f"{study}2", 99, "Spinal Canal Stenosis", "L2/L3", 5.0, 7.0],
                       [study, f"{study}2", 2, "Spinal Canal Stenosis", "L3/L4", 40.0, 7.0]]
    write_csv(root / "train.csv", ["study_id", *GRADED], train, newline="\n")
    write_csv(root / SIDE_FILES["series"], list(SERIES_COLUMNS), series_rows, newline="\n")
    write_csv(root / SIDE_FILES["coordinates"], list(COORDINATE_COLUMNS), points, newline="\n")
    return root


@register_fake("rsna_lumbar_spine")
def make(root: Path) -> dict:
    """Contract-suite maker: two studies, four stacks each."""
    return {"base_image_dir": write_rsna_lumbar_spine(root)}
