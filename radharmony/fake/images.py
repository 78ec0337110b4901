"""Synthetic chest-radiograph-like images (body, lungs, spine, ribs, noise)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np


def synthetic_cxr(height: int, width: int, *, rng: np.random.Generator, bits: int = 16
                  ) -> np.ndarray:
    """A grayscale CXR-like image, uint16 (12-bit range by default) or uint8 for ``bits=8``."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    cy, cx = height * rng.uniform(0.5, 0.56), width * rng.uniform(0.47, 0.53)
    body = ((x - cx) / (0.46 * width)) ** 2 + ((y - cy) / (0.55 * height)) ** 2 < 1
    img = np.where(body, 0.55, 0.05).astype(np.float32)
    for side in (-1, 1):  # lungs: dark ellipses
        lx = cx + side * width * rng.uniform(0.17, 0.21)
        lung = ((x - lx) / (0.15 * width)) ** 2 + ((y - cy + 0.05 * height) / (0.3 * height)) ** 2
        img -= 0.35 * np.clip(1 - lung, 0, 1) ** 0.5
    img += 0.3 * np.exp(-((x - cx) / (0.035 * width)) ** 2)  # spine / mediastinum
    ribs = 0.04 * (np.sin(y / height * 40 + np.abs(x - cx) / width * 6) > 0.6)
    img += ribs * body
    heart = ((x - cx - 0.05 * width) / (0.13 * width)) ** 2 + \
        ((y - cy - 0.12 * height) / (0.12 * height)) ** 2 < 1
    img += 0.2 * heart
    img += rng.normal(0, 0.02, size=img.shape).astype(np.float32)
    img = cv2.GaussianBlur(np.clip(img, 0, 1), (0, 0), max(1.0, width / 300))
    top = 4095 if bits == 16 else 255
    return (img * top).round().astype(np.uint16 if bits == 16 else np.uint8)


def write_png(path: str | Path, img: np.ndarray) -> Path:
    """Write ``img`` (uint8 or uint16, 2-D) as a grayscale PNG, creating folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), img):
        raise OSError(f"could not write {path}")
    return path
