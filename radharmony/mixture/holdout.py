"""Hold-out sets: the patients and images no record of a mixture may touch.

* **Patients**: every hold-out row's patient in its identity family's namespace
  (:func:`radharmony.mixture.context.patient_keys`); a source unit of one of them is dropped
  (``hold_out_patient``).
* **Images**: every hold-out image file is read once for the audit's fingerprints
  (:func:`radharmony.audit.scan.scan_files`: the bytes' xxHash3-128 and the 256-bit perceptual
  hash); each source image file is read the same way, and a source image with the same bytes as
  a hold-out image, or within :data:`radharmony.audit.hashing.MAX_DISTANCE` bits of one
  (:func:`~radharmony.audit.hashing.near_pairs`), drops its units (``hold_out_image``), whatever
  patient id it is filed under. Where the image files are not there (metadata only), the
  manifest says so and the hold-out is by patient only.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..audit.hashing import MAX_DISTANCE, near_pairs
from ..audit.sanity import SanityLimits
from ..files import file_identity
from ..audit.scan import scan_files
from .context import patient_keys
from .spec import ALL_ROWS


def open_dataset(key: str, root: str, kwargs: dict):
    """The dataset ``key`` on ``root`` built with ``kwargs`` (its table harmonized, or read
    from the table cache when ``cache_dir`` is given)."""
    from ..registry import get_dataset_class

    return get_dataset_class(key)(root, **kwargs)


def split_rows(table: pd.DataFrame, split: str) -> pd.DataFrame:
    """The rows of ``split`` (every row for ``"all"``)."""
    if split == ALL_ROWS:
        return table
    return table[table["split"].to_numpy(object) == split]


def input_identity(ds) -> list:
    """The identity of every input file the dataset's table was read from
    (:func:`~radharmony.files.file_identity`: path, size, mtime, ctime, inode; None for a side
    file looked for and absent), and each folder it lists by path and suffixes (not walked
    again: the table cache keyed the table on its listing)."""
    inputs = _inputs(ds)
    if inputs is None:
        return []
    out: list = [["metadata", file_identity(inputs.metadata)]]
    out += [[role, None if p is None else file_identity(p)]
            for role, p in sorted(inputs.files.items())]
    out += [[role, None if root is None else os.path.realpath(root), list(suffixes)]
            for role, (root, suffixes) in sorted(inputs.folders.items())]
    return out


def missing_side_files(ds) -> dict[str, list]:
    """The dataset's side files looked for and absent: role -> the paths tried
    (:meth:`~radharmony.table.inputs.Inputs.missing`)."""
    inputs = _inputs(ds)
    return {} if inputs is None else inputs.missing()


def _inputs(ds):
    """What the dataset's table was read from (None: no metadata file, a custom table)."""
    h = getattr(ds, "harmonizer", None)
    return None if h is None or h.csv_path is None else h.inputs(h.csv_path)


def image_files(table: pd.DataFrame) -> list[str]:
    """The distinct image paths of a table (a question table's every image), in first-seen
    order."""
    paths = table["image_path"].astype(str).tolist()
    if "image_paths" in table.columns:
        paths += [str(p) for ps in table["image_paths"] for p in ps]
    return list(dict.fromkeys(paths))


@dataclass
class Fingerprints:
    """Scanned images: ``paths`` (relative), their ``digests`` and ``hashes`` (readable
    images only) and how many files were ``missing``."""

    paths: list
    digests: np.ndarray
    hashes: np.ndarray
    missing: int
    unreadable: int = 0

    @property
    def scanned(self) -> int:
        return len(self.paths)


def fingerprint(root: str, paths: list[str], *, workers, progress: bool) -> Fingerprints:
    """Read the files of ``paths`` under ``root`` that exist; count the rest."""
    full = [os.path.join(root, p) for p in paths]
    there = np.fromiter((os.path.isfile(p) for p in full), bool, len(full))
    rel = [p for p, ok in zip(paths, there) if ok]
    if not rel:
        return Fingerprints([], np.zeros(0, object), np.zeros((0, 32), np.uint8),
                            int(len(paths)))
    scanned = scan_files([f for f, ok in zip(full, there) if ok], [None] * len(rel),
                         limits=SanityLimits(), workers=workers, progress=progress)
    ok = scanned.ok
    return Fingerprints([p for p, k in zip(rel, ok) if k], scanned.digest[ok],
                        scanned.hashes[ok], int((~there).sum()), int((~ok).sum()))


