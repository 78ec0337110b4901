"""Letterbox geometry: aspect-preserving resize of the long side, symmetric padding.

Images, boxes and masks go through the same :class:`Letterbox`, so a box covers the same
anatomy before and after.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Letterbox:
    """Maps a ``src_h`` x ``src_w`` image onto a ``size`` x ``size`` square."""

    src_h: int
    src_w: int
    size: int
    new_h: int
    new_w: int
    top: int
    left: int

    @classmethod
    def fit(cls, src_h: int, src_w: int, size: int) -> "Letterbox":
        scale = size / max(src_h, src_w)
        new_h = max(1, min(size, round(src_h * scale)))
        new_w = max(1, min(size, round(src_w * scale)))
        return cls(int(src_h), int(src_w), size, new_h, new_w,
                   (size - new_h) // 2, (size - new_w) // 2)

    def as_dict(self) -> dict:
        return asdict(self)

    def resize(self, arr: np.ndarray, *, interpolation: int = cv2.INTER_AREA) -> np.ndarray:
        """Resize ``arr`` (any size, e.g. a JPEG decoded at reduced scale) to the content box."""
        if arr.shape[:2] == (self.new_h, self.new_w):
            return arr
        return cv2.resize(arr, (self.new_w, self.new_h), interpolation=interpolation)

    def pad(self, content: np.ndarray, fill=0) -> np.ndarray:
        out = np.full((self.size, self.size) + content.shape[2:], fill, dtype=content.dtype)
        out[self.top:self.top + self.new_h, self.left:self.left + self.new_w] = content
        return out

    def boxes(self, xyxy: np.ndarray, *, normalized: bool = False) -> np.ndarray:
        """Boxes ``(N, 4)`` x_min, y_min, x_max, y_max in source pixels (or, with
        ``normalized=True``, in [0, 1] of the source image) -> output pixels.

        Coordinates are continuous (pixel ``i`` spans ``[i, i + 1)``), so the box covers the
        same anatomy before and after. Boxes are clipped to the image content: a box drawn past
        the image edge never reaches into the padding.
        """
        xyxy = np.asarray(xyxy, dtype=np.float32).reshape(-1, 4)
        sx, sy = self.new_w / self.src_w, self.new_h / self.src_h
        if normalized:
            sx, sy = float(self.new_w), float(self.new_h)
        out = xyxy * np.array([sx, sy, sx, sy], np.float32)
        np.clip(out, 0, np.array([self.new_w, self.new_h] * 2, np.float32), out=out)
        out += np.array([self.left, self.top, self.left, self.top], np.float32)
        return out

    def mask(self, mask: np.ndarray) -> np.ndarray:
        """A source-resolution label mask -> output square (nearest neighbour, zero padding)."""
        return self.pad(self.resize(mask, interpolation=cv2.INTER_NEAREST), 0)
