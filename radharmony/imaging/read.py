"""Reading CXR images: 8/16-bit PNG, JPEG and DICOM into one 2-D array.

Formats are detected from the file's first bytes, not its extension (a JPEG named ``.png``
is read as the JPEG it is). Every failure raises :class:`~radharmony.errors.ImageReadError`
naming the file.

Guards, applied from the file's header before any pixel is decoded:

* :data:`MAX_PIXELS` -- the decompression-bomb guard: an image whose header declares more
  pixels than this (all frames of a DICOM together) is refused.
* :data:`MAX_BYTES` -- the memory guard: an image whose decoded pixel data (height x width x
  frames x samples per pixel x bytes per sample, from the header) exceeds this is refused; a
  deflated DICOM or a 16-bit RGBA PNG can stay under :data:`MAX_PIXELS` and still cost
  gigabytes.
* :data:`MIN_SIDE` -- an image with a side shorter than this (a 1x1 placeholder) is refused.
* only regular files are opened: a FIFO, socket or device named ``.png`` is refused from one
  ``os.stat`` (opening a FIFO would block forever).
* a deflated DICOM is inflated as it is read, never past the size its header declares plus
  a margin (:mod:`radharmony.imaging.dicom`): 0.5 MB of file cannot become gigabytes.
* a JPEG must end with its end-of-image marker (a truncated JPEG is refused even by decoders
  that would fill the missing rows with grey).

Colour (RGB, RGBA, gray + alpha) is converted to grayscale with ITU-R BT.601 luma weights and the
alpha channel is ignored; a colour JPEG is decoded to its luma (Y) channel. When a PNG's or
DICOM's colour channels actually differ, or a JPEG has colour components, a
:class:`~radharmony.errors.ColourImageWarning` is issued once per process
(:mod:`radharmony.imaging.gray`, which the DICOM reader shares).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import cv2
import numpy as np

from ..errors import ImageReadError, PathSafetyError, shorten
from . import dicom, png
from .gray import to_gray, warn_colour

cv2.setNumThreads(1)  # decoding runs inside DataLoader workers: one thread each

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"
#: Decompression-bomb guard: the most pixels (height x width x frames) an image may declare.
#: 100 megapixels is ~4x the largest radiographs (about 4,300 x 3,500); raise it if needed.
MAX_PIXELS = 100_000_000
#: Memory guard: the most bytes an image's decoded pixel data may take, from its header
#: (all frames, all samples per pixel). 256 MB is ~8x a 16-bit 4,300 x 3,500 radiograph.
MAX_BYTES = 256_000_000
#: The shortest side an image may have; smaller ones (1x1 placeholders) are refused.
MIN_SIDE = 8
#: Formats recognised only to name them in errors: leading bytes -> description.
OTHER_FORMATS = ((b"GIF8", "a GIF image"), (b"BM", "a BMP image"), (b"II*\x00", "a TIFF image"),
                 (b"MM\x00*", "a TIFF image"), (b"\x00\x00\x00\x0cjP  ", "a JPEG 2000 image"),
                 (b"RIFF", "a RIFF (WebP?) file"), (b"\x1f\x8b", "a gzip archive"),
                 (b"PK\x03\x04", "a ZIP archive"), (b"<!DOCTYPE", "an HTML page (a failed "
                 "download?)"), (b"<html", "an HTML page (a failed download?)"))
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE,
                       0xCF})


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
    """``base_dir / rel``, refusing paths that resolve outside ``base_dir`` (``..``, symlinks),
    symlink loops and paths the system cannot resolve (over ``PATH_MAX``)."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or os.path.isabs(rel):
        raise PathSafetyError(f"Image path {rel!r} is not a relative path",
                              expected="a non-empty path relative to base_image_dir",
                              found="an absolute path" if isinstance(rel, str) and rel and
                              os.path.isabs(rel) else repr(rel),
                              fix="correct the metadata entry; radharmony never reads files "
                                  "outside the dataset")
    base = os.path.realpath(base_dir)
    try:
        full = os.path.realpath(os.path.join(base, rel), strict=False)
        if os.path.islink(full):  # realpath stops at a loop without raising
            os.stat(full)
    except (OSError, ValueError) as exc:  # ELOOP, ENAMETOOLONG, a lone surrogate
        raise PathSafetyError(f"Image path {shorten(repr(rel), 200)} cannot be resolved",
                              expected="a path inside base_image_dir without symlink loops, "
                              "shorter than the system's limit (4096 bytes)",
                              found=f"{type(exc).__name__}: {shorten(exc, 200)}",
                              fix="remove the symlink loop or correct the metadata entry") \
            from None
    if full == base or os.path.commonpath([base, full]) != base:
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
    head = read_head(path)
    kind = sniff(head)
    if kind is None:
        raise ImageReadError(f"Image file {path} is not a PNG, JPEG or DICOM file",
                             expected="PNG, JPEG or DICOM content", found=describe_bytes(head),
                             fix="re-extract or re-download this file")
    check_header(path, kind, head)
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


