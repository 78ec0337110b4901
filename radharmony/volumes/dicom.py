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
5. **Decode** (:mod:`.dicom_pixels`): uncompressed little-endian pixels read straight into the volume; any other
   transfer syntax (JPEG, JPEG-LS, RLE, deflated, big endian) through pydicom and its
   pylibjpeg plugins (:func:`radharmony.imaging.dicom.dcmread`). ``PixelRepresentation`` 1
   with ``BitsStored`` < ``BitsAllocated`` is sign-extended from the stored bits; unsigned
   pixels are masked to them. Each slice's ``RescaleSlope`` / ``RescaleIntercept`` is applied
   once (int16 for CT when it fits).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import SHOW
from .dicom_headers import DicomSeriesError, SliceHeader, find_files, scan
from .dicom_pixels import read_pixels

#: steps may spread this much around their median (relative) before the series is refused
STEP_TOLERANCE = 0.01
#: in-plane drift per slice (mm, relative to the step) above which a stack is tilted
TILT_TOLERANCE = 1e-3


class SeveralSeriesError(DicomSeriesError):
    """A folder holds several series (or a series several stacks) and none was chosen."""


class DuplicateSliceError(DicomSeriesError):
    """Two slices of a stack lie at the same position."""


class SliceSpacingError(DicomSeriesError):
    """The slice positions of a stack are not evenly spaced (a missing slice, uneven steps)."""


class GantryTiltError(DicomSeriesError):
    """The slices of a stack drift across the image plane (an acquisition with gantry tilt)."""


# --------------------------------------------------------------------------- grouping

def series_of(headers: list[SliceHeader]) -> dict[str, list[SliceHeader]]:
    """Headers grouped by SeriesInstanceUID (in order of first appearance)."""
    out: dict[str, list[SliceHeader]] = {}
    seen: dict = {}                                # the header's bytes of it -> the UID
    for header in headers:
        text = header.raw.get("SeriesInstanceUID")
        uid = seen.get(text) if text is not None else None
        if uid is None:
            uid = str(header.get("SeriesInstanceUID", ""))
            if text is not None:
                seen[text] = uid
        out.setdefault(uid, []).append(header)
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
    seen: dict = {}                                # the header's text of it -> its key
    for header in slices:
        text = header.raw.get("ImageOrientationPatient") or header.get("ImageOrientationPatient")
        key = seen.get(text) if isinstance(text, tuple) else None
        if key is None:
            iop = header.floats("ImageOrientationPatient")
            if iop is None or len(iop) != 6:
                raise DicomSeriesError(f"{header.path}: no usable ImageOrientationPatient",
                                       expected="six direction cosines",
                                       found=repr(header.get("ImageOrientationPatient")),
                                       fix="the file is not a cross-sectional image with "
                                           "geometry (a scout or a secondary capture?): "
                                           "remove it")
            key = tuple(np.round(iop, 4))
            if isinstance(text, tuple):
                seen[text] = key
        out.setdefault(key, []).append(header)
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
                                     + (f" (e.g. {Path(paths[0]).name})" if paths else ""),
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
        notes += (f"{len(skipped)} non-image file(s) skipped, e.g. {Path(skipped[0]).name}",)
    if modality == "CT" if ct is None else ct:
        array = as_hu(array)
        if check:
            check_hu(array, where)
    source_info = VolumeSource(files=tuple(h.file for h in slices), reader="dicom",
                               series_uid=uid, rescale=rescale, notes=notes)
    return Volume.from_array(array, canonical, source=source_info)
