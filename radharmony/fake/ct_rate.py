"""A CT-RATE replica in the real on-disk format (both releases of the volumes).

Layout, as the Hugging Face repository ships it (``<root>/dataset`` is ``base_image_dir``)::

    dataset/train_fixed/train_1/train_1_a/train_1_a_1.nii.gz      v2: int16 HU, real geometry
    dataset/train/train_1/train_1_a/train_1_a_1.nii.gz            v1: stored values, header defaults
    dataset/metadata/train_metadata.csv, validation_metadata.csv
    dataset/radiology_text_reports/train_reports.csv, validation_reports.csv
    dataset/multi_abnormality_labels/train_predicted_labels.csv, valid_predicted_labels.csv

Quirks reproduced: ``XYSpacing`` (and the DICOM vectors) as bracketed strings
(``"[0.75, 0.75]"``; one volume with non-square pixels); ``valid_`` in the label file's name,
``validation_`` in the others; the metadata's ~40 DICOM columns in their order; two
reconstructions of a scan sharing one report; v1 volumes holding the stored values
(HU - intercept, intercepts -1024 and -8192) in the file's (column, row, slice) index order
with the NIfTI header's defaults (identity affine as an sform of code 2, no qform,
``scl_slope`` 1 / ``scl_inter`` 0 or both 0), v2 volumes in Hounsfield units with the geometry in the header, as the dataset's own
``fix_metadata.py`` writes them (SimpleITK: qform and sform, code 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from ..datasets.ct_rate import LABELS, V1_HEADER_AFFINE, metadata_affine
from .tables import write_csv
from .volumes import synthetic_ct, write_nifti

#: the metadata CSV's columns, in the released order
METADATA_HEADER = (
    "VolumeName", "Manufacturer", "SeriesDescription", "ManufacturerModelName", "PatientSex",
    "PatientAge", "ReconstructionDiameter", "DistanceSourceToDetector",
    "DistanceSourceToPatient", "GantryDetectorTilt", "TableHeight", "RotationDirection",
    "XRayTubeCurrent", "Exposure", "FilterType", "GeneratorPower", "FocalSpots",
    "ConvolutionKernel", "PatientPosition", "RevolutionTime", "SingleCollimationWidth",
    "TotalCollimationWidth", "TableSpeed", "TableFeedPerRotation", "SpiralPitchFactor",
    "DataCollectionDiameter", "ReconstructionTargetCenterPatient", "ExposureModulationType",
    "CTDIvol", "ImagePositionPatient", "ImageOrientationPatient", "SliceThickness", "Rows",
    "Columns", "XYSpacing", "RescaleIntercept", "RescaleSlope", "RescaleType",
    "NumberofSlices", "ZSpacing", "StudyDate")
REPORT_HEADER = ("VolumeName", "ClinicalInformation_EN", "Technique_EN", "Findings_EN",
                 "Impressions_EN")
#: split -> (metadata/report prefix, label prefix, v1 tree, v2 tree)
SPLITS = {"train": ("train", "train", "train", "train_fixed"),
          "valid": ("validation", "valid", "valid", "valid_fixed")}
LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])
IOP = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


def vector(values) -> str:
    """A DICOM vector as the CSV writes it: ``"[0.75, 0.75]"``."""
    return "[" + ", ".join(repr(float(v)) for v in values) + "]"


def write_volume(path: Path, hu: np.ndarray, *, version: int, position, spacing,
                 intercept: float, header_slope: float = 1.0) -> Path:
    """One reconstruction: ``hu`` (slice, row, column) in the file's (column, row, slice)
    order; v2 in HU with its geometry, v1 stored values under the header defaults."""
    voxels = np.transpose(hu, (2, 1, 0))
    if version == 2:
        return write_nifti(path, voxels, LPS_TO_RAS @ metadata_affine(position, IOP, spacing),
                           dtype=np.int16)
    stored = (voxels.astype(np.int32) - int(intercept)).astype(np.int16)
    return write_nifti(path, stored, LPS_TO_RAS @ V1_HEADER_AFFINE, qform=0, sform=2,
                       slope=header_slope, intercept=0.0, dtype=np.int16)


def metadata_row(name: str, *, sex: str, age: int, spacing, position, shape, intercept
                 ) -> list:
    d, h, w = shape
    fields = dict.fromkeys(METADATA_HEADER, "")
    fields.update({
        "VolumeName": name, "Manufacturer": "SIEMENS", "SeriesDescription": "THORAX 1.5 B60f",
        "ManufacturerModelName": "SOMATOM Definition Edge", "PatientSex": sex,
        "PatientAge": f"{age:03d}Y", "ReconstructionDiameter": "350.0", "GantryDetectorTilt": 0,
        "PatientPosition": "HFS", "ConvolutionKernel": "['B60f']",
        "ImagePositionPatient": vector(position), "ImageOrientationPatient": vector(IOP),
        "SliceThickness": spacing[2], "Rows": h, "Columns": w,
        "XYSpacing": vector(spacing[:2]), "RescaleIntercept": intercept, "RescaleSlope": 1,
        "RescaleType": "HU", "NumberofSlices": d, "ZSpacing": spacing[2],
        "StudyDate": "20191105"})
    return [fields[c] for c in METADATA_HEADER]


REPORT = ("Pleural effusion? Shortness of breath ({days} days).",
          "Non-contrast images were taken in the axial plane with 1.5 mm slice thickness.",
          "Trachea and both main bronchi are open. Mediastinal main vascular structures, heart "
          "contour and size are normal. {finding} No pleural effusion. Thoracic aorta diameter "
          "is {aorta} mm. No lytic-destructive lesion was detected in the bone structures.",
          "{impression}")


def write_ct_rate(root: str | Path, *, split: str = "train", n_patients: int = 3,
                  seed: int = 0, volumes: bool = True, shape=(12, 20, 24),
                  only_v1: tuple[str, ...] = (), both: tuple[str, ...] = (),
                  metadata_only: bool = False, n_volumes: int | None = None) -> Path:
    """Write one split of a CT-RATE replica under ``root`` and return ``root/dataset``.

    Patient ``p`` has scans ``a`` (two reconstructions) and, for even ``p``, ``b`` (one).
    Volumes go to the v2 tree, except those named in ``only_v1`` (v1 tree only) and ``both``
    (written to both trees). ``metadata_only``: the three CSVs, no volumes. ``n_volumes``:
    stop after that many reconstructions (``n_patients`` is then a bound).
    """
    root = Path(root) / "dataset"
    rng = np.random.default_rng(seed)
    meta, labels, v1, v2 = SPLITS[split]
    rows, reports, label_rows = [], [], []
    for p in range(1, n_patients + 1):
        sex, age = ("M", "F")[p % 2], int(rng.integers(30, 85))
        for scan, recons in (("a", 2), ("b", 1))[:1 + (p % 2 == 0)]:
            finding = ("Minimal atelectasis in the left lower lobe.", "Lungs are clear.")[p % 2]
            text = [t.format(finding=finding, impression=f"Scan {scan}: {finding}",
                             days=p % 30 + 1, aorta=f"{25 + p % 170 / 10:.1f}")
                    for t in REPORT]
            flags = [int(v) for v in rng.integers(0, 2, len(LABELS))]
            for r in range(1, recons + 1):
                if n_volumes is not None and len(rows) >= n_volumes:
                    break
                name = f"{split}_{p}_{scan}_{r}.nii.gz"
                square = not (p == 1 and r == 2)
                spacing = (0.75, 0.75 if square else 0.8, (1.5, 1.0)[r - 1])
                intercept = (-1024.0, -8192.0)[(p + r) % 2]
                position = (-175.0, -190.0, -300.5 - 10 * p)
                rows.append(metadata_row(name, sex=sex, age=age, spacing=spacing,
                                         position=position, shape=shape, intercept=intercept))
                reports.append([name, *text])
                label_rows.append([name, *flags])
                if metadata_only or not volumes:
                    continue
                hu = synthetic_ct(shape, rng=rng)
                nested = Path(f"{split}_{p}", f"{split}_{p}_{scan}", name)
                stem = name[:-7]
                trees = (1,) if stem in only_v1 else (1, 2) if stem in both else (2,)
                for version in trees:
                    write_volume(root / (v1, v2)[version - 1] / nested, hu, version=version,
                                 position=position, spacing=spacing, intercept=intercept,
                                 header_slope=(1.0, 0.0)[p % 2])
    write_csv(root / "metadata" / f"{meta}_metadata.csv", METADATA_HEADER, rows, newline="\n")
    write_csv(root / "radiology_text_reports" / f"{meta}_reports.csv", REPORT_HEADER, reports,
              newline="\n")
    write_csv(root / "multi_abnormality_labels" / f"{labels}_predicted_labels.csv",
              ("VolumeName", *LABELS), label_rows, newline="\n")
    return root


@register_fake("ct_rate_train", "ct_rate_valid")
def make(root: Path) -> dict:
    """Contract-suite maker: both splits, small volumes, one train volume only in the v1
    tree; kwargs for either key."""
    write_ct_rate(root, split="train", n_patients=4, only_v1=("train_2_a_1",))
    base = write_ct_rate(root, split="valid", n_patients=2, seed=1)
    return {"base_image_dir": base}
