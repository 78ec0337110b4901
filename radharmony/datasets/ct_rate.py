"""CT-RATE (Hamamci et al.): 50,188 non-contrast chest CT reconstructions of 25,692 scans of
21,304 patients, with reports and 18 multi-abnormality labels (gzip NIfTI volumes).

Layout, as the Hugging Face repository ships it (``base_image_dir`` is its ``dataset/``)::

    dataset/train_fixed/train_<patient>/train_<patient>_<scan>/train_<patient>_<scan>_<recon>.nii.gz   (v2)
    dataset/train/...                                                          (v1, same names)
    dataset/metadata/{train,validation}_metadata.csv
    dataset/radiology_text_reports/{train,validation}_reports.csv
    dataset/multi_abnormality_labels/{train,valid}_predicted_labels.csv

Source of truth: the metadata CSV, one row per reconstruction (``VolumeName``). Quirks:

- **Two releases of the volumes.** v1 (``train/``, ``valid/``) holds the stored values with
  the NIfTI header's defaults (no rescale, unit spacing, no orientation); the metadata's
  ``RescaleSlope`` / ``RescaleIntercept`` (intercept -1024 or -8192) must be applied, and its
  spacing, ``ImagePositionPatient`` and ``ImageOrientationPatient`` give the geometry. v2
  (``train_fixed/``, ``valid_fixed/``) is already in Hounsfield units with its geometry in the
  header: the rescale must **not** be applied again. Each row's tree is found by listing both
  (v2 preferred when a volume is in both); ``volume_version`` records it, and
  ``rescale_slope`` / ``rescale_intercept`` hold what the reader applies (NaN for v2: nothing).
- ``XYSpacing`` is a string, ``"[0.75, 0.75]"``: parsed as two numbers (``spacing_x``,
  ``spacing_y``, in the dataset's own order, as its ``fix_metadata.py`` reads them);
  non-square pixels are kept.
- The label file says ``valid_``, the metadata and report files ``validation_``.
- Two reconstructions of a scan share one report: ``study_id`` is the scan
  (``train_1_a``), ``patient_id`` the patient (``train_1``; validation patients are other
  people, ``valid_1``). The report's four fields are kept as ``section_*`` columns and joined
  into ``report``.
"""

from __future__ import annotations

import warnings
from itertools import repeat
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..annotations.labels import decode_cells
from ..reports.format import join_sections, section_texts
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
#: the metadata columns read (the file has ~40 DICOM fields; the rest are not needed)
METADATA_COLUMNS = ("VolumeName", "XYSpacing", "ZSpacing", "RescaleSlope", "RescaleIntercept",
                    "ImagePositionPatient", "ImageOrientationPatient")
#: metadata columns kept when present, -> table column
OPTIONAL_COLUMNS = {"PatientSex": "patient_sex", "PatientAge": "patient_age",
                    "Manufacturer": "manufacturer", "SeriesDescription": "series_description"}
#: report field -> (heading in ``report``, table column)
REPORT_FIELDS = {"ClinicalInformation_EN": ("CLINICAL INFORMATION", "section_clinical_information"),
                 "Technique_EN": ("TECHNIQUE", "section_technique"),
                 "Findings_EN": ("FINDINGS", "section_findings"),
                 "Impressions_EN": ("IMPRESSION", "section_impression")}
LABELS = ("Medical material", "Arterial wall calcification", "Cardiomegaly",
          "Pericardial effusion", "Coronary artery wall calcification", "Hiatal hernia",
          "Lymphadenopathy", "Emphysema", "Atelectasis", "Lung nodule", "Lung opacity",
          "Pulmonary fibrotic sequela", "Pleural effusion", "Mosaic attenuation pattern",
          "Peribronchial thickening", "Consolidation", "Bronchiectasis",
          "Interlobular septal thickening")
