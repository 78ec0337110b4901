"""A RAD-ChestCT replica in the real on-disk format.

Layout (``<root>/RAD-ChestCT`` is ``base_image_dir``)::

    RAD-ChestCT/trn00001.npz, val00001.npz, tst00001.npz    key ``ct``: int16 HU, axes I, P, L
    RAD-ChestCT/CT_Scan_Metadata_Complete_35747.csv
    RAD-ChestCT/img{train,valid,test}_Abnormality_and_Location_Labels.csv

Quirks reproduced: volumes with no geometry, their first axis running inferior (the first
slice the most superior), compressed ``.npz`` with the one key ``ct``; the label tables'
4,368 ``<abnormality>*<location>`` columns of 0/1 after ``NoteAcc_DEID``, one row per public
scan; metadata rows of scans that are not public (no labels, no ``.npz``); a patient
(``MRN_DEID``) with two scans. Only the metadata columns radharmony reads are written (the
release has more; their names are not reproduced).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.rad_chestct import ABNORMALITIES, LABEL_FILES, LOCATIONS, METADATA_FILE
from .tables import write_csv
from .volumes import synthetic_ct

PREFIX = {"train": "trn", "valid": "val", "test": "tst"}
LABEL_HEADER = ("NoteAcc_DEID", *(f"{a}*{loc}" for a in ABNORMALITIES for loc in LOCATIONS))


def write_volume(path: Path, hu: np.ndarray) -> Path:
    """``hu`` in the canonical order (S, P, L) as the release stores it: axes (I, P, L)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, ct=np.ascontiguousarray(hu[::-1]))
    return path


def write_rad_chestct(root: str | Path, *, per_split: int = 2, hidden: int = 1,
                      shape=(10, 16, 16), seed: int = 0, positives=None,
                      volumes: bool = True) -> Path:
    """Write a replica under ``root`` and return ``root/RAD-ChestCT``.

    Each split has ``per_split`` public scans (volumes written unless ``volumes=False``) and
    ``hidden`` more scans in the metadata only (not public). Scan ``k`` of a split belongs to
    patient ``MRN<prefix>{k // 2 + 1:05d}`` (two scans per patient). ``positives``: note id ->
    present ``(abnormality, location)`` pairs (default: two random pairs a scan).
    """
    base = Path(root) / "RAD-ChestCT"
    rng = np.random.default_rng(seed)
    meta = []
    for split, prefix in PREFIX.items():
        rows = []
        for k in range(per_split + hidden):
            note = f"{prefix}{k + 1:05d}"
            meta.append([note, f"MRN{prefix}{k // 2 + 1:05d}", "[0.8, 0.8, 0.8]"])
            cells = np.zeros((len(ABNORMALITIES), len(LOCATIONS)), np.int8)
            pairs = (positives or {}).get(note)
            if pairs is None:
                pairs = [(ABNORMALITIES[a], LOCATIONS[b]) for a, b in
                         zip(rng.integers(0, len(ABNORMALITIES), 2),
                             rng.integers(0, len(LOCATIONS), 2))]
            for a, loc in pairs:
                cells[ABNORMALITIES.index(a), LOCATIONS.index(loc)] = 1
            if k >= per_split:
                continue
            rows.append([note, *cells.ravel().tolist()])
            if volumes:
                write_volume(base / f"{note}.npz", synthetic_ct(shape, rng=rng))
        write_csv(base / LABEL_FILES[split], LABEL_HEADER, rows, newline="\n")
    write_csv(base / METADATA_FILE, ("NoteAcc_DEID", "MRN_DEID", "final_spacing"), meta,
              newline="\n")
    return base


@register_fake("rad_chestct")
def make(root: Path) -> dict:
    """Contract-suite maker: two public scans a split, one more in the metadata only."""
    return {"base_image_dir": write_rad_chestct(root)}
