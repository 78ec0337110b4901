"""Writing DICOM files for fake datasets (pydicom): uncompressed 8/16-bit or JPEG Baseline."""

from __future__ import annotations

import warnings
from pathlib import Path

import cv2
import numpy as np

SECONDARY_CAPTURE = "1.2.840.10008.5.1.4.1.1.7"
DX_IMAGE = "1.2.840.10008.5.1.4.1.1.1.1"


def write_dicom(path: str | Path, img: np.ndarray, *, jpeg: bool = False,
                photometric: str = "MONOCHROME2", bits_stored: int | None = None,
                sop_class: str = SECONDARY_CAPTURE, **tags) -> Path:
    """Write the 2-D ``img`` (uint8 or uint16) as a DICOM file and return its path.

    ``jpeg=True`` stores 8-bit pixels as JPEG Baseline (Process 1), as the RSNA and SIIM
    challenge files are; otherwise pixels are stored uncompressed (Explicit VR Little Endian).
    ``tags`` are DICOM keywords set on the dataset (``PatientID="..."``, ``ViewPosition="PA"``).
    """
    import pydicom
    from pydicom.dataset import FileMetaDataset
    from pydicom.encaps import encapsulate
    from pydicom.uid import ExplicitVRLittleEndian, JPEGBaseline8Bit, generate_uid

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.ascontiguousarray(img)
    if jpeg and img.dtype != np.uint8:
        raise ValueError("JPEG Baseline DICOM needs uint8 pixels")
    sop_uid = tags.pop("SOPInstanceUID", None) or generate_uid()
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = sop_class
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = JPEGBaseline8Bit if jpeg else ExplicitVRLittleEndian
    ds = pydicom.Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = sop_class, sop_uid
    ds.Modality = tags.pop("Modality", "CR")
    ds.StudyInstanceUID = tags.pop("StudyInstanceUID", None) or generate_uid()
    ds.SeriesInstanceUID = tags.pop("SeriesInstanceUID", None) or generate_uid()
    with warnings.catch_warnings():  # real quirks (e.g. RSNA's age "62" as AS) are wanted
        warnings.simplefilter("ignore", UserWarning)
        for key, value in tags.items():
            setattr(ds, key, value)
    bits = 8 if img.dtype == np.uint8 else 16
    ds.Rows, ds.Columns = img.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, photometric
    ds.BitsAllocated, ds.BitsStored = bits, bits_stored or bits
    ds.HighBit, ds.PixelRepresentation = ds.BitsStored - 1, 0
    if jpeg:
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise OSError(f"could not JPEG-encode {path}")
        ds.PixelData = encapsulate([buf.tobytes()])
        ds["PixelData"].VR = "OB"
        ds.LossyImageCompression, ds.LossyImageCompressionMethod = "01", "ISO_10918_1"
    else:
        ds.PixelData = img.astype("<u2" if bits == 16 else np.uint8).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def write_deflated_dicom(path: str | Path, img: np.ndarray, *, private_bytes: int = 0,
                         private_group: int = 0x0009, **tags) -> Path:
    """Write the 2-D ``img`` as a Deflated Explicit VR Little Endian DICOM (the data set after
    the file meta is one raw deflate stream), optionally with a private OB element of
    ``private_bytes`` zero bytes in ``private_group`` (0x0009: before the image elements;
    0x7FE1: after the pixel data) -- a decompression bomb: 512 MiB of zeros deflate to about
    0.5 MB. Written as a stream (memory stays small for any size)."""
    import struct
    import zlib

    import pydicom
    from pydicom.filebase import DicomBytesIO
    from pydicom.filewriter import write_dataset, write_file_meta_info
    from pydicom.uid import DeflatedExplicitVRLittleEndian

    path = Path(path)
    plain = path.with_name(path.name + ".plain")
    write_dicom(plain, img, **tags)
    ds = pydicom.dcmread(plain)
    plain.unlink()
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian

    def encode(elements) -> bytes:
        fp = DicomBytesIO()
        fp.is_little_endian, fp.is_implicit_VR = True, False
        part = pydicom.Dataset()
        for elem in elements:
            part.add(elem)
        write_dataset(fp, part)
        return fp.getvalue()

    group = private_group << 16
    before = [e for e in ds if e.tag < group]
    after = [e for e in ds if e.tag > group + 0xFFFF]
    comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    with open(path, "wb") as fh:
        fh.write(b"\0" * 128 + b"DICM")
        meta = DicomBytesIO()
        write_file_meta_info(meta, ds.file_meta, enforce_standard=True)
        fh.write(meta.getvalue())
        fh.write(comp.compress(encode(before)))
        if private_bytes:
            creator = pydicom.DataElement(group | 0x0010, "LO", "RADHARMONY TEST")
            fh.write(comp.compress(encode([creator]) + struct.pack(
                "<HH2sHI", private_group, 0x1000, b"OB", 0, private_bytes + private_bytes % 2)))
            zeros = bytes(1 << 20)
            left = private_bytes + private_bytes % 2
            while left:
                fh.write(comp.compress(zeros[:min(left, len(zeros))]))
                left -= min(left, len(zeros))
        fh.write(comp.compress(encode(after)) + comp.flush())
    return path