#: label -> canonical findings (radharmony.vocabulary); labels predicted from the reports
LABEL_MAP = {
    "Medical material": (("medical_material", "exact"), ("support_devices", "broader")),
    "Arterial wall calcification": (("arterial_wall_calcification", "exact"),
                                    ("aortic_calcification", "broader")),
    "Cardiomegaly": (("cardiomegaly", "exact"),),
    "Pericardial effusion": (("pericardial_effusion", "exact"),),
    "Coronary artery wall calcification": (("coronary_artery_calcification", "exact"),),
    "Hiatal hernia": (("hiatal_hernia", "exact"),),
    "Lymphadenopathy": (("lymphadenopathy", "exact"),),
    "Emphysema": (("emphysema", "exact"),), "Atelectasis": (("atelectasis", "exact"),),
    "Lung nodule": (("nodule", "exact"),), "Lung opacity": (("lung_opacity", "exact"),),
    # fibrotic sequelae are focal post-inflammatory scars, not the diffuse fibrosis of CXR sets
    "Pulmonary fibrotic sequela": (("fibrosis", "approximate"),),
    "Pleural effusion": (("pleural_effusion", "exact"),),
    "Mosaic attenuation pattern": (("mosaic_attenuation", "exact"),),
    "Peribronchial thickening": (("peribronchial_thickening", "exact"),),
    "Consolidation": (("consolidation", "exact"),),
    "Bronchiectasis": (("bronchiectasis", "exact"),),
    "Interlobular septal thickening": (("interlobular_septal_thickening", "exact"),),
}
LABEL_CODES = {"0": 0.0, "1": 1.0, "0.0": 0.0, "1.0": 1.0}
VOLUME_NAME = r"(?P<patient>(?P<split>[a-z]+)_\d+)_(?P<scan>[A-Za-z]+)_(?P<recon>\d+)\.nii\.gz"
SUFFIX = ".nii.gz"
#: split -> (file prefix of metadata and reports, of the labels, tree v1, tree v2, split)
SPLITS = {"train": ("train", "train", "train", "train_fixed", "train"),
          "valid": ("validation", "valid", "valid", "valid_fixed", "valid")}
EXTRA_COLS = ("volume_name", "reconstruction", "volume_version", "rescale_slope",
              "rescale_intercept", "spacing_x", "spacing_y", "spacing_z",
              "image_position_patient", "image_orientation_patient",
              *OPTIONAL_COLUMNS.values(), *(c for _, c in REPORT_FIELDS.values()),
              "split", "split_raw")
COLUMN_TYPES = {"reconstruction": "Int64", "volume_version": "Int64",
                "rescale_slope": "float64", "rescale_intercept": "float64",
                "spacing_x": "float64", "spacing_y": "float64", "spacing_z": "float64",
                "image_position_patient": "json", "image_orientation_patient": "json"}
ACCESS = ("Hugging Face ibrahimhamamci/CT-RATE, gated: CC BY-NC-SA 4.0 (non-commercial); cite "
          "Hamamci et al., 'Developing generalist foundation models from a multimodal dataset "
          "for 3D computed tomography'")
EXPECTED = {"train": {"images": 47_149, "studies": 24_128, "patients": 20_000},
            "valid": {"images": 3_039, "studies": 1_564, "patients": 1_304}}


def split_spec(split: str) -> DatasetSpec:
    meta, labels, *_ = SPLITS[split]
    return DatasetSpec(
        key=f"ct_rate_{split}", title=f"CT-RATE ({'validation' if split == 'valid' else split})",
        metadata_files=(f"{meta}_metadata.csv",), label_cols=LABELS, label_map=LABEL_MAP,
        extra_cols=EXTRA_COLS, outputs=frozenset({"cls", "report"}), row_unit="volume",
        id_col="volume_name", age_col="patient_age", age_format="auto", sex_col="patient_sex",
        column_types=COLUMN_TYPES, access=ACCESS, expected=EXPECTED[split])


