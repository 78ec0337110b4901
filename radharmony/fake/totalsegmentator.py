"""A TotalSegmentator v2 replica in the real on-disk format.

Layout (``<root>/Totalsegmentator_dataset_v201`` is ``base_image_dir``)::

    meta.csv                                   ';'-separated, UTF-8 with a BOM
    s0000/ct.nii.gz                            int16 HU, RAS-oriented header (sform and qform)
    s0000/segmentations/<structure>.nii.gz     117 uint8 binary masks, the CT's header

Quirks reproduced: the semicolons and the BOM of ``meta.csv`` with its eleven columns and
``val`` (not ``valid``) as a split; one binary file per structure, all 117 present even when
empty; the CT stored in the file order (x toward the right, y anterior, z superior) that
canonical reading turns into (S, P, L).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.totalsegmentator import META_COLUMNS, STRUCTURES
from .volumes import synthetic_ct, write_nifti

#: canonical (S, P, L) index -> the file's (R, A, S) index order, RAS affine at 1.5 mm
SPACING = 1.5


def file_order(array: np.ndarray) -> np.ndarray:
    """A canonical (S, P, L) array in the file's (x, y, z) = (R, A, S) order."""
    return np.ascontiguousarray(array.transpose(2, 1, 0)[::-1, ::-1, :])


def file_affine() -> np.ndarray:
    """The RAS affine of :func:`file_order`'s index."""
    return np.diag([SPACING, SPACING, SPACING, 1.0])


def structure_boxes(shape) -> dict[str, tuple[slice, slice, slice]]:
    """Where the replica's non-empty structures lie, in the canonical order."""
    d, h, w = shape
    return {"liver": (slice(1, d // 2), slice(2, h // 2), slice(1, w // 3)),
            "heart": (slice(d // 2, d - 1), slice(h // 3, 2 * h // 3), slice(w // 3, w // 2)),
            # overlaps the heart: the later structure in the order (aorta) wins there
            "aorta": (slice(d // 2, d - 2), slice(h // 2, h - 2), slice(w // 3, w // 2 + 2))}


def write_subject(base: Path, image_id: str, *, shape=(8, 12, 12), rng=None) -> Path:
    folder = base / image_id
    write_nifti(folder / "ct.nii.gz", file_order(synthetic_ct(shape, rng=rng)),
                file_affine(), dtype=np.int16)
    boxes = structure_boxes(shape)
    for name in STRUCTURES:
        mask = np.zeros(shape, np.uint8)
        if name in boxes:
            mask[boxes[name]] = 1
        write_nifti(folder / "segmentations" / f"{name}.nii.gz", file_order(mask),
                    file_affine(), dtype=np.uint8)
    return folder


def write_totalsegmentator(root: str | Path, *, splits=("train", "train", "val", "test"),
                           seed: int = 0, shape=(8, 12, 12), volumes: bool = True) -> Path:
    """Write one subject per entry of ``splits`` and return the dataset folder."""
    base = Path(root) / "Totalsegmentator_dataset_v201"
    base.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = [";".join(META_COLUMNS)]
    for k, split in enumerate(splits):
        image_id = f"s{k:04d}"
        lines.append(";".join([image_id, str(40 + k), "mf"[k % 2], "A", "ct thorax-abdomen",
                               split, "Siemens", "SOMATOM Definition AS", "120",
                               "no_pathology" if k % 2 else "tumor", "" if k % 2 else "liver"]))
        if volumes:
            write_subject(base, image_id, shape=shape, rng=rng)
    (base / "meta.csv").write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    return base


@register_fake("totalsegmentator")
def make(root: Path) -> dict:
    """Contract-suite maker: four subjects (train, train, val, test)."""
    return {"base_image_dir": write_totalsegmentator(root)}
