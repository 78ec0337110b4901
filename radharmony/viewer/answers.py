"""What every viewer page answers with when it is not a page: the request errors (an HTTP
status each) and a 2-D image as PNG bytes. A module of its own, below the apps, so the viewer's
parts (studies, questions, volumes, mixtures) take them without importing the app."""

from __future__ import annotations

import numpy as np

from ..errors import RadHarmonyError


class ViewerError(RadHarmonyError):
    """A request the viewer cannot answer (unknown split, index or sample id)."""

    status = 400


def png8(arr: np.ndarray) -> bytes:
    """A 2-D image as 8-bit grayscale PNG bytes for a page (a quantized cache array of more
    than 8 bits scaled to its maximum)."""
    import cv2

    if arr.dtype != np.uint8:
        arr = (arr.astype(np.float32) * (255.0 / max(float(arr.max()), 1.0))).astype(np.uint8)
    ok, buf = cv2.imencode(".png", arr)
    if not ok:  # pragma: no cover
        raise ViewerError("Could not encode the image as PNG")
    return buf.tobytes()


class NotFound(ViewerError):
    status = 404


__all__ = ["NotFound", "ViewerError", "png8"]