#: the header defaults of a v1 file, as the fake writes them (a NIfTI made from an array and
#: an identity affine: sform code 2, no qform); the reader replaces whatever transform the
#: header holds and checks only its unit spacing (a rewritten header is refused)
V1_HEADER_AFFINE = np.diag([-1.0, -1.0, 1.0, 1.0])


# -- pure helpers ---------------------------------------------------------------------------------
def metadata_affine(position, orientation, spacing) -> np.ndarray:
    """The LPS affine of a volume file's (column i, row j, slice k) index from the metadata:
    ``ImagePositionPatient`` the first voxel, ``ImageOrientationPatient`` the row and column
    directions, slices along their cross product, ``spacing`` (x, y, z) mm (the geometry the
    dataset's own ``fix_metadata.py`` writes into v1 files)."""
    row, col = np.asarray(orientation[:3], float), np.asarray(orientation[3:6], float)
    out = np.eye(4)
    out[:3, 0], out[:3, 1] = row * spacing[0], col * spacing[1]
    out[:3, 2] = np.cross(row, col) * spacing[2]
    out[:3, 3] = position
    return out


def numbers(col: pd.Series, n: int, *, source: str, column: str) -> np.ndarray:
    """``"[a, b, ...]"`` text cells -> an (rows, ``n``) float array (never one character
    sliced off: ``"[0.75, 0.8]"`` is 0.75 and 0.8)."""
    cells = col.tolist()
    try:  # as released: "[a, b]" in every row (one pass at C speed per step)
        if all(map(str.startswith, cells, repeat("["))) and \
                all(map(str.endswith, cells, repeat("]"))):
            parts = [c[1:-1].split(",") for c in cells]
            if all(len(p) == n for p in parts):
                return np.array(parts, dtype=np.float64).reshape(len(cells), n)
    except (TypeError, ValueError):
        pass  # the checking path below names the row at fault
    inner = col.str.strip().str.removeprefix("[").str.removesuffix("]")
    parts = inner.str.split(",", expand=True)
    ok = col.str.fullmatch(r"\s*\[[^\[\]]*\]\s*") & (parts.notna().sum(axis=1) == n) \
        if parts.shape[1] >= n else pd.Series(False, index=col.index)
    check_cells(ok, col, source=source, what=f"{column} is not a list of {n} numbers",
                expected=f"e.g. '[{', '.join(['0.75'] * n)}]'")
    values = pd.DataFrame({k: pd.to_numeric(parts[k], errors="coerce") for k in range(n)})
    check_cells(values.notna().all(axis=1), col, source=source,
                what=f"{column} is not a list of {n} numbers", expected="numbers")
    return values.to_numpy(np.float64)


def _number(col: pd.Series, *, source: str, column: str) -> np.ndarray:
    values = pd.to_numeric(col, errors="coerce")
    check_cells(values.notna(), col, source=source, what=f"{column} is not a number",
                expected="a number, as released")
    return values.to_numpy(np.float64)


def by_name(frame: pd.DataFrame | None, names: pd.Series, *, what: str, source: str
            ) -> pd.DataFrame | None:
    """``frame``'s rows in the order of ``names`` (joined on ``VolumeName``; None when the file
    is absent); a name the file lacks gets an empty row, counted in one warning."""
    if frame is None:
        return None
    frame = frame.drop_duplicates("VolumeName", keep="last").set_index("VolumeName")
    out = frame.reindex(names.to_numpy())
    known = set(frame.index.tolist())
    missing = sum(name not in known for name in names.tolist())
    if missing:
        warnings.warn(f"{source}: {missing} of {len(names)} volumes have no row in the {what}",
                      UserWarning, stacklevel=3)
    return out.reset_index(drop=True)


