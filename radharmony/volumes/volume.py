"""The :class:`Volume`: a voxel array, its exact geometry, and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import RadHarmonyError

#: the world directions the canonical array axes (D, H, W) run toward, in LPS
CANONICAL_AXES = ("S", "P", "L")
#: LPS <-> RAS: x and y change sign, z stays
_FLIP_XY = np.diag([-1.0, -1.0, 1.0, 1.0])
SPACES = ("LPS", "RAS")


class VolumeGeometryError(RadHarmonyError, ValueError):
    """A volume's geometry is unusable (zero or non-finite affine, wrong shapes)."""


def check_affine(affine, where: object) -> np.ndarray:
    """``affine`` as float64 4x4, or :class:`VolumeGeometryError` naming ``where`` when it is
    not a usable voxel-to-world transform (zero, non-finite, singular, wrong last row)."""
    affine = np.asarray(affine, dtype=np.float64)
    if affine.shape != (4, 4) or not np.isfinite(affine).all() or \
            abs(np.linalg.det(affine[:3, :3])) < 1e-12 or \
            not np.allclose(affine[3], (0, 0, 0, 1)):
        raise VolumeGeometryError(
            f"{where}: the affine is not a usable voxel-to-world transform",
            expected="a finite 4x4 matrix with an invertible 3x3 part and last row 0 0 0 1",
            found=np.array2string(affine, precision=4).replace("\n", ""),
            fix="check the file's header (qform/sform, PixelSpacing, ImageOrientationPatient)")
    return affine


@dataclass(frozen=True)
class VolumeSource:
    """Where a volume came from: the files read, the DICOM series, and the intensity rescale
    applied to the stored values (``slope``, ``intercept``; ``None`` when none was applied)."""
    files: tuple[str, ...] = ()
    reader: str = ""                      # "nifti", "dicom", "npz", "array"
    series_uid: str | None = None
    rescale: tuple[float, float] | None = None
    notes: tuple[str, ...] = ()           # e.g. "sform used (qform disagrees)"


@dataclass(frozen=True, eq=False)
class Volume:
    """A volume in radharmony's canonical order.

    ``array``: ``(D, H, W)``; ``affine``: 4x4, array index ``(d, h, w, 1)`` -> world mm in
    ``space`` ("LPS" or "RAS"); ``source``: provenance. Make one with :meth:`from_array` (it
    checks the geometry); the readers in :mod:`radharmony.volumes` return canonical volumes.
    """
    array: np.ndarray
    affine: np.ndarray
    space: str = "LPS"
    source: VolumeSource = field(default_factory=VolumeSource)

    @classmethod
    def from_array(cls, array: np.ndarray, affine, *, space: str = "LPS",
                   source: VolumeSource | None = None) -> "Volume":
        """A checked volume (3-D array, finite invertible 4x4 affine, a known space)."""
        array = np.asarray(array)
        affine = np.asarray(affine, dtype=np.float64)
        where = source.files[0] if source and source.files else "a volume"
        if array.ndim != 3:
            raise VolumeGeometryError(f"{where}: a volume array must be 3-D", expected="(D, H, W)",
                                      found=f"shape {array.shape}",
                                      fix="pass one 3-D array (split 4-D series by volume)")
        check_affine(affine, where)
        if space not in SPACES:
            raise VolumeGeometryError(f"{where}: unknown world space {space!r}",
                                      expected=" or ".join(SPACES), found=repr(space),
                                      fix="pass space='LPS' or space='RAS'")
        return cls(array, affine, space, source or VolumeSource())

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.array.shape)

    @property
    def spacing(self) -> tuple[float, float, float]:
        """Voxel size in mm along (d, h, w): the lengths of the affine's columns."""
        return tuple(float(v) for v in np.linalg.norm(self.affine[:3, :3], axis=0))

    def world(self, index) -> np.ndarray:
        """World positions (N, 3) in ``space`` of voxel indices (N, 3) in (d, h, w) order."""
        index = np.atleast_2d(np.asarray(index, dtype=np.float64))
        return index @ self.affine[:3, :3].T + self.affine[:3, 3]

    def voxel(self, world) -> np.ndarray:
        """Voxel indices (N, 3), (d, h, w), fractional, of world positions (N, 3) in ``space``."""
        world = np.atleast_2d(np.asarray(world, dtype=np.float64))
        inverse = np.linalg.inv(self.affine)
        return world @ inverse[:3, :3].T + inverse[:3, 3]

    def in_space(self, space: str) -> "Volume":
        """The same voxels described in ``space`` ("LPS" or "RAS"); the array is shared."""
        if space == self.space:
            return self
        if space not in SPACES:
            raise VolumeGeometryError(f"unknown world space {space!r}",
                                      expected=" or ".join(SPACES), found=repr(space),
                                      fix="pass 'LPS' or 'RAS'")
        return replace(self, affine=_FLIP_XY @ self.affine, space=space)

    def tensor(self):
        """The sample tensor ``(1, D, H, W)`` (torch, sharing memory where it can)."""
        import torch
        return torch.from_numpy(np.ascontiguousarray(self.array))[None]

    def __repr__(self) -> str:
        sp = ", ".join(f"{s:.4g}" for s in self.spacing)
        return (f"Volume(shape={self.shape}, dtype={self.array.dtype}, spacing=({sp}) mm, "
                f"space={self.space}, reader={self.source.reader!r})")
