"""DICOM pixels: each slice read, cut to its stored bits and rescaled while it is in cache.

Uncompressed little-endian pixels are read straight into the volume; any other transfer syntax
(JPEG, JPEG-LS, RLE, deflated, big endian) goes through pydicom and its pylibjpeg plugins
(:func:`radharmony.imaging.dicom.dcmread`). Sizes a header claims are checked against the
files before anything is allocated.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import ImageReadError, RadHarmonyError
from .checks import allocate, apply_rescale, fits_int16, int16_exact, rescale_int16
from .dicom_headers import DicomSeriesError, SliceHeader


def read_pixels(slices: list[SliceHeader], where) -> tuple[np.ndarray, tuple | str | None]:
    """The slices' values, (k, rows, columns), and the rescale applied: (slope, intercept),
    None (none), or "per-slice". Each slice is read, cut to its stored bits and rescaled while it
    is in cache: int16 in place when every slice's slope and intercept give exact int16
    values; else float32 (a fractional slope) or, with no rescale anywhere, the stored type.
    """
    first = slices[0]
    rows, columns = int(first.get("Rows")), int(first.get("Columns"))
    bits = int(first.get("BitsAllocated") or 16)
    signed = int(first.get("PixelRepresentation") or 0) == 1
    if bits not in (8, 16) or int(first.get("SamplesPerPixel") or 1) != 1 or \
            int(first.get("NumberOfFrames") or 1) != 1:
        raise DicomSeriesError(
            f"{first.path}: an image this reader does not handle",
            expected="single-frame grayscale slices of 8 or 16 bits",
            found=f"BitsAllocated {bits}, SamplesPerPixel {first.get('SamplesPerPixel')}, "
                  f"NumberOfFrames {first.get('NumberOfFrames')}",
            fix="convert the series (e.g. enhanced multi-frame to single frames) first")
    for header in slices:
        if (header.get("Rows"), header.get("Columns")) != (rows, columns):
            raise DicomSeriesError(
                f"{where}: the slices differ in size", expected=f"{rows} x {columns} each",
                found=f"{header.path.name}: {header.get('Rows')} x {header.get('Columns')}",
                fix="remove the odd file (a scout or a localizer in the series)")
    slopes = [_number(h, "RescaleSlope", 1.0) for h in slices]
    intercepts = [_number(h, "RescaleIntercept", 0.0) for h in slices]
    bits_stored = int(first.get("BitsStored") or bits)
    bounds = _stored_range(bits, bits_stored, signed)
    uniform = len(set(slopes)) == 1 and len(set(intercepts)) == 1
    rescale = (slopes[0], intercepts[0]) if uniform else "per-slice"
    identity = uniform and rescale == (1.0, 0.0)
    in_place = not identity and bits == 16 and \
        all(int16_exact(s, i, bounds) for s, i in zip(slopes, intercepts))
    _check_sizes(slices, rows * columns * bits // 8, where)
    stored = allocate((len(slices), rows, columns), f"{'i' if signed else 'u'}{bits // 8}",
                      populate="ahead")    # the slices fill it in order
    for k, header in enumerate(slices):
        _read_slice(header, stored[k])
        _fix_bits(stored[k], bits_stored, signed)
        if in_place:
            rescale_int16(stored[k].view(np.int16), slopes[k], intercepts[k])
    if identity:
        return stored, None
    if in_place:
        return stored.view(np.int16), rescale
    if uniform:
        return apply_rescale(stored, *rescale, bounds=bounds), rescale
    if bits == 16 and all(fits_int16(stored[k], slopes[k], intercepts[k])
                          for k in range(len(stored))):
        for k in range(len(stored)):     # the data's own range says int16 after all
            rescale_int16(stored[k].view(np.int16), slopes[k], intercepts[k])
        return stored.view(np.int16), rescale
    out = allocate(stored.shape, np.float32)
    for k in range(len(stored)):
        np.copyto(out[k], stored[k], casting="unsafe")
        out[k] = out[k] * np.float32(slopes[k]) + np.float32(intercepts[k])
    return out, rescale


def _number(header: SliceHeader, keyword: str, default: float) -> float:
    value = header.get(keyword)
    try:
        return default if value in (None, "") else float(value)
    except (TypeError, ValueError):
        raise DicomSeriesError(f"{header.path}: {keyword} is not a number",
                               expected="a decimal string", found=repr(value),
                               fix="the header is corrupt: restore it") from None


def _read_slice(header: SliceHeader, out: np.ndarray) -> None:
    if header.pixel_offset is not None:
        try:
            with open(header.path, "rb") as fh:
                fh.seek(header.pixel_offset)
                got = fh.readinto(memoryview(out).cast("B"))
        except OSError as exc:
            raise ImageReadError(f"Cannot read the DICOM file {header.path}",
                                 expected="a readable file", found=str(exc),
                                 fix="check the file") from None
        if got != out.nbytes:
            raise ImageReadError(f"The DICOM file {header.path} is truncated",
                                 expected=f"{out.nbytes:,} bytes of pixel data",
                                 found=f"{got:,}", fix="copy or export the file again")
        return
    from ..imaging.dicom import dcmread

    try:
        pixels = dcmread(header.path).pixel_array
    except RadHarmonyError:
        raise
    except Exception as exc:
        raise ImageReadError(f"Cannot decode the pixels of the DICOM file {header.path}",
                             expected="pixel data in a transfer syntax pydicom and its "
                                      "pylibjpeg plugins decode",
                             found=f"{type(exc).__name__}: {exc} (transfer syntax "
                                   f"{header.get('TransferSyntaxUID')})",
                             fix="install the decoder the message names (e.g. "
                                 "pylibjpeg-openjpeg for JPEG 2000), or convert the file") \
            from None
    if pixels.shape != out.shape:
        raise ImageReadError(f"The DICOM file {header.path} decodes to another shape",
                             expected=str(out.shape), found=str(pixels.shape),
                             fix="the file is corrupt: export it again")
    np.copyto(out, pixels, casting="unsafe")


def _check_sizes(slices: list[SliceHeader], per_slice: int, where) -> None:
    """Refuse, before allocating, pixel data the files cannot hold: a native slice needs its
    bytes after its offset; compressed slices at most deflate's 1032:1 of the files."""
    compressed = 0
    for header in slices:
        size = os.stat(header.path).st_size
        if header.pixel_offset is None:
            compressed += size
        elif size < header.pixel_offset + per_slice:
            raise ImageReadError(
                f"The DICOM file {header.path} holds less pixel data than its header says",
                expected=f"{per_slice:,} bytes of pixels (Rows x Columns x BitsAllocated) "
                         f"after byte {header.pixel_offset:,}",
                found=f"a {size:,}-byte file", fix="the file is truncated or its header "
                                                   "corrupt: export it again")
    claimed = per_slice * sum(h.pixel_offset is None for h in slices)
    if claimed > compressed * 1032 + (1 << 20):
        raise DicomSeriesError(
            f"{where}: the headers claim more pixels than the files can hold",
            expected=f"at most {compressed * 1032:,} bytes from {compressed:,} compressed bytes",
            found=f"{claimed:,} bytes ({len(slices)} slices of {per_slice:,})",
            fix="a header is corrupt: find the odd file (Rows, Columns) and remove it")


def _stored_range(bits: int, bits_stored: int, signed: bool) -> tuple[int, int]:
    """The values ``bits_stored`` of ``bits`` can hold."""
    n = bits_stored if 0 < bits_stored < bits else bits
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)


def _fix_bits(stored: np.ndarray, bits_stored: int, signed: bool) -> None:
    """Keep only the stored bits: sign-extended from the top stored bit when signed."""
    total = stored.dtype.itemsize * 8
    if not 0 < bits_stored < total:
        return
    if signed:
        shift = total - bits_stored
        np.left_shift(stored, shift, out=stored)
        np.right_shift(stored, shift, out=stored)     # arithmetic: the sign bit spreads
    else:
        np.bitwise_and(stored, (1 << bits_stored) - 1, out=stored)
