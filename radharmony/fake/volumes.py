"""Writing volumes in their exact on-disk formats, for tests and demos (NumPy + gzip only).

- :func:`synthetic_ct`: a chest-like CT in Hounsfield units (air, body, lungs, spine, noise).
- :func:`write_nifti`: a NIfTI-1 single file (``.nii`` or ``.nii.gz``): the 348-byte header,
  4 extension bytes, the voxels in the file's index order (i fastest); qform (quaternion) and
  sform each with its own code, so files with only one, both, or both disagreeing are written
  as scanners and converters write them. ``slope=1, intercept=0`` or ``slope=0, intercept=0``
  are the two "no scaling" defaults CT-RATE's v1 files carry.
- :func:`write_dicom_series`: one DICOM file per slice of a volume, with the real geometry tags
  (``ImagePositionPatient``, ``ImageOrientationPatient``, ``PixelSpacing``) and per-slice
  rescale; names shuffled and instance numbers reversed unless asked otherwise.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from ..volumes.nifti import DATATYPES, HEADER_SIZE, header_dtype

_CODES = {np.dtype(t).newbyteorder("=").str[1:]: c for c, t in DATATYPES.items()}


def synthetic_ct(shape, *, rng=None, noise: int = 20) -> np.ndarray:
    """A chest-like CT in Hounsfield units, int16 ``(D, H, W)`` canonical order (S, P, L):
    air (-1000) around an elliptic body (40) holding two lungs (-850) and a spine (600), with
    uniform noise of +-``noise`` HU; outside the scanner's circular field of view, padding
    -1024. Seeded by ``rng`` (default seed 0); built slab by slab (memory: the volume)."""
    rng = np.random.default_rng(0) if rng is None else rng
    depth, height, width = shape
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    y, x = (yy - height / 2) / (height / 2), (xx - width / 2) / (width / 2)
    out = np.empty(shape, dtype=np.int16)
    slab = 16
    for start in range(0, depth, slab):
        grow = 0.9 + 0.1 * np.sin(np.pi * (start + slab / 2) / max(depth, 1))
        label = np.full((height, width), -1000, dtype=np.int16)
        label[(x / (0.85 * grow)) ** 2 + (y / (0.6 * grow)) ** 2 <= 1] = 40
        for side in (-1, 1):
            label[((x - side * 0.38) / (0.3 * grow)) ** 2 + ((y + 0.05) / (0.42 * grow)) ** 2
                  <= 1] = -850
        label[(x ** 2 + (y - 0.45) ** 2) <= 0.01] = 600
        stop = min(depth, start + slab)
        block = rng.integers(-noise, noise + 1, size=(stop - start, height, width),
                             dtype=np.int16)
        block += label
        block[:, x ** 2 + y ** 2 > 1] = -1024
        out[start:stop] = block
    return out


def write_nifti(path: str | Path, array: np.ndarray, affine, *, qform: int = 1, sform: int = 1,
                qform_affine=None, slope: float = 1.0, intercept: float = 0.0, dtype=None,
                byteorder: str = "<", compresslevel: int = 6, qfac: float | None = None,
                descrip: str = "radharmony fake") -> Path:
    """Write ``array`` (3-D, indexed ``(i, j, k)`` as NIfTI stores it: i runs fastest on disk,
    nibabel's ``get_fdata()`` order) with its RAS ``affine`` (index -> world mm) to ``path``.

    ``qform`` / ``sform``: the codes (0: not set; 1: scanner; 2: aligned, ...). The sform rows
    are ``affine``; the qform is ``qform_affine`` (default ``affine``) as a quaternion, pixdim
    and qfac (``pixdim[0]``; written -1 for a left-handed affine, or ``qfac`` when given).
    ``slope`` / ``intercept``: ``scl_slope`` / ``scl_inter``, stored as given (the voxels are
    written as they are: stored values). ``dtype``: the stored type (default the array's).
    ``.gz`` in the name: gzip at ``compresslevel``. Returns the path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    array = np.asarray(array)
    if array.ndim != 3:
        raise ValueError("write_nifti writes 3-D arrays")
    dtype = np.dtype(dtype or array.dtype)
    affine = np.asarray(affine, dtype=np.float64)
    q_affine = affine if qform_affine is None else np.asarray(qform_affine, dtype=np.float64)
    h = np.zeros((), dtype=header_dtype(byteorder))
    h["sizeof_hdr"] = HEADER_SIZE
    h["regular"] = b"r"
    h["dim"] = [3, *array.shape, 1, 1, 1, 1]
    h["datatype"] = _CODES[dtype.newbyteorder("=").str[1:]]
    h["bitpix"] = dtype.itemsize * 8
    zooms, quaternion, sign = _quaternion(q_affine)
    h["pixdim"] = [qfac if qfac is not None else sign, *zooms, 1, 1, 1, 1]
    h["vox_offset"] = HEADER_SIZE + 4
    h["scl_slope"], h["scl_inter"] = slope, intercept
    h["xyzt_units"] = 2 + 8  # mm, seconds
    h["descrip"] = descrip.encode()[:79]
    h["qform_code"], h["sform_code"] = qform, sform
    h["quatern_b"], h["quatern_c"], h["quatern_d"] = quaternion
    h["qoffset_x"], h["qoffset_y"], h["qoffset_z"] = q_affine[:3, 3]
    h["srow_x"], h["srow_y"], h["srow_z"] = affine[0], affine[1], affine[2]
    h["magic"] = b"n+1"
    voxels = np.asarray(array, dtype=dtype.newbyteorder(byteorder)).tobytes(order="F")
    payload = h.tobytes() + b"\x00" * 4 + voxels
    if path.name.endswith(".gz"):
        payload = gzip.compress(payload, compresslevel=compresslevel, mtime=0)
    path.write_bytes(payload)
    return path


def _quaternion(affine: np.ndarray) -> tuple[np.ndarray, tuple[float, float, float], float]:
    """(zooms, (b, c, d), qfac) of ``affine``'s 3x3 part: the nearest rotation (polar
    decomposition) with the last column flipped when left-handed, as a unit quaternion with
    a >= 0."""
    m = affine[:3, :3]
    zooms = np.linalg.norm(m, axis=0)
    r = m / zooms
    qfac = 1.0
    if np.linalg.det(r) < 0:
        qfac, r = -1.0, r * [1, 1, -1]
    u, _, vt = np.linalg.svd(r)
    r = u @ vt
    trace = np.trace(r) + 1
    if trace > 0.5:
        a = 0.5 * np.sqrt(trace)
        b, c, d = (r[2, 1] - r[1, 2]) / (4 * a), (r[0, 2] - r[2, 0]) / (4 * a), \
            (r[1, 0] - r[0, 1]) / (4 * a)
    else:
        xd, yd, zd = (1 + r[i, i] - (np.trace(r) - r[i, i]) for i in range(3))
        if xd > 1:
            b = 0.5 * np.sqrt(xd)
            c, d, a = (r[0, 1] + r[1, 0]) / (4 * b), (r[0, 2] + r[2, 0]) / (4 * b), \
                (r[2, 1] - r[1, 2]) / (4 * b)
        elif yd > 1:
            c = 0.5 * np.sqrt(yd)
            b, d, a = (r[0, 1] + r[1, 0]) / (4 * c), (r[1, 2] + r[2, 1]) / (4 * c), \
                (r[0, 2] - r[2, 0]) / (4 * c)
        else:
            d = 0.5 * np.sqrt(zd)
            b, c, a = (r[0, 2] + r[2, 0]) / (4 * d), (r[1, 2] + r[2, 1]) / (4 * d), \
                (r[1, 0] - r[0, 1]) / (4 * d)
        if a < 0:
            b, c, d = -b, -c, -d
    return zooms, (float(b), float(c), float(d)), qfac


#: CT Image Storage
CT_IMAGE = "1.2.840.10008.5.1.4.1.1.2"
MR_IMAGE = "1.2.840.10008.5.1.4.1.1.4"
AXIAL = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
SAGITTAL = (0.0, 1.0, 0.0, 0.0, 0.0, -1.0)
CORONAL = (1.0, 0.0, 0.0, 0.0, 0.0, -1.0)


def slice_positions(count: int, orientation=AXIAL, *, origin=(0.0, 0.0, 0.0),
                    step: float = 1.0, tilt=(0.0, 0.0)) -> np.ndarray:
    """``ImagePositionPatient`` of ``count`` slices: ``origin`` + k x ``step`` along the normal
    (row cosine x column cosine) + k x ``tilt`` (mm along the row and column directions: a
    gantry tilt shears the stack)."""
    row, col = np.array(orientation[:3], float), np.array(orientation[3:], float)
    normal = np.cross(row, col)
    k = np.arange(count, dtype=np.float64)[:, None]
    return np.asarray(origin, float) + k * (step * normal + tilt[0] * row + tilt[1] * col)


def write_dicom_series(folder: str | Path, stored: np.ndarray, *, spacing=(0.75, 0.75),
                       orientation=AXIAL, positions=None, slope=1.0, intercept=-1024.0,
                       series_uid: str | None = None, modality: str = "CT",
                       bits_stored: int | None = None, signed: bool | None = None,
                       syntax: str = "explicit", shuffle: bool = True,
                       reverse_instances: bool = True, names: str = "IM{:05d}",
                       seed: int = 0, **tags) -> list[Path]:
    """Write ``stored`` (``(slices, rows, columns)``: the stored values, uint16 or int16) as one
    DICOM file per slice under ``folder``; returns the paths in slice order.

    Geometry: ``orientation`` (``ImageOrientationPatient``: row then column cosines),
    ``spacing`` (``PixelSpacing``: row spacing, column spacing), ``positions`` (one
    ``ImagePositionPatient`` a slice; default :func:`slice_positions` 1 mm apart). ``slope``
    and ``intercept``: one value or one a slice (``RescaleSlope`` / ``RescaleIntercept``).
    ``bits_stored`` (default the type's bits) and ``signed`` (``PixelRepresentation``,
    default from the dtype): a 12-bit signed series stores two's complement in 12 of 16 bits
    (the high bits as the scanner left them: sign-extended when ``signed``).
    ``syntax``: "explicit", "implicit", "big" (Explicit VR Big Endian, retired but found),
    "rle" (RLE Lossless) or "deflated". File names are ``names`` of a shuffled order
    (``shuffle``), instance numbers descend along the stack (``reverse_instances``), as real
    exports do. ``tags``: further keywords (``SeriesDescription``, ``PatientID``, ...).
    """
    import pydicom
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import (DeflatedExplicitVRLittleEndian, ExplicitVRBigEndian,
                             ExplicitVRLittleEndian, ImplicitVRLittleEndian, RLELossless,
                             generate_uid)

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stored = np.asarray(stored)
    count = stored.shape[0]
    positions = slice_positions(count, orientation) if positions is None else \
        np.asarray(positions, dtype=np.float64)
    slopes = np.broadcast_to(np.asarray(slope, dtype=np.float64), (count,))
    intercepts = np.broadcast_to(np.asarray(intercept, dtype=np.float64), (count,))
    signed = stored.dtype.kind == "i" if signed is None else signed
    bits = bits_stored or stored.dtype.itemsize * 8
    order = np.random.default_rng(seed).permutation(count) if shuffle else np.arange(count)
    series_uid = series_uid or generate_uid()
    study_uid = tags.pop("StudyInstanceUID", None) or generate_uid()
    frame_uid = generate_uid()
    sop_class = CT_IMAGE if modality == "CT" else MR_IMAGE
    transfer = {"explicit": ExplicitVRLittleEndian, "implicit": ImplicitVRLittleEndian,
                "big": ExplicitVRBigEndian, "rle": ExplicitVRLittleEndian,
                "deflated": DeflatedExplicitVRLittleEndian}[syntax]
    paths = []
    for k in range(count):
        sop = generate_uid()
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID = sop_class, sop
        meta.TransferSyntaxUID = transfer
        ds = pydicom.Dataset()
        ds.file_meta = meta
        ds.SOPClassUID, ds.SOPInstanceUID = sop_class, sop
        ds.Modality = modality
        ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
        ds.FrameOfReferenceUID = frame_uid
        ds.SeriesNumber = tags.get("SeriesNumber", 1)
        ds.InstanceNumber = count - k if reverse_instances else k + 1
        ds.ImagePositionPatient = [f"{v:.6f}".rstrip("0").rstrip(".") for v in positions[k]]
        ds.ImageOrientationPatient = [f"{v:.8f}".rstrip("0").rstrip(".") for v in orientation]
        ds.PixelSpacing = [f"{v:g}" for v in spacing]
        ds.SliceThickness = "5"  # never the step: overlapping reconstructions exist
        ds.Rows, ds.Columns = stored.shape[1:]
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated = stored.dtype.itemsize * 8
        ds.BitsStored, ds.HighBit = bits, bits - 1
        ds.PixelRepresentation = int(signed)
        ds.RescaleSlope, ds.RescaleIntercept = f"{slopes[k]:g}", f"{intercepts[k]:g}"
        ds.RescaleType = "HU" if modality == "CT" else "US"
        for key, value in tags.items():
            if key != "SeriesNumber":
                setattr(ds, key, value)
        pixels = np.ascontiguousarray(stored[k])
        big = syntax == "big"
        ds.PixelData = pixels.astype(pixels.dtype.newbyteorder(">" if big else "<")).tobytes()
        if syntax == "rle":
            ds.compress(RLELossless, pixels, encoding_plugin="pydicom")
        path = folder / (names.format(int(order[k]) + 1))
        ds.save_as(path, enforce_file_format=True, implicit_vr=syntax == "implicit",
                   little_endian=not big)
        paths.append(path)
    return paths
