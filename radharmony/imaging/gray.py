"""Colour to grayscale, shared by every decoder (:mod:`radharmony.imaging.read` for PNG and
JPEG, :mod:`radharmony.imaging.dicom` for DICOM).

Colour (RGB, RGBA, gray + alpha) becomes ITU-R BT.601 luma and the alpha channel is ignored.
When an image's colour channels actually differ (or a JPEG declares colour components), a
:class:`~radharmony.errors.ColourImageWarning` is issued once per process.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import cv2
import numpy as np

from ..errors import ColourImageWarning

_colour_warned = False


def warn_colour(path) -> None:
    """Warn, once per process, that colour image ``path`` (and any further one) is read as
    grayscale."""
    global _colour_warned
    if not _colour_warned:
        _colour_warned = True
        warnings.warn(f"Colour image {path} (and any further ones) converted to grayscale with "
                      "BT.601 luma weights; alpha is ignored.", ColourImageWarning, stacklevel=3)


def to_gray(arr: np.ndarray, *, path: Path | None = None, order: str = "bgr") -> np.ndarray:
    """Colour -> BT.601 luma (alpha ignored; ``order``: ``"bgr"`` as OpenCV decodes,
    ``"rgb"`` as pydicom does); warns once per process when the channels differ."""
    if arr.ndim == 3 and arr.shape[2] == 1:
        return arr[:, :, 0]
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        rgb = np.ascontiguousarray(arr[:, :, :3])
        if not _colour_warned and not (np.array_equal(rgb[:, :, 0], rgb[:, :, 1]) and
                                       np.array_equal(rgb[:, :, 1], rgb[:, :, 2])):
            warn_colour(path)
        return cv2.cvtColor(rgb, cv2.COLOR_BGR2GRAY if order == "bgr" else cv2.COLOR_RGB2GRAY)
    return arr
