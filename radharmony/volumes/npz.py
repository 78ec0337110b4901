"""NumPy volumes (``.npz``, ``.npy``): an array with no geometry of its own, declared by the
caller -- the direction each array axis runs toward and the voxel size along it.

RAD-ChestCT ships ``<NoteAcc_DEID>.npz`` (key ``ct``) with axes (I, P, L) at 0.8 mm:
``read_npz(path, axes="IPL", spacing=(0.8, 0.8, 0.8))``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from ..errors import ImageReadError, RadHarmonyError

#: the LPS unit vector each direction letter stands for
DIRECTIONS = {"L": (1, 0, 0), "R": (-1, 0, 0), "P": (0, 1, 0), "A": (0, -1, 0),
              "S": (0, 0, 1), "I": (0, 0, -1)}


class DeclaredGeometryError(RadHarmonyError, ValueError):
    """A NumPy volume's declared geometry (axes, spacing, key) is missing or unusable."""


def declared_affine(axes: str, spacing, origin=(0.0, 0.0, 0.0), *, where="a NumPy volume"
                    ) -> np.ndarray:
    """The LPS affine of an array whose axes run toward ``axes`` (three letters of
    L/R, P/A, S/I, one of each pair) with voxel sizes ``spacing`` (mm, array order)."""
    axes = str(axes or "").upper()
    pairs = [{"L", "R"}, {"P", "A"}, {"S", "I"}]
    if len(axes) != 3 or any(sum(c in p for c in axes) != 1 for p in pairs):
        raise DeclaredGeometryError(
            f"{where}: the axis order is not declared", expected="axes= three letters, one of "
            "each of L/R, P/A, S/I, naming where each array axis runs (e.g. 'IPL')",
            found=repr(axes or None), fix="pass axes= as the dataset documents it")
    try:
        spacing = np.broadcast_to(np.asarray(spacing, dtype=np.float64), (3,))
    except (TypeError, ValueError):
        spacing = np.full(3, np.nan)
    if not np.isfinite(spacing).all() or (spacing <= 0).any():
        raise DeclaredGeometryError(
            f"{where}: the voxel spacing is not declared", expected="spacing= one positive "
            "number (isotropic) or three, in mm, in the array's axis order",
            found=repr(spacing.tolist()), fix="pass spacing= as the dataset documents it")
    affine = np.eye(4)
    for a, letter in enumerate(axes):
        affine[:3, a] = np.array(DIRECTIONS[letter], dtype=np.float64) * spacing[a]
    affine[:3, 3] = origin
    return affine


def read_npz(path: str | Path, *, axes: str | None = None, spacing=None, key: str | None = None,
             origin=(0.0, 0.0, 0.0), ct: bool = False, check: bool = True):
    """The canonical :class:`~radharmony.volumes.Volume` of a ``.npz``/``.npy`` array with the
    declared geometry (see :func:`declared_affine`). ``key``: the array in a ``.npz`` (default
    its only one, or ``ct``). Values as stored (``ct=True``: int16 Hounsfield units, checked).
    """
    from .checks import as_hu, check_hu
    from .geometry import to_canonical
    from .volume import Volume, VolumeSource

    path = Path(path)
    affine = declared_affine(axes, spacing, origin, where=str(path))
    array = _load(path, key)
    if array.ndim != 3:
        raise DeclaredGeometryError(f"{path}: not a 3-D array", expected="(3 axes)",
                                    found=f"shape {array.shape}",
                                    fix="pass key= naming the volume, or split the array")
    view, canonical = to_canonical(array, affine)
    out = np.ascontiguousarray(view)
    if ct:
        out = as_hu(out)
        if check:
            check_hu(out, path)
    source = VolumeSource(files=(str(path),), reader="npz",
                          notes=(f"declared axes {axes.upper()}, spacing "
                                 f"{tuple(float(s) for s in np.broadcast_to(spacing, (3,)))}",))
    return Volume.from_array(out, canonical, source=source)


def _load(path: Path, key: str | None) -> np.ndarray:
    try:
        if path.name.lower().endswith(".npy"):
            return np.load(path, mmap_mode="r", allow_pickle=False)
        with np.load(path, allow_pickle=False) as bundle:
            names = list(bundle.files)
            name = key or (names[0] if len(names) == 1 else "ct" if "ct" in names else None)
            if name not in names:
                raise DeclaredGeometryError(
                    f"{path}: which array is the volume?", expected=f"key= one of {names}",
                    found=repr(key), fix="pass key= naming the volume's array")
            return bundle[name]
    except RadHarmonyError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ImageReadError(f"Cannot read the NumPy volume {path}",
                             expected="a complete .npy/.npz file",
                             found=f"{type(exc).__name__}: {exc}",
                             fix="download or write the file again") from None