@dataclass
class HoldOut:
    """The hold-out sets of a mixture, read: ``patients`` (namespaced keys), the images'
    fingerprints, and one summary per set for ``mixture.json``."""

    patients: frozenset = frozenset()
    digests: frozenset = frozenset()
    hashes: np.ndarray = field(default_factory=lambda: np.zeros((0, 32), np.uint8))
    sets: list = field(default_factory=list)

    def duplicates(self, root: str, table, *, workers, progress: bool
                   ) -> tuple[frozenset, dict]:
        """``(paths of duplicates, summary)``: the images of ``table`` (under ``root``) whose
        bytes or perceptual hash match a hold-out image."""
        if not len(self.hashes) and not self.digests:
            return frozenset(), {"checked": 0, "missing": 0, "exact": 0, "near": 0,
                                 "status": "no hold-out image files: held out by patient only"}
        fp = fingerprint(root, image_files(table), workers=workers, progress=progress)
        exact = pd.Index(fp.digests, dtype=object).isin(self.digests) if fp.scanned else \
            np.zeros(0, bool)
        near = np.zeros(fp.scanned, bool)
        if fp.scanned and len(self.hashes):
            i, j, _ = near_pairs(np.vstack([self.hashes, fp.hashes]), max_distance=MAX_DISTANCE)
            h = len(self.hashes)
            cross = (i < h) & (j >= h)
            near[j[cross] - h] = True
        bad = exact | near
        status = "checked" if not fp.missing else (
            "image files missing: held out by patient only" if not fp.scanned else
            "some image files missing: those held out by patient only")
        return (frozenset(p for p, b in zip(fp.paths, bad) if b),
                {"checked": fp.scanned, "missing": fp.missing, "unreadable": fp.unreadable,
                 "exact": int(exact.sum()), "near": int((near & ~exact).sum()),
                 "status": status})


def dataset_key(entry) -> str:
    """What makes two spec entries the same dataset (key, root, arguments)."""
    return json.dumps([entry.dataset, entry.root, entry.kwargs], sort_keys=True, default=str)


def read_hold_out(entries, *, workers, progress: bool, keep=frozenset(), pool=None
                  ) -> tuple[HoldOut, list]:
    """The :class:`HoldOut` of a spec's ``hold_out`` entries, and each set's input identity.
    A dataset whose :func:`dataset_key` is in ``keep`` (a source's too) is left in ``pool``
    (key -> ``(dataset, input identity)``), so the source does not read it again."""
    patients: set = set()
    digests: set = set()
    hashes, sets, inputs = [], [], []
    pool = {} if pool is None else pool
    for h in entries:
        ident = dataset_key(h)
        if ident not in pool:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                d = open_dataset(h.dataset, h.root, h.kwargs)
            pool[ident] = (d, input_identity(d))
        ds, identity = pool[ident] if ident in keep else pool.pop(ident)
        table = split_rows(ds.harmonized_df, h.split)
        keys = patient_keys(table, h.dataset, ds.spec)
        patients.update(keys.tolist())
        fp = fingerprint(h.root, image_files(table), workers=workers, progress=progress)
        digests.update(fp.digests.tolist())
        hashes.append(fp.hashes)
        sets.append({"name": h.name, "dataset": h.dataset, "root": h.root, "split": h.split,
                     "rows": int(len(table)), "patients": int(len(set(keys.tolist()))),
                     "images": {"checked": fp.scanned, "missing": fp.missing,
                                "unreadable": fp.unreadable}})
        inputs.append(identity)
        del ds, table
    return HoldOut(frozenset(patients), frozenset(digests),
                   np.vstack(hashes) if hashes else np.zeros((0, 32), np.uint8), sets), inputs


__all__ = ["Fingerprints", "HoldOut", "dataset_key", "fingerprint", "image_files", "input_identity",
           "missing_side_files", "open_dataset", "read_hold_out", "split_rows"]
