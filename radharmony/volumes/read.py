"""``read_volume``: one entry point for NIfTI files, DICOM series and NumPy volumes.

What a path is decides the reader: a ``.nii``/``.nii.gz`` file -> :mod:`.nifti`; a folder or a
list of files -> a DICOM series (:mod:`.dicom`); a ``.npz``/``.npy`` file -> :mod:`.npz` (its
axis order and spacing declared by the caller). Every reader returns a canonical
:class:`~radharmony.volumes.Volume` (LPS, axes toward S, P, L) with its provenance.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..errors import ImageReadError, RadHarmonyError

NIFTI_SUFFIXES = (".nii", ".nii.gz")
NUMPY_SUFFIXES = (".npz", ".npy")


class VolumePathError(RadHarmonyError, ValueError):
    """A path given to :func:`read_volume` is not a volume radharmony can read."""


def read_volume(path, *, series_uid: str | None = None, rescale=None, ct: bool | None = None,
                check: bool = True, **options):
    """The canonical :class:`~radharmony.volumes.Volume` at ``path``.

    ``path``: a NIfTI file, a folder of DICOM files (searched recursively; several series
    need ``series_uid``), a list of DICOM files, or a NumPy volume (``.npz``/``.npy``) with
    declared geometry (``options``: ``axes=``, ``spacing=``, ``key=``; see
    :func:`.npz.read_npz`). DICOM ``options``: ``stack=`` (a series of several orientations)
    and ``tilt="shear"`` (see :func:`.dicom.read_dicom_series`).
    ``rescale``: (slope, intercept) from side metadata for a NIfTI file whose header holds
    stored values (CT-RATE v1); never applied on top of the header's own. ``ct``: check that
    the values are Hounsfield units (:func:`.checks.check_hu`); DICOM decides it from
    ``Modality`` when ``None``. ``check=False`` skips that check.

    >>> from radharmony.volumes import read_volume
    >>> volume = read_volume("train_1_a_1.nii.gz", rescale=(1, -1024), ct=True)  # doctest: +SKIP
    >>> volume.array.dtype, volume.space                                     # doctest: +SKIP
    (dtype('int16'), 'LPS')
    """
    nifti = not isinstance(path, (list, tuple)) and str(path).lower().endswith(NIFTI_SUFFIXES)
    if rescale is not None and not nifti:
        raise VolumePathError(
            f"{path}: rescale= is for NIfTI files only", expected="a .nii/.nii.gz path",
            found="a DICOM series or a NumPy volume",
            fix="drop rescale= (DICOM files carry their own; NumPy volumes are read as stored)")
    if isinstance(path, (list, tuple)):
        from .dicom import read_dicom_series
        return read_dicom_series([_checked(p) for p in path], series_uid=series_uid, ct=ct,
                                 check=check, **options)
    path = _checked(path)
    name = path.name.lower()
    if path.is_dir():
        from .dicom import read_dicom_series
        return read_dicom_series(path, series_uid=series_uid, ct=ct, check=check, **options)
    if name.endswith(NIFTI_SUFFIXES):
        from .nifti import read_nifti
        return read_nifti(path, rescale=rescale, ct=bool(ct), check=check, **options)
    if name.endswith(NUMPY_SUFFIXES):
        from .npz import read_npz
        return read_npz(path, ct=bool(ct), check=check, **options)
    from .dicom import read_dicom_series
    return read_dicom_series([path], series_uid=series_uid, ct=ct, check=check, **options)


def _checked(path) -> Path:
    """``path`` as a Path that exists (a symlink loop or a missing file named)."""
    path = Path(path)
    try:
        os.stat(path)
    except OSError as exc:
        loop = exc.errno == errno.ELOOP
        raise ImageReadError(
            f"Cannot open the volume {path}",
            expected="an existing NIfTI file, DICOM folder or file, or NumPy volume",
            found=("a symlink loop" if loop else f"{type(exc).__name__}: {exc.strerror or exc}"),
            fix="point the symlink at the real file" if loop else
                "check the path (a typo, a drive not mounted)") from None
    return path
