"""Planting duplicates and faulty images into a replica's PNG / JPEG files (for audits).

:func:`synthetic_cxr` draws one template with small jitter, so two of its images are closer
than a real pair of patients; :func:`varied_cxr` adds what differs between real radiographs
(position, rotation, size, exposure gradient, devices and opacities, gamma), and
:func:`revary` rewrites a replica's images with it (same size, bit depth and format).
:func:`plant_copies` then overwrites chosen files with a re-encoded, resized, re-windowed copy
of another file (or its bytes), and :func:`plant_problems` with blank, inverted, tiny and
truncated images; both return what they planted, the truth an audit is measured against.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np

from .images import synthetic_cxr


def varied_cxr(height: int, width: int, *, rng: np.random.Generator, bits: int = 8
               ) -> np.ndarray:
    """A CXR-like image with patient-to-patient variety (uint8, or 12-bit uint16)."""
    img = synthetic_cxr(height, width, rng=rng, bits=8).astype(np.float32) / 255
    centre = (width * (0.5 + rng.uniform(-.1, .1)), height * (0.5 + rng.uniform(-.1, .1)))
    m = cv2.getRotationMatrix2D(centre, float(rng.uniform(-8, 8)), float(rng.uniform(.8, 1.2)))
    img = cv2.warpAffine(img, m, (width, height), borderMode=cv2.BORDER_REFLECT)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    gx, gy = rng.uniform(-.25, .25, 2)
    img += gx * (x / width - .5) + gy * (y / height - .5)
    for _ in range(int(rng.integers(0, 4))):  # devices (bright) and opacities
        c = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        axes = (int(rng.integers(3, max(4, width // 6))), int(rng.integers(3, max(4, height // 6))))
        cv2.ellipse(img, c, axes, float(rng.uniform(0, 180)), 0, 360,
                    float(rng.uniform(-.3, .6)), -1)
    field = cv2.resize(rng.normal(0, 1, (6, 6)).astype(np.float32), (width, height),
                       interpolation=cv2.INTER_CUBIC)
    img += 0.15 * field / (field.std() + 1e-6)
    img = np.clip(img, 0, 1) ** float(rng.uniform(0.7, 1.4))
    top = 4095 if bits == 16 else 255
    return (img * top).round().astype(np.uint16 if bits == 16 else np.uint8)


def _write(path: Path, img: np.ndarray, rng: np.random.Generator) -> None:
    suffix = path.suffix.lower()
    if suffix in (".jpg", ".jpeg"):
        img = img if img.dtype == np.uint8 else (img >> 4).astype(np.uint8)
        ok = cv2.imwrite(str(path), img, [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(60, 96))])
    elif suffix == ".png":
        ok = cv2.imwrite(str(path), img)
    else:
        raise ValueError(f"{path}: only PNG and JPEG files can be planted")
    if not ok:
        raise OSError(f"could not write {path}")


def revary(paths, *, seed: int = 0) -> None:
    """Rewrite every PNG / JPEG in ``paths`` with a :func:`varied_cxr` of its size and depth."""
    rng = np.random.default_rng(seed)
    for p in map(Path, paths):
        old = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
        bits = 16 if old.dtype == np.uint16 else 8
        _write(p, varied_cxr(old.shape[0], old.shape[1], rng=rng, bits=bits), rng)


def altered_copy(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``img`` resized (40-90 %), re-windowed (gain 0.85-1.15, offset +-6 %, gamma
    0.85-1.15): what a second release of the same radiograph looks like."""
    h, w = img.shape[:2]
    s = float(rng.uniform(0.4, 0.9))
    out = cv2.resize(img.astype(np.float32), (max(8, int(w * s)), max(8, int(h * s))),
                     interpolation=cv2.INTER_AREA)
    top = 65535.0 if img.dtype == np.uint16 else 255.0
    out = (out / top) ** float(rng.uniform(0.85, 1.15)) * float(rng.uniform(0.85, 1.15)) \
        + float(rng.uniform(-0.06, 0.06))
    return (np.clip(out, 0, 1) * top).round().astype(img.dtype)


def plant_copies(paths, n: int, *, seed: int = 0, exact: int = 0) -> list[tuple[int, int]]:
    """Overwrite ``n`` files of ``paths`` with an :func:`altered_copy` of another file (and
    ``exact`` more with a byte copy); returns the ``(source, copy)`` index pairs, each file
    used once."""
    paths = [Path(p) for p in paths]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(paths))
    if 2 * (n + exact) > len(paths):
        raise ValueError(f"cannot plant {n + exact} copies among {len(paths)} files")
    planted = []
    for k in range(n + exact):
        src, dst = int(order[2 * k]), int(order[2 * k + 1])
        if k < n:
            img = cv2.imread(str(paths[src]), cv2.IMREAD_UNCHANGED)
            _write(paths[dst], altered_copy(img, rng), rng)
        else:
            shutil.copyfile(paths[src], paths[dst])
        planted.append((src, dst))
    return planted


def plant_problems(paths, *, seed: int = 0) -> dict[str, int]:
    """Overwrite four files of ``paths`` (taken from the end) with a blank, an inverted, a tiny
    (48 x 40) and a truncated image; returns ``{flag: index}``."""
    paths = [Path(p) for p in paths]
    rng = np.random.default_rng(seed)
    idx = {"blank": len(paths) - 1, "inverted": len(paths) - 2, "tiny": len(paths) - 3,
           "unreadable": len(paths) - 4}
    img = cv2.imread(str(paths[idx["inverted"]]), cv2.IMREAD_UNCHANGED)
    top = 65535 if img.dtype == np.uint16 else 255
    upright = synthetic_cxr(*img.shape[:2], rng=rng, bits=8).astype(img.dtype)
    _write(paths[idx["inverted"]], (top - upright * (top // 255)).astype(img.dtype), rng)
    flat = np.full(img.shape, top // 2, img.dtype)
    flat += rng.integers(0, 2, img.shape).astype(img.dtype)
    _write(paths[idx["blank"]], flat, rng)
    _write(paths[idx["tiny"]], varied_cxr(48, 40, rng=rng), rng)
    data = paths[idx["unreadable"]].read_bytes()
    paths[idx["unreadable"]].write_bytes(data[:len(data) // 3])
    return idx


__all__ = ["altered_copy", "plant_copies", "plant_problems", "revary", "varied_cxr"]
