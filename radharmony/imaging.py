"""Reading CXR images: 8/16-bit PNG, JPEG and DICOM into one 2-D array.

Formats are detected from the file's first bytes, not its extension. Every failure raises
:class:`~radharmony.errors.ImageReadError` naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from .errors import ImageReadError, PathSafetyError

cv2.setNumThreads(1)  # decoding runs inside DataLoader workers: one thread each

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"


def sniff(head: bytes) -> str | None:
    """Image format from a file's first 132 bytes: ``"png"``, ``"jpeg"``, ``"dicom"`` or None."""
    if head.startswith(PNG_MAGIC):
        return "png"
    if head.startswith(JPEG_MAGIC):
        return "jpeg"
    if len(head) >= 132 and head[128:132] == b"DICM":
        return "dicom"
    return None


def safe_path(base_dir: str | os.PathLike, rel: str) -> Path:
    """``base_dir / rel``, refusing paths that resolve outside ``base_dir`` (``..``, symlinks)."""
    base = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(base, rel))
    if full != base and not full.startswith(base + os.sep):
        raise PathSafetyError(f"Image path {rel!r} resolves outside base_image_dir {base}",
                              expected="a file inside base_image_dir", found=full,
                              fix="remove the symlink or correct the metadata entry")
    return Path(full)


def read_image(path: str | os.PathLike, *, min_side: int | None = None
               ) -> tuple[np.ndarray, tuple[int, int]]:
    """Decode ``path`` to a 2-D grayscale array and return it with the source ``(height, width)``.

    PNG keeps its bit depth (uint8 or uint16); colour is converted to gray. JPEG is decoded with
    DCT-domain downscaling when ``min_side`` allows it (the array is then smaller than the
    source size returned). DICOM gets its modality and VOI LUTs applied and MONOCHROME1 inverted,
    returned as float32.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(132)
    except FileNotFoundError:
        raise ImageReadError(f"Image file {path} does not exist", expected="a readable image",
                             found="no file", fix="check base_image_dir, or build the dataset "
                             "with on_missing='drop' to skip absent images") from None
    except OSError as exc:
        raise ImageReadError(f"Image file {path} cannot be opened", expected="a readable file",
                             found=str(exc), fix="check the file's permissions") from None
    kind = sniff(head)
    if kind is None:
        found = "an empty file" if not head else f"unknown leading bytes {head[:8]!r}"
        raise ImageReadError(f"Image file {path} is not a PNG, JPEG or DICOM file",
                             expected="PNG, JPEG or DICOM content", found=found,
                             fix="re-extract or re-download this file")
    try:
        arr, src = _READERS[kind](path, min_side)
    except ImageReadError:
        raise
    except Exception as exc:  # decoder libraries raise many types
        raise ImageReadError(f"Image file {path} could not be decoded as {kind.upper()}",
                             expected=f"a complete {kind.upper()} image",
                             found=f"{type(exc).__name__}: {exc}",
                             fix="the file is probably truncated or corrupt; re-extract it") \
            from None
    if arr.ndim != 2 or arr.size == 0:
        raise ImageReadError(f"Image file {path} has an unexpected shape",
                             expected="a 2-D grayscale image", found=f"shape {arr.shape}",
                             fix="convert it to single-channel grayscale")
    return arr, src


def _to_gray(arr: np.ndarray) -> np.ndarray:
    if arr.ndim == 3 and arr.shape[2] == 1:
        return arr[:, :, 0]
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        return cv2.cvtColor(np.ascontiguousarray(arr[:, :, :3]), cv2.COLOR_BGR2GRAY)
    return arr


def _read_png(path: Path, min_side: int | None):
    arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise ValueError("OpenCV could not decode the PNG stream")
    arr = _to_gray(arr)
    return arr, arr.shape[:2]


def _read_jpeg(path: Path, min_side: int | None):
    from PIL import Image

    with Image.open(path) as im:
        src = (im.height, im.width)
        if min_side:
            im.draft("L", (min_side, min_side))  # DCT-domain scaling, never below min_side
        im = im.convert("L") if im.mode not in ("L", "I;16") else im
        arr = np.asarray(im)
    return arr, src


def _read_dicom(path: Path, min_side: int | None):
    import pydicom
    from pydicom.pixels import apply_modality_lut, apply_voi_lut

    ds = pydicom.dcmread(path)
    arr = ds.pixel_array
    if arr.ndim == 3 and getattr(ds, "SamplesPerPixel", 1) == 1:
        arr = arr[0]  # multi-frame: the first frame is the radiograph
    arr = apply_voi_lut(apply_modality_lut(arr, ds), ds).astype(np.float32)
    if str(getattr(ds, "PhotometricInterpretation", "")).upper() == "MONOCHROME1":
        arr = arr.max() + arr.min() - arr
    return _to_gray(arr), arr.shape[:2]


_READERS = {"png": _read_png, "jpeg": _read_jpeg, "dicom": _read_dicom}
