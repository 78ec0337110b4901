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
* **Volumes** (a NIfTI or NumPy file, or a DICOM series folder): the file's bytes (a folder's:
  its files' names and bytes in name order) by xxHash3-128, and a fingerprint of the stored
  array (:func:`volume_print`: block means on a :data:`PRINT_GRID` grid, standardised, so a
  copy rescaled to other units or re-encoded matches); a source volume with the same bytes as
  a hold-out volume, or whose fingerprint correlates with one's at :data:`NEAR_CORRELATION`
  or more, drops its units (``hold_out_image``, counted ``exact`` / ``near``).
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xxhash

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


#: the files (and folders: DICOM series) held out as volumes, by name ending
VOLUME_SUFFIXES = (".nii.gz", ".nii", ".npz", ".npy")
#: the grid a volume's fingerprint is taken on, (D, H, W) of the stored array
PRINT_GRID = (16, 32, 32)
#: fingerprints correlating this much or more are near-duplicates
NEAR_CORRELATION = 0.995


def is_volume(path: str) -> bool:
    """Whether ``path`` names a volume (a volume file, or a folder: a DICOM series)."""
    return path.endswith(VOLUME_SUFFIXES) or os.path.isdir(path)


def _stored_array(path: str) -> np.ndarray:
    """The array as stored (no reorientation, no rescale): a NIfTI's data block, a NumPy
    file's first array, a DICOM series read in geometric order."""
    if os.path.isdir(path):
        from ..volumes import read_volume

        return read_volume(path, check=False).array
    if path.endswith((".npz", ".npy")):
        got = np.load(path)
        return got[got.files[0]] if hasattr(got, "files") else got
    import nibabel as nib

    return np.asanyarray(nib.load(path).dataobj)


