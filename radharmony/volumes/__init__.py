"""Volumes (CT, MRI): one model read exactly, nothing dataset-specific.

Conventions, decided once (``docs/volumes.md``):

- **World space**: DICOM's LPS (x toward the patient's Left, y toward Posterior, z toward
  Superior), in millimetres. :meth:`Volume.in_space` gives the same volume described in RAS.
- **Canonical voxel order**: an array of shape ``(D, H, W)`` whose axes run toward Superior,
  Posterior and Left (for an oblique volume: the closest of these). Displayed with row 0 at the
  top, an axial slice ``array[d]`` shows the patient as radiologists read it (anterior at the
  top, the patient's right on the image's left). A sample's tensor is ``(1, D, H, W)``.
- **Affine**: 4x4, maps the array index ``(d, h, w, 1)`` (the array's own axis order) to world
  millimetres in :attr:`Volume.space`. Spacing is ``(d, h, w)`` too.
- **Intensity**: CT as int16 Hounsfield units (stored value x slope + intercept, applied once);
  MR in its stored type. Floats only after a preset.
"""

from .read import read_volume
from .volume import CANONICAL_AXES, Volume, VolumeSource

__all__ = ["CANONICAL_AXES", "Volume", "VolumeSource", "read_volume"]
