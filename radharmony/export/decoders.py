"""Images of a WebDataset export read back exactly, 16-bit ones included.

Every built-in image decoder of the ``webdataset`` library (``"pil"``, ``"l8"``, ``"rgb8"``,
``"torch"``, ...) goes through PIL's 8-bit modes, so a 16-bit PNG (a source PNG shipped at
16 bits, exported with ``images="original"``, or the cache's PNG with
``DefaultTransform(bits=16)``) comes back as 8 bits **without rescaling**: values above 255
saturate, silently.

:func:`exact_decoder` is a handler for ``webdataset``'s ``.decode(...)``: it turns every image
member (``.png``, ``.jpg``/``.jpeg``, ``.dcm``/``.dicom`` and the extensionless ``<key>.<j>``
of a source file without a suffix) into the array radharmony reads from that file
(:func:`read_image_bytes`): PNG and JPEG at their stored depth (``uint8`` or ``uint16``), DICOM
with its modality and VOI LUTs applied (``float32``), colour converted to gray as
:func:`radharmony.imaging.read.read_image` does. Other members (``.json``) it leaves to the
next handler. :func:`bit_depth` is what the exporters check to warn about shards that need it.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
import warnings
from pathlib import Path

import cv2
import numpy as np

from ..errors import SHOW, ImageReadError
from ..imaging.read import check_header, read_image, sniff
from .codec import ExportError


class DeepImageWarning(UserWarning):
    """Images deeper than 8 bits were exported where a common reader cuts them to 8 bits:
    WebDataset shards (read them with :func:`exact_decoder`; ``webdataset``'s built-in image
    decoders clip), or a mixture's trainer file naming 16-bit PNGs (PIL's ``convert("RGB")``
    clips: export with ``images="cache"``)."""


#: member extensions :func:`exact_decoder` decodes (a source file without a suffix is stored
#: as ``<key>.<j>``: an extension of digits, or ``ref<j>`` for a reference image)
IMAGE_EXTENSIONS = ("png", "jpg", "jpeg", "dcm", "dicom")
_NO_SUFFIX = re.compile(r"(ref)?\d+")


def read_image_bytes(data: bytes, *, name: str = "image") -> np.ndarray:
    """The array radharmony reads from an image file whose bytes are ``data`` (see the module
    notes); ``name`` (the member's key) names it in errors. Raises :class:`ExportError` for
    bytes that are no PNG, JPEG or DICOM image, or that fail the reader's guards."""
    data = bytes(data)
    head = data[:132]
    kind = sniff(head)
    if kind is None:
        raise ExportError(f"Export member {name} is not a PNG, JPEG or DICOM image",
                          expected="the bytes of an image file", found=f"{len(data)} bytes "
                          f"starting {data[:8]!r}", fix="pass exact_decoder image members "
                          "only (it leaves .json and other extensions alone)")
    try:
        if kind == "png":  # 2-D PNGs straight from the bytes; the header guards first
            check_header(Path(name), kind, head)
            arr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
            if arr is not None and arr.ndim == 2:
                return arr
        return _through_file(data, kind)
    except ImageReadError as exc:
        raise ExportError(f"Export member {name} could not be read as {kind.upper()}",
                          expected=f"a complete {kind.upper()} image",
                          found=str(exc).split("\n", 1)[0],
                          fix="export the shard again (shards failing their checksum are "
                              "rewritten)") from None


def _through_file(data: bytes, kind: str) -> np.ndarray:
    """JPEG, DICOM and colour PNG: radharmony's reader (every guard) on a temporary file."""
    fd, tmp = tempfile.mkstemp(suffix={"png": ".png", "jpeg": ".jpg"}.get(kind, ".dcm"))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return read_image(tmp)[0]
    finally:
        os.unlink(tmp)


def exact_decoder(key: str, data: bytes):
    """A ``webdataset`` decode handler returning image members as exact numpy arrays.

    ``key`` is the member's name after the sample key (``".0.png"``, ``"ref0.jpg"``);
    members that are not images give None (the next handler decodes them).

    Example:
        >>> import webdataset as wds  # doctest: +SKIP
        >>> for s in wds.WebDataset(urls, shardshuffle=False).decode(exact_decoder):
        ...     s["0.png"].dtype  # doctest: +SKIP
        dtype('uint16')
    """
    ext = key.rsplit(".", 1)[-1].lower()
    if ext not in IMAGE_EXTENSIONS and not _NO_SUFFIX.fullmatch(ext):
        return None
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return None  # decoded already (a partial decoder ran first)
    return read_image_bytes(data, name=key.lstrip("."))


def bit_depth(data: bytes) -> int:
    """Bits per sample of an image file's bytes, from its header: a PNG's IHDR depth, a
    DICOM's ``BitsStored`` (``BitsAllocated`` without it); 8 for JPEG and anything else."""
    head = bytes(data[:132])
    kind = sniff(head)
    if kind == "png" and len(head) > 24:
        return int(head[24])
    if kind == "dicom":
        import pydicom

        try:
            ds = pydicom.dcmread(io.BytesIO(bytes(data)), stop_before_pixels=True,
                                 specific_tags=["BitsStored", "BitsAllocated"])
        except Exception:  # a damaged header: the export's reader reports it, not this check
            return 8
        return int(ds.get("BitsStored") or ds.get("BitsAllocated") or 8)
    return 8


def warn_deep(manifest: dict, *, caller: str) -> None:
    """One :class:`DeepImageWarning` naming the shards of ``manifest`` whose entry records
    images deeper than 8 bits (``bits``), with the fix."""
    deep = [s for s in manifest["shards"] if s.get("bits", 8) > 8]
    if not deep:
        return
    names = [s["name"] for s in deep]
    bits = sorted({s["bits"] for s in deep})
    warnings.warn(f"{caller}: {len(deep)} of {len(manifest['shards'])} shards hold "
                  f"{'/'.join(map(str, bits))}-bit images ({', '.join(names[:SHOW])}"
                  f"{', ...' if len(names) > SHOW else ''}); webdataset's built-in image "
                  "decoders ('pil', 'l8', 'rgb8', 'torch', ...) cut them to 8 bits without "
                  "rescaling. Read them with .decode(radharmony.export.exact_decoder), which "
                  "returns the exact arrays", DeepImageWarning, stacklevel=3)


__all__ = ["DeepImageWarning", "IMAGE_EXTENSIONS", "bit_depth", "exact_decoder",
           "read_image_bytes", "warn_deep"]