def report_columns(reports: pd.DataFrame | None, studies: pd.Series, n: int) -> dict:
    """``report`` and the ``section_*`` columns; a volume without its own report row takes
    its scan's (the reconstructions of a scan share one report)."""
    cols = {c: [None] * n for _, c in REPORT_FIELDS.values()}
    if reports is not None:
        for field, (_, col) in REPORT_FIELDS.items():
            text = pd.Series(section_texts(reports[field].tolist()), dtype=object)
            if text.isna().any():  # a scan's other reconstruction's text, else None
                text = text.groupby(studies.to_numpy()).transform("first")
                text = text.astype(object).where(text.notna(), None)
            cols[col] = text.tolist()
    heads = tuple(f"{h}:\n" for h, _ in REPORT_FIELDS.values())
    cols["report"] = list(map(lambda *t: join_sections(*t, heads=heads),
                              *(cols[c] for _, c in REPORT_FIELDS.values())))
    return cols


# -- harmonizer -----------------------------------------------------------------------------------
class _CTRATEHarmonizer(BaseHarmonizer):
    split: ClassVar[str]

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return f"the CT-RATE metadata table {self.spec.metadata_files[0]}"

    def _side(self, path: Path, folder: str, name: str) -> Path | None:
        """A side file in its own folder of ``dataset/`` (or beside the metadata)."""
        roots = [path.parent.parent, path.parent]
        if self.base_image_dir is not None:
            roots.insert(0, Path(self.base_image_dir))
        for cand in [r / folder / name for r in roots] + [path.parent / name]:
            if cand.is_file():
                return cand
        return None

    def inputs(self, path: Path) -> Inputs:
        """The metadata, the report and label tables, and both volume trees, each listed."""
        meta, labels, v1, v2, _ = SPLITS[self.split]
        files = {"reports": self._side(path, "radiology_text_reports", f"{meta}_reports.csv"),
                 "labels": self._side(path, "multi_abnormality_labels",
                                      f"{labels}_predicted_labels.csv")}
        base = None if self.base_image_dir is None else Path(self.base_image_dir)
        folders = {f"v{k}": (base / tree if base is not None and (base / tree).is_dir()
                             else None, (SUFFIX,)) for k, tree in ((1, v1), (2, v2))}
        return Inputs(path, files, folders)

    def read(self, inputs: Inputs) -> dict:
        text = {"dtype": str, "keep_default_na": False, "na_values": [""]}
        raw = {"metadata": read_table(inputs.metadata, description=self.metadata_description,
                                      columns=METADATA_COLUMNS, **text)}
        for role, columns in (("reports", ("VolumeName", *REPORT_FIELDS)),
                              ("labels", ("VolumeName", *LABELS))):
            path = inputs.file(role)
            if path is None:
                warnings.warn(f"No CT-RATE {role} table found near {inputs.metadata}: the "
                              f"table has no {role}", UserWarning, stacklevel=3)
            raw[role] = None if path is None else read_table(
                path, description=f"the CT-RATE {role} table {path.name}", columns=columns,
                **text)
        for role in ("v1", "v2"):
            raw[role] = inputs.by_name(role)
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        m = raw["metadata"]
        name = m["VolumeName"]
        parts = name.str.extract(VOLUME_NAME)
        check_cells(parts["recon"].notna(), name, source=source,
                    what="VolumeName is not <split>_<patient>_<scan>_<reconstruction>.nii.gz",
                    expected="e.g. train_1_a_1.nii.gz")
        patient, study = parts["patient"], parts["patient"] + "_" + parts["scan"]
        _, _, v1, v2, split = SPLITS[cls.split]
        listed = {1: raw.get("v1"), 2: raw.get("v2")}
        default = 1 if listed[1] is not None and listed[2] is None else 2
        nested = patient + "/" + study + "/" + name
        version = np.full(len(m), default, np.int64)
        if listed[2] is not None or listed[1] is not None:
            names = name.tolist()
            in_v2 = np.fromiter(map((listed[2] or {}).__contains__, names), bool, len(names))
            in_v1 = np.fromiter(map((listed[1] or {}).__contains__, names), bool, len(names))
            version = np.where(in_v2, 2, np.where(in_v1, 1, version))
        trees = {1: v1, 2: v2}
        paths = [f"{trees[v]}/{(listed[v] or {}).get(n, rel)}"
                 for v, n, rel in zip(version.tolist(), name.tolist(), nested.tolist())]
        xy = numbers(m["XYSpacing"], 2, source=source, column="XYSpacing")
        slope = _number(m["RescaleSlope"], source=source, column="RescaleSlope")
        intercept = _number(m["RescaleIntercept"], source=source, column="RescaleIntercept")
        v1_rows = version == 1
        df = pd.DataFrame({
            "patient_id": patient, "study_id": study, "image_path": paths,
            "view_position": None, "report": None,
            "volume_name": name.str.slice(0, -len(SUFFIX)),
            "reconstruction": parts["recon"].astype(np.int64),
            "volume_version": version,
            "rescale_slope": np.where(v1_rows, slope, np.nan),  # applied by the reader: v1 only
            "rescale_intercept": np.where(v1_rows, intercept, np.nan),
            "spacing_x": xy[:, 0], "spacing_y": xy[:, 1],
            "spacing_z": _number(m["ZSpacing"], source=source, column="ZSpacing"),
            "image_position_patient": numbers(m["ImagePositionPatient"], 3, source=source,
                                              column="ImagePositionPatient").tolist(),
            "image_orientation_patient": numbers(m["ImageOrientationPatient"], 6, source=source,
                                                 column="ImageOrientationPatient").tolist()})
        for col, out in OPTIONAL_COLUMNS.items():
            df[out] = m[col] if col in m.columns else None
        labels = by_name(raw.get("labels"), name, what="label table", source=source)
        df[list(LABELS)] = np.nan if labels is None else \
            decode_cells(labels[list(LABELS)], LABEL_CODES, source=source)
        reports = by_name(raw.get("reports"), name, what="report table", source=source)
        for col, values in report_columns(reports, study, len(df)).items():
            df[col] = pd.Series(values, dtype=object)
        df["split"], df["split_raw"] = split, split
        return df