def volume_digest(path: str) -> str:
    """xxHash3-128 of a volume file's bytes, or of a folder's files (names and bytes, in name
    order)."""
    h = xxhash.xxh3_128()
    files = [path] if not os.path.isdir(path) else sorted(
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)
    for f in files:
        if f != path:
            h.update(os.path.relpath(f, path).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def volume_print(array: np.ndarray, grid=PRINT_GRID) -> np.ndarray:
    """The fingerprint of a stored array (3-D; a 4-D one's first volume): the means of
    :data:`PRINT_GRID` blocks, standardised (zero mean, unit norm; a constant array gives
    zeros), float32. The dot product of two is their correlation.

    >>> a = np.arange(4 * 8 * 8, dtype=np.float32).reshape(4, 8, 8)
    >>> p, q = volume_print(a, (2, 2, 2)), volume_print(a * 3 - 1024, (2, 2, 2))
    >>> round(float(p @ q), 6), p.shape
    (1.0, (8,))
    """
    a = np.asarray(array, np.float32)
    while a.ndim > 3:
        a = a[..., 0]
    for axis, n in enumerate(grid):
        edges = np.linspace(0, a.shape[axis], min(n, a.shape[axis]) + 1).astype(np.int64)[:-1]
        sums = np.add.reduceat(a, edges, axis=axis)
        counts = np.diff(np.append(edges, a.shape[axis])).astype(np.float32)
        shape = [1] * a.ndim
        shape[axis] = len(counts)
        a = sums / counts.reshape(shape)
    v = a.reshape(-1) - a.mean()
    norm = float(np.linalg.norm(v))
    out = np.zeros(int(np.prod(grid)), np.float32)
    out[:v.size] = v / norm if norm > 0 else 0.0
    return out


def volume_fingerprints(root: str, paths: list[str]) -> tuple[list, list, np.ndarray, int]:
    """``(paths read, digests, prints (N, cells), missing)`` of the volumes under ``root``."""
    got, digests, prints, missing = [], [], [], 0
    for p in paths:
        full = os.path.join(root, p)
        if not os.path.exists(full):
            missing += 1
            continue
        got.append(p)
        digests.append(volume_digest(full))
        prints.append(volume_print(_stored_array(full)))
    cells = int(np.prod(PRINT_GRID))
    return got, digests, np.array(prints, np.float32).reshape(-1, cells), missing


def _volume_paths(paths: list[str], root: str) -> tuple[list, list]:
    """``paths`` split into (volumes, images)."""
    vol = [is_volume(p) or is_volume(os.path.join(root, p)) for p in paths]
    return [p for p, v in zip(paths, vol) if v], [p for p, v in zip(paths, vol) if not v]


@dataclass
class HoldOut:
    """The hold-out sets of a mixture, read: ``patients`` (namespaced keys), the images'
    fingerprints, and one summary per set for ``mixture.json``."""

    patients: frozenset = frozenset()
    digests: frozenset = frozenset()
    hashes: np.ndarray = field(default_factory=lambda: np.zeros((0, 32), np.uint8))
    sets: list = field(default_factory=list)
    prints: np.ndarray = field(default_factory=lambda: np.zeros(
        (0, int(np.prod(PRINT_GRID))), np.float32))

    def duplicates(self, root: str, table, *, workers, progress: bool
                   ) -> tuple[frozenset, dict]:
        """``(paths of duplicates, summary)``: the images of ``table`` (under ``root``) whose
        bytes or perceptual hash match a hold-out image."""
        if not len(self.hashes) and not self.digests:
            return frozenset(), {"checked": 0, "missing": 0, "exact": 0, "near": 0,
                                 "status": "no hold-out image files: held out by patient only"}
        volumes, images = _volume_paths(image_files(table), root)
        if volumes and not images:
            return self._volume_duplicates(root, volumes)
        fp = fingerprint(root, images, workers=workers, progress=progress)
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


    def _volume_duplicates(self, root: str, paths: list[str]) -> tuple[frozenset, dict]:
        """The source volumes with a hold-out volume's bytes or a near fingerprint."""
        got, digests, prints, missing = volume_fingerprints(root, paths)
        exact = np.array([d in self.digests for d in digests], bool)
        near = np.zeros(len(got), bool)
        if len(got) and len(self.prints):
            near = (prints @ self.prints.T).max(axis=1) >= NEAR_CORRELATION
        bad = exact | near
        status = "checked" if not missing else (
            "volume files missing: held out by patient only" if not got else
            "some volume files missing: those held out by patient only")
        return (frozenset(p for p, b in zip(got, bad) if b),
                {"checked": len(got), "missing": missing, "unreadable": 0,
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
    hashes, sets, inputs, prints = [], [], [], []
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
        volumes, images = _volume_paths(image_files(table), h.root)
        fp = fingerprint(h.root, images, workers=workers, progress=progress)
        digests.update(fp.digests.tolist())
        hashes.append(fp.hashes)
        if volumes:
            got, vd, vp, vmissing = volume_fingerprints(h.root, volumes)
            digests.update(vd)
            prints.append(vp)
            fp = Fingerprints(fp.paths + got, fp.digests, fp.hashes, fp.missing + vmissing,
                              fp.unreadable)
        sets.append({"name": h.name, "dataset": h.dataset, "root": h.root, "split": h.split,
                     "rows": int(len(table)), "patients": int(len(set(keys.tolist()))),
                     "images": {"checked": fp.scanned, "missing": fp.missing,
                                "unreadable": fp.unreadable}})
        inputs.append(identity)
        del ds, table
    held = HoldOut(frozenset(patients), frozenset(digests),
                   np.vstack(hashes) if hashes else np.zeros((0, 32), np.uint8), sets)
    if prints:
        held.prints = np.vstack(prints)
    return held, inputs


__all__ = ["Fingerprints", "HoldOut", "NEAR_CORRELATION", "PRINT_GRID", "dataset_key",
           "fingerprint", "image_files", "input_identity", "is_volume", "missing_side_files",
           "open_dataset", "read_hold_out", "split_rows", "volume_digest",
           "volume_fingerprints", "volume_print"]
