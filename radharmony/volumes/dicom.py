"""DICOM series: scanned by their headers, grouped, sorted by position, read exactly.

1. **Scan**: each file's header up to its pixel data (:mod:`.dicom_headers`: parsed there for
   the usual little-endian syntaxes, by pydicom for anything else). Nothing is decoded; files
   that are not DICOM images (a DICOMDIR, a text file) are skipped and counted.
2. **Group** by ``SeriesInstanceUID``, then inside a series by ``ImageOrientationPatient``
   (multi-stack MR series: one stack each). Several series and no ``series_uid``: an error
   listing them; several stacks and no ``stack``: an error listing those.
3. **Sort** by ``ImagePositionPatient`` projected on the slice normal (row cosine x column
   cosine) -- never by file name, ``InstanceNumber`` or z alone.
4. **Check** the steps between positions: two slices at one position
   (:class:`DuplicateSliceError`), a gap or uneven steps spreading more than 1 % around the
   median (:class:`SliceSpacingError`, naming the files on each side of the widest gap: a
   missing slice), positions that drift across the plane (gantry tilt,
   :class:`GantryTiltError`; ``tilt="shear"`` keeps them instead, in a sheared affine that
   places every voxel exactly). The slice step comes from the positions, never from
   ``SliceThickness``.
5. **Decode**: uncompressed little-endian pixels read straight into the volume; any other
   transfer syntax (JPEG, JPEG-LS, RLE, deflated, big endian) through pydicom and its
   pylibjpeg plugins (:func:`radharmony.imaging.dicom.dcmread`). ``PixelRepresentation`` 1
   with ``BitsStored`` < ``BitsAllocated`` is sign-extended from the stored bits; unsigned
   pixels are masked to them. Each slice's ``RescaleSlope`` / ``RescaleIntercept`` is applied
   once (int16 for CT when it fits).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SHOW, ImageReadError, RadHarmonyError
from .checks import allocate, apply_rescale, fits_int16, int16_exact, rescale_int16
from .dicom_headers import SliceHeader, find_files, scan

#: steps may spread this much around their median (relative) before the series is refused
STEP_TOLERANCE = 0.01
#: in-plane drift per slice (mm, relative to the step) above which a stack is tilted
TILT_TOLERANCE = 1e-3


class DicomSeriesError(RadHarmonyError, ValueError):
    """A DICOM folder or series cannot be read as one volume (which series, which files)."""


class SeveralSeriesError(DicomSeriesError):
    """A folder holds several series (or a series several stacks) and none was chosen."""


class DuplicateSliceError(DicomSeriesError):
    """Two slices of a stack lie at the same position."""


class SliceSpacingError(DicomSeriesError):
    """The slice positions of a stack are not evenly spaced (a missing slice, uneven steps)."""


class GantryTiltError(DicomSeriesError):
    """The slices of a stack drift across the image plane (an acquisition with gantry tilt)."""


# --------------------------------------------------------------------------- grouping

@dataclass
class Series:
    """The slices of one series (one stack), sorted, with their geometry."""
    uid: str
    slices: list[SliceHeader]
    affine: np.ndarray                        # LPS, (k, row, column) index -> world
    notes: tuple[str, ...] = ()


def series_of(headers: list[SliceHeader]) -> dict[str, list[SliceHeader]]:
    """Headers grouped by SeriesInstanceUID (in order of first appearance)."""
    out: dict[str, list[SliceHeader]] = {}
    for header in headers:
        out.setdefault(str(header.get("SeriesInstanceUID", "")), []).append(header)
    return out


def _describe(uid: str, slices: list[SliceHeader]) -> str:
    first = slices[0]
    bits = [first.get("Modality"), repr(first.get("SeriesDescription"))
            if first.get("SeriesDescription") else None,
            f"series {first.get('SeriesNumber')}" if first.get("SeriesNumber") is not None
            else None, f"{len(slices)} file{'s' if len(slices) != 1 else ''}",
            f"e.g. {first.path.name}"]
    return f"{uid} ({', '.join(b for b in bits if b)})"


def choose(headers: list[SliceHeader], where, series_uid: str | None) -> tuple[str, list]:
    groups = series_of(headers)
    if series_uid is not None:
        if series_uid not in groups:
            raise DicomSeriesError(
                f"{where}: no series {series_uid}", expected=f"series_uid one of {len(groups)}",
                found="; ".join(_describe(u, s) for u, s in list(groups.items())[:SHOW]),
                fix="pass one of the SeriesInstanceUIDs listed")
        return series_uid, groups[series_uid]
    if len(groups) > 1:
        listing = "; ".join(_describe(u, s) for u, s in groups.items())
        raise SeveralSeriesError(
            f"{where} holds {len(groups)} DICOM series", expected="one series, or series_uid",
            found=listing, fix="pass series_uid=<one of the SeriesInstanceUIDs listed> (a "
                               "single stray file is likely a slice of another series)")
    uid, slices = next(iter(groups.items()))
    return uid, slices


def stacks_of(slices: list[SliceHeader], where) -> list[list[SliceHeader]]:
    """The slices split by orientation (cosines equal to 1e-4), in order of first slice."""
    out: dict[tuple, list[SliceHeader]] = {}
    for header in slices:
        iop = header.floats("ImageOrientationPatient")
        if iop is None or len(iop) != 6:
            raise DicomSeriesError(f"{header.path}: no usable ImageOrientationPatient",
                                   expected="six direction cosines",
                                   found=repr(header.get("ImageOrientationPatient")),
                                   fix="the file is not a cross-sectional image with geometry "
                                       "(a scout or a secondary capture?): remove it")
        out.setdefault(tuple(np.round(iop, 4)), []).append(header)
    return list(out.values())


def geometry(slices: list[SliceHeader], where, *, tilt: str = "error"
             ) -> tuple[list[SliceHeader], np.ndarray, tuple[str, ...]]:
    """The slices sorted along the normal, the LPS affine of the (k, row, column) array, notes.
    Raises the named errors of the module text."""
    first = slices[0]
    iop = np.array(first.floats("ImageOrientationPatient"), dtype=np.float64)
    row, col = iop[:3], iop[3:]
    normal = np.cross(row, col)
    if not np.isfinite(normal).all() or np.linalg.norm(normal) < 1e-6:
        raise DicomSeriesError(f"{first.path}: ImageOrientationPatient is degenerate",
                               expected="two perpendicular unit vectors",
                               found=str(iop.tolist()), fix="the header is corrupt: remove it")
    normal /= np.linalg.norm(normal)
    positions = []
    for header in slices:
        ipp = header.floats("ImagePositionPatient")
        if ipp is None or len(ipp) != 3 or not np.isfinite(ipp).all():
            raise DicomSeriesError(f"{header.path}: no usable ImagePositionPatient",
                                   expected="three coordinates (mm)",
                                   found=repr(header.get("ImagePositionPatient")),
                                   fix="remove the file, or restore its position")
        positions.append(ipp)
    positions = np.array(positions, dtype=np.float64)
    along = positions @ normal
    order = np.argsort(along, kind="stable")
    slices = [slices[i] for i in order]
    positions, along = positions[order], along[order]
    spacing = first.floats("PixelSpacing")
    if spacing is None or len(spacing) != 2 or min(spacing) <= 0:
        raise DicomSeriesError(f"{first.path}: no usable PixelSpacing",
                               expected="two positive numbers (row, column spacing in mm)",
                               found=repr(first.get("PixelSpacing")),
                               fix="the series lacks its in-plane spacing: restore it")
    notes = []
    if len(slices) > 1:
        steps = np.diff(along)
        _check_steps(slices, steps, where)
        drift = positions[-1] - positions[0] - (along[-1] - along[0]) * normal
        per_slice = np.linalg.norm(drift) / (len(slices) - 1)
        step = (positions[-1] - positions[0]) / (len(slices) - 1)
        if per_slice > TILT_TOLERANCE * max(1.0, float(np.median(steps))):
            angle = np.degrees(np.arctan2(per_slice, float(np.median(steps))))
            if tilt != "shear":
                raise GantryTiltError(
                    f"{where}: the slices drift across the image plane (gantry tilt "
                    f"{angle:.2f} degrees)", expected="positions along the slice normal",
                    found=f"{per_slice:.4g} mm of in-plane shift a slice "
                          f"({slices[0].path.name} .. {slices[-1].path.name})",
                    fix="pass tilt='shear' to keep the exact sheared geometry, or resample "
                        "the series to an orthogonal grid first")
            notes.append(f"gantry tilt {angle:.2f} degrees kept as a sheared affine")
    else:
        step = normal * 1.0
        notes.append("one slice: a 1 mm slice step assumed")
    affine = np.eye(4)
    affine[:3, 0] = step
    affine[:3, 1] = col * spacing[0]
    affine[:3, 2] = row * spacing[1]
    affine[:3, 3] = positions[0]
    return slices, affine, tuple(notes)


def _check_steps(slices, steps: np.ndarray, where) -> None:
    at = int(np.argmin(steps))
    if steps[at] < 1e-3:
        raise DuplicateSliceError(
            f"{where}: two slices at one position", expected="one slice a position",
            found=f"{slices[at].path.name} and {slices[at + 1].path.name} at "
                  f"{float(np.sum(steps[:at])):.3f} mm along the normal",
            fix="remove the duplicate (a repeated export, or two reconstructions in one "
                "series: pass their files as a list)")
    median = float(np.median(steps))
    wide = int(np.argmax(np.abs(steps - median)))
    spread = float(np.max(np.abs(steps - median))) / median
    if spread > STEP_TOLERANCE:
        missing = round(steps[wide] / median) - 1
        found = (f"a gap of {steps[wide]:.4g} mm between {slices[wide].path.name} and "
                 f"{slices[wide + 1].path.name} (the median step is {median:.4g} mm"
                 + (f": {missing} slice{'s' if missing > 1 else ''} missing)" if missing >= 1
                    else ")"))
        raise SliceSpacingError(
            f"{where}: the slice positions are not evenly spaced "
            f"(steps spread {spread:.1%} around the median)",
            expected=f"steps within {STEP_TOLERANCE:.0%} of each other",
            found=found, fix="restore the missing slices, or read the evenly spaced part as a "
                             "list of files")


# --------------------------------------------------------------------------- pixels

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
    stored = allocate((len(slices), rows, columns), f"{'i' if signed else 'u'}{bits // 8}")
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


# --------------------------------------------------------------------------- the volume

def read_dicom_series(source, *, series_uid: str | None = None, stack: int | None = None,
                      ct: bool | None = None, check: bool = True, tilt: str = "error"):
    """The canonical :class:`~radharmony.volumes.Volume` of a DICOM series: ``source`` a
    folder (searched recursively) or a list of files. See the module text for the rules;
    ``ct`` (default: ``Modality`` is CT) checks the Hounsfield units."""
    from .checks import as_hu, check_hu
    from .geometry import to_canonical_in_place
    from .volume import Volume, VolumeSource

    if isinstance(source, (list, tuple)):
        paths, where = [Path(p) for p in source], f"the {len(source)} DICOM files given"
        if len(paths) == 1:
            where = str(paths[0])
    else:
        paths, where = find_files(Path(source)), str(source)
    headers, skipped = scan(paths, series_uid)
    if not headers:
        raise DicomSeriesError(f"{where}: no DICOM image found",
                               expected="DICOM files with pixel data",
                               found=f"{len(paths)} file(s), none a DICOM image"
                                     + (f" (e.g. {paths[0].name})" if paths else ""),
                               fix="point at the folder of one series, or at its files")
    uid, slices = choose(headers, where, series_uid)
    stacks = stacks_of(slices, where)
    if stack is None and len(stacks) > 1:
        raise SeveralSeriesError(
            f"{where}: series {uid} holds {len(stacks)} stacks of different orientation",
            expected="one stack, or stack=<index>",
            found="; ".join(f"stack {i}: {len(s)} slices, orientation "
                            f"{s[0].get('ImageOrientationPatient')}" for i, s in enumerate(stacks)),
            fix="pass stack=<index> (a multi-stack MR series: one volume a stack)")
    if stack is not None and not 0 <= stack < len(stacks):
        raise DicomSeriesError(f"{where}: no stack {stack} in series {uid}",
                               expected=f"0..{len(stacks) - 1}", found=str(stack),
                               fix="pass one of the stack indices")
    slices = stacks[stack or 0]
    slices, affine, notes = geometry(slices, where, tilt=tilt)
    values, rescale = read_pixels(slices, where)
    modality = str(slices[0].get("Modality") or "")
    array, canonical = to_canonical_in_place(values, affine)
    if rescale == "per-slice":
        rescale, notes = None, notes + ("per-slice RescaleSlope/RescaleIntercept applied",)
    if skipped:
        notes += (f"{len(skipped)} non-image file(s) skipped, e.g. {skipped[0].name}",)
    if modality == "CT" if ct is None else ct:
        array = as_hu(array)
        if check:
            check_hu(array, where)
    source_info = VolumeSource(files=tuple(str(h.path) for h in slices), reader="dicom",
                               series_uid=uid, rescale=rescale, notes=notes)
    return Volume.from_array(array, canonical, source=source_info)