# -- thin split classes ----------------------------------------------------------------------------
class CTRATETrainHarmonizer(_CTRATEHarmonizer):
    """CT-RATE train: 47,149 reconstructions of 24,128 scans of 20,000 patients."""
    split, spec = "train", split_spec("train")


class CTRATEValidHarmonizer(_CTRATEHarmonizer):
    """CT-RATE validation: 3,039 reconstructions of 1,564 scans of 1,304 patients."""
    split, spec = "valid", split_spec("valid")


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.volumes import VolumeDataset

    class CTRATEVolumes(VolumeDataset):
        """A v1 volume gets the metadata's geometry in place of its header's defaults (and,
        through the table's ``rescale_*`` columns, the metadata's rescale); a v2 volume is
        read as it is."""
        ct = True

        def declared_geometry(self, index: int):
            row = self.harmonized_df.iloc[index]
            if row["volume_version"] != 1:
                return None
            return V1_HEADER_AFFINE, metadata_affine(
                row["image_position_patient"], row["image_orientation_patient"],
                (row["spacing_x"], row["spacing_y"], row["spacing_z"]))

    class CTRATETrainDataset(CTRATEVolumes):
        """CT-RATE train volumes; ``base_image_dir`` is the repository's ``dataset/``."""
        harmonizer_class = CTRATETrainHarmonizer

    class CTRATEValidDataset(CTRATEVolumes):
        """CT-RATE validation volumes; ``base_image_dir`` is the repository's ``dataset/``."""
        harmonizer_class = CTRATEValidHarmonizer

    return CTRATEVolumes, CTRATETrainDataset, CTRATEValidDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["CTRATETrainHarmonizer", "CTRATETrainDataset", "CTRATEValidHarmonizer",
           "CTRATEValidDataset"]