def check_regular(path: Path) -> os.stat_result:
    """``os.stat(path)`` of a regular file; anything else (absent, a folder, a FIFO, a socket,
    a device, a symlink loop, an over-long path) raises :class:`ImageReadError` without
    opening it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ImageReadError(f"Image file {path} does not exist", expected="a readable image",
                             found="no file", fix="check base_image_dir, or build the dataset "
                             "with on_missing='drop' to skip absent images") from None
    except (OSError, ValueError) as exc:
        raise ImageReadError(f"Image file {path} cannot be opened", expected="a readable file",
                             found=f"{type(exc).__name__}: {shorten(exc, 200)}",
                             fix="check the file's permissions and symlinks") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO (named pipe)"
                if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "not a regular file")
        raise ImageReadError(f"Image file {path} is not a regular file",
                             expected="a regular image file", found=kind,
                             fix="replace it with the image file (radharmony never opens "
                                 "pipes or devices: reading one could block forever)")
    return st


def read_head(path: Path, n: int = 132) -> bytes:
    """The first ``n`` bytes of the regular file ``path`` (:func:`check_regular` first)."""
    check_regular(path)
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        raise ImageReadError(f"Image file {path} cannot be opened", expected="a readable file",
                             found=str(exc), fix="check the file's permissions") from None


def describe_bytes(head: bytes) -> str:
    """What a file that is not an image holds, from its first bytes (for error messages)."""
    if not head:
        return "an empty file (0 bytes)"
    for magic, what in OTHER_FORMATS:
        if head.startswith(magic) or head.lower().lstrip().startswith(magic.lower()):
            return what
    return f"unknown leading bytes {head[:8]!r}"


def header_size(path: Path, kind: str, head: bytes) -> tuple[int, int, int, int]:
    """``(height, width, frames, bytes per pixel)`` from the file's header, decoding no pixel
    (bytes per pixel: samples per pixel x bytes per sample, as the decoder returns them).

    Raises ValueError when the header is damaged (the caller turns it into ImageReadError).
    """
    if kind == "png":
        if len(head) < 24 or head[12:16] != b"IHDR":
            raise ValueError("the PNG has no IHDR header chunk")
        depth, colour = head[24], head[25]
        channels = 3 if colour == 3 else {0: 1, 2: 3, 4: 2, 6: 4}.get(colour, 4)  # palette: BGR
        return (int.from_bytes(head[20:24], "big"), int.from_bytes(head[16:20], "big"), 1,
                channels * (2 if depth == 16 else 1))
    if kind == "jpeg":
        with open(path, "rb") as fh:
            fh.seek(-min(1024, os.fstat(fh.fileno()).st_size), os.SEEK_END)
            if b"\xff\xd9" not in fh.read():
                raise ValueError("the JPEG has no end-of-image marker: it is truncated")
            fh.seek(2)
            h, w, components = _jpeg_frame_size(fh)
        if components >= 3:  # colour JPEG: decoded to its luma (Y) channel
            warn_colour(path)
        return h, w, 1, max(1, components)
    return dicom.header(path)  # a deflated data set inflated within a budget


def _jpeg_frame_size(fh) -> tuple[int, int, int]:
    """Walk the JPEG marker segments after SOI up to the frame header (SOFn)."""
    while True:
        marker = fh.read(2)
        while marker[1:2] == b"\xff":  # fill bytes
            marker = marker[1:] + fh.read(1)
        if len(marker) < 2 or marker[0] != 0xFF:
            raise ValueError(f"no JPEG frame header before byte {fh.tell()}")
        code = marker[1]
        if code == 0x01 or 0xD0 <= code <= 0xD7:
            continue  # stand-alone markers carry no length
        if code in (0xD9, 0xDA):
            raise ValueError("the JPEG reaches its scan data without a frame header")
        length = fh.read(2)
        if len(length) < 2:
            raise ValueError("the JPEG header is truncated")
        if code in _JPEG_SOF:  # precision, height, width, number of components
            body = fh.read(6)
            if len(body) < 6:
                raise ValueError("the JPEG frame header is truncated")
            return int.from_bytes(body[1:3], "big"), int.from_bytes(body[3:5], "big"), body[5]
        fh.seek(int.from_bytes(length, "big") - 2, os.SEEK_CUR)


def check_header(path: Path, kind: str, head: bytes) -> tuple[int, int, int]:
    """Refuse an image from its header: damaged, smaller than :data:`MIN_SIDE` or larger than
    :data:`MAX_PIXELS` (the decompression-bomb guard) or :data:`MAX_BYTES` decoded. Returns ``(height, width, frames)``."""
    try:
        h, w, frames, per_pixel = header_size(path, kind, head)
    except ImageReadError:  # a deflated DICOM refused by its inflation budget
        raise
    except Exception as exc:  # struct, pydicom and OS errors alike
        raise ImageReadError(f"Image file {path} has a damaged {kind.upper()} header",
                             expected=f"a complete {kind.upper()} image", found=str(exc),
                             fix="the file is probably truncated or corrupt; re-extract it") \
            from None
    if h * w * frames > MAX_PIXELS:
        raise ImageReadError(f"Image file {path} declares {w} x {h} pixels x {frames} frame(s)",
                             expected=f"at most {MAX_PIXELS:,} pixels (the decompression-bomb "
                             "guard radharmony.imaging.read.MAX_PIXELS)",
                             found=f"{h * w * frames:,} pixels",
                             fix="if the image is genuine, raise radharmony.imaging.read.MAX_PIXELS; "
                                 "otherwise remove the file")
    if h * w * frames * per_pixel > MAX_BYTES:
        raise ImageReadError(f"Image file {path} declares {w} x {h} pixels x {frames} "
                             f"frame(s) x {per_pixel} byte(s) per pixel",
                             expected=f"at most {MAX_BYTES:,} bytes of decoded pixel data (the "
                             "memory guard radharmony.imaging.read.MAX_BYTES)",
                             found=f"{h * w * frames * per_pixel:,} bytes",
                             fix="if the image is genuine, raise "
                                 "radharmony.imaging.read.MAX_BYTES; otherwise remove the file")
    if min(h, w) < MIN_SIDE:
        raise ImageReadError(f"Image file {path} is {w} x {h} pixels",
                             expected=f"at least {MIN_SIDE} pixels on each side "
                             "(radharmony.imaging.read.MIN_SIDE)", found=f"{w} x {h}",
                             fix="remove the placeholder image or its metadata row")
    return h, w, frames


def _read_png(path: Path, min_side: int | None):
    data = path.read_bytes()
    arr = png.decode(data)  # grayscale 8/16 bits, with the fast extra: radharmony's decoder
    if arr is None:
        arr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise ValueError("OpenCV could not decode the PNG stream")
    arr = to_gray(arr, path=path)
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


_READERS = {"png": _read_png, "jpeg": _read_jpeg, "dicom": dicom.read_dicom}
