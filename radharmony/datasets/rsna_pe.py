"""RSNA-STR Pulmonary Embolism Detection (RSNA and the Society of Thoracic Radiology, 2020):
7,279 CT pulmonary angiograms, one DICOM series each, with a label on every slice and 13
exam-level labels, read as the Kaggle competition ships them (``base_image_dir`` is the
competition's root)::

    train/<StudyInstanceUID>/<SeriesInstanceUID>/<SOPInstanceUID>.dcm
    train.csv        one row per slice (SOP instance): the three UIDs, pe_present_on_image and
                     the 13 exam-level labels repeated on every slice of the exam

Source of truth: ``train.csv``; one table row per series (a volume, ``image_path`` the series
folder). Quirks:

- **Slice labels follow the geometry, never the CSV.** ``train.csv`` lists the slices in an
  order of its own, and the file names are SOP UIDs (no order at all). The table keeps each
  series' ``slice_sop_uids`` and ``slice_pe_present`` as pairs (in the CSV's order); the
  dataset (:meth:`RSNAPEDataset.slice_labels`) puts them in the order of the volume's D axis
  from the reader's geometric sort (``ImagePositionPatient`` along the slice normal, then the
  canonical flip toward S), so ``slice_labels[k]`` is the label of the k-th slice in world z.
  The table is made from the CSV alone: no DICOM header is read to harmonize.
- **Patient = study.** The release has no patient id (only anonymised UIDs): ``patient_id``
  is the ``StudyInstanceUID``, so two exams of one person, if any, fall in separate groups.
- ``pe_positive_exam`` (derived): 1 when the exam is neither ``negative_exam_for_pe`` nor
  ``indeterminate`` (the competition's rule: then some slice shows PE), 0 when negative, NaN
  when indeterminate; it carries the canonical ``pulmonary_embolism``.
- ``rv_lv_ratio_gte_1`` / ``rv_lv_ratio_lt_1`` are both 0 on an exam without PE: the ratio was
  not assessed there, so both are NaN on such rows (never a negative for RV dilatation).
- ``chronic_pe`` and ``acute_and_chronic_pe`` exclude each other (the competition's rule); each
  implies chronic PE (``narrower``), so neither's 0 says that chronic PE is absent.
- Quality flags (``qa_motion``, ``qa_contrast``, ``flow_artifact``,
  ``true_filling_defect_not_pe``) and ``indeterminate`` are kept, unmapped.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.labels import decode_cells
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer
from ..table.read_csv import check_cells, read_table
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
UID_COLUMNS = ("StudyInstanceUID", "SeriesInstanceUID", "SOPInstanceUID")
SLICE_LABEL = "pe_present_on_image"
#: the 13 exam-level labels, in train.csv's order
EXAM_LABELS = ("negative_exam_for_pe", "qa_motion", "qa_contrast", "flow_artifact",
               "rv_lv_ratio_gte_1", "rv_lv_ratio_lt_1", "leftsided_pe", "chronic_pe",
               "true_filling_defect_not_pe", "rightsided_pe", "acute_and_chronic_pe",
               "central_pe", "indeterminate")
COLUMNS = (*UID_COLUMNS, SLICE_LABEL, *EXAM_LABELS)
DERIVED = "pe_positive_exam"
LABELS = (DERIVED, *EXAM_LABELS)
#: label -> canonical findings (radharmony.vocabulary)
LABEL_MAP = {
    DERIVED: (("pulmonary_embolism", "exact"),),
    "negative_exam_for_pe": None,  # its negation is pe_positive_exam
    "qa_motion": None, "qa_contrast": None, "flow_artifact": None,
    "rv_lv_ratio_gte_1": (("right_ventricular_dilatation", "exact"),),
    "rv_lv_ratio_lt_1": None,  # says RV dilatation is absent on a PE exam: no relation for it
    "leftsided_pe": (("left_pulmonary_embolism", "exact"),),
    "chronic_pe": (("chronic_pulmonary_embolism", "narrower"),),
    "true_filling_defect_not_pe": None,
    "rightsided_pe": (("right_pulmonary_embolism", "exact"),),
    "acute_and_chronic_pe": (("chronic_pulmonary_embolism", "narrower"),),
    "central_pe": (("central_pulmonary_embolism", "exact"),),
    "indeterminate": None,
}
LABEL_CODES = {"0": 0.0, "1": 1.0, "0.0": 0.0, "1.0": 1.0}
TREE = "train"
EXTRA_COLS = ("series_instance_uid", "num_slices", "pe_slices", "slice_sop_uids",
              "slice_pe_present", "split", "split_raw")
COLUMN_TYPES = {"num_slices": "int64", "pe_slices": "int64", "slice_sop_uids": "json",
                "slice_pe_present": "json"}
ACCESS = ("Kaggle rsna-str-pulmonary-embolism-detection (competition rules: non-commercial "
          "research); cite Colak et al., 'The RSNA Pulmonary Embolism CT Dataset', Radiology: "
          "AI 2021")
EXPECTED = {"images": 7_279, "studies": 7_279, "patients": 7_279}

SPEC = DatasetSpec(
    key="rsna_pe", title="RSNA-STR Pulmonary Embolism", metadata_files=("train.csv",),
    label_cols=LABELS, label_map=LABEL_MAP, extra_cols=EXTRA_COLS,
    outputs=frozenset({"cls", "slice_labels"}),
    row_unit="volume", id_col="series_instance_uid", column_types=COLUMN_TYPES, access=ACCESS,
    expected=EXPECTED)


# -- pure helpers ---------------------------------------------------------------------------------
def group_bounds(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of each group together (a stable order, groups by code) and each group's
    first position in that order."""
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate(([0], np.cumsum(np.bincount(codes))[:-1]))
    return order, starts


def per_group(values: np.ndarray, order: np.ndarray, starts: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Each group's (min, max) of ``values`` (rows, ...) over its rows (a NaN cell makes both
    NaN: the group's label is then unknown)."""
    ordered = values[order]
    return np.minimum.reduceat(ordered, starts), np.maximum.reduceat(ordered, starts)


def label_cells(frame: pd.DataFrame, *, source: str) -> np.ndarray:
    """The 0/1 label columns as float32: read as integers by the CSV parser and all 0 or 1 (as
    released: one check at C speed), else decoded as text, naming the first row at fault."""
    if all(frame[c].dtype.kind in "iu" for c in frame.columns):
        values = frame.to_numpy()
        if ((values == 0) | (values == 1)).all():
            return values.astype(np.float32)
    return decode_cells(frame.astype("string"), LABEL_CODES, source=source)


def exam_labels(slices: np.ndarray, order: np.ndarray, starts: np.ndarray, *, source: str
                ) -> np.ndarray:
    """(series, 13) exam labels from the (slices, 13) cells; a label that differs between the
    slices of one series is NaN there, counted in one warning."""
    low, high = per_group(slices, order, starts)
    differs = low != high
    if differs.any():
        bad = [EXAM_LABELS[j] for j in np.flatnonzero(differs.any(axis=0))]
        warnings.warn(f"{source}: {int(differs.any(axis=1).sum())} series have exam labels "
                      f"that differ between their slices ({', '.join(bad)}): NaN there",
                      UserWarning, stacklevel=3)
    return np.where(differs, np.nan, high)


# -- harmonizer -----------------------------------------------------------------------------------
class RSNAPEHarmonizer(BaseHarmonizer):
    """RSNA-STR PE train: 1,790,594 slices in 7,279 series (one per study)."""
    spec = SPEC

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return "the RSNA-STR PE slice table train.csv"

    def read(self, inputs) -> dict:
        return {"slices": read_table(inputs.metadata, description=self.metadata_description,
                                     columns=COLUMNS, usecols=list(COLUMNS),
                                     dtype=dict.fromkeys(UID_COLUMNS, str),
                                     keep_default_na=False, na_values=[""])}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "train.csv") -> pd.DataFrame:
        m = raw["slices"]
        for col in UID_COLUMNS:
            check_cells(m[col].notna(), m[col], source=source, what=f"{col} is empty",
                        expected="a DICOM UID")
        cells = label_cells(m[[SLICE_LABEL, *EXAM_LABELS]], source=source)
        codes, series = pd.factorize(m["SeriesInstanceUID"], sort=False)
        order, starts = group_bounds(codes)
        study_codes, studies = pd.factorize(m["StudyInstanceUID"], sort=False)
        low, high = per_group(study_codes.astype(np.float64), order, starts)
        check_cells(pd.Series((low == high)[codes]), m["StudyInstanceUID"], source=source,
                    what="a series is listed under two studies",
                    expected="one StudyInstanceUID per SeriesInstanceUID")
        study = np.asarray(studies)[high.astype(np.int64)]
        exam = exam_labels(cells[:, 1:].astype(np.float64), order, starts, source=source)
        col = {c: exam[:, j] for j, c in enumerate(EXAM_LABELS)}
        negative, indeterminate = col["negative_exam_for_pe"], col["indeterminate"]
        positive = np.where(indeterminate == 1, np.nan, np.where(negative == 1, 0.0, 1.0))
        positive[np.isnan(negative) | np.isnan(indeterminate)] = np.nan
        for rv in ("rv_lv_ratio_gte_1", "rv_lv_ratio_lt_1"):
            col[rv] = np.where(positive == 1, col[rv], np.nan)  # not assessed without PE
        check_cells(pd.Series(~np.isnan(cells[:, 0])), m[SLICE_LABEL], source=source,
                    what=f"{SLICE_LABEL} is empty", expected="0 or 1")
        slice_pe = cells[:, 0][order]
        cuts = starts[1:]
        pe_lists = [a.astype(np.int64).tolist() for a in np.split(slice_pe, cuts)]
        pe_slices = np.add.reduceat(slice_pe, starts).astype(np.int64)
        mismatch = (positive == 1) != (pe_slices > 0)
        mismatch &= ~np.isnan(positive)
        if mismatch.any():
            warnings.warn(f"{source}: {int(mismatch.sum())} series are positive exams without "
                          "a positive slice, or negative with one (kept as labelled)",
                          UserWarning, stacklevel=3)
        sops = [a.tolist() for a in np.split(m["SOPInstanceUID"].to_numpy(object)[order], cuts)]
        series = np.asarray(series, dtype=object)
        df = pd.DataFrame({
            "patient_id": study, "study_id": study,
            "image_path": [f"{TREE}/{s}/{r}" for s, r in zip(study.tolist(), series.tolist())],
            "view_position": None, "report": None, DERIVED: positive,
            **{c: col[c] for c in EXAM_LABELS},
            "series_instance_uid": series,
            "num_slices": np.diff(np.append(starts, len(m))).astype(np.int64),
            "pe_slices": pe_slices,
            "slice_sop_uids": pd.Series(sops, dtype=object),
            "slice_pe_present": pd.Series(pe_lists, dtype=object),
            "split": "train", "split_raw": "train"})
        return df


def slice_order(files, first_position, affine, depth: int) -> list[str]:
    """The SOP UIDs (file names without ``.dcm``) of ``files`` (the reader's slices, sorted
    along the slice normal) in the order of the canonical volume's D axis: the first sorted
    file sits at d = 0 (the same order) or at d = ``depth`` - 1 (the canonical order flipped
    it). ``first_position``: that file's ``ImagePositionPatient`` (LPS mm); ``affine``: the
    volume's LPS affine. Raises when D is not the slice axis."""
    from ..volumes.volume import VolumeGeometryError

    uids = [Path(f).name.removesuffix(".dcm") for f in files]
    if depth != len(uids):
        raise VolumeGeometryError(
            "the volume's D axis is not its slice axis", expected=f"{len(uids)} slices along D",
            found=f"D = {depth}", fix="read the series without a preset for slice labels")
    inverse = np.linalg.inv(np.asarray(affine, dtype=np.float64))
    d = float(inverse[0, :3] @ np.asarray(first_position, dtype=np.float64) + inverse[0, 3])
    if abs(d) < 0.5:
        return uids
    if abs(d - (depth - 1)) < 0.5:
        return uids[::-1]
    raise VolumeGeometryError(
        f"{files[0]}: the first slice is not at either end of the D axis",
        expected="an axial series (slices along D)", found=f"at d = {d:.2f} of {depth}",
        fix="slice labels need the series' slices along the volume's D axis")


def labels_in_order(uids: list[str], sop_uids, values) -> np.ndarray:
    """``values`` (per SOP UID in ``sop_uids``) in the order of ``uids``; a slice the table does
    not list is NaN."""
    table = dict(zip(sop_uids, values))
    return np.array([table.get(u, np.nan) for u in uids], dtype=np.float32)


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.volumes import VolumeDataset
    from ..volumes.dicom_headers import read_header

    class RSNAPEDataset(VolumeDataset):
        """RSNA-STR PE series (``base_image_dir`` the competition root). With
        ``output_slice_labels=True`` a sample has ``slice_labels`` (float32: ``pe_present_on_image``
        of each slice of the returned volume's slice axis in world z order, NaN for a slice the
        table does not list). Under a preset the labels follow the preset's slices: a
        resampled slice takes the label of the nearest source slice, a cropped one drops, a
        padded one is NaN (:class:`~radharmony.volumes.placement.VolumeGrid`); under a user
        transform they stay the source's."""
        harmonizer_class = RSNAPEHarmonizer
        ct = True

        def slice_labels(self, index: int, volume=None) -> np.ndarray:
            """``pe_present_on_image`` along row ``index``'s source volume's D axis (float32)."""
            volume = self.source_volume(index) if volume is None else volume
            files = volume.source.files
            header = read_header(Path(files[0]))
            position = None if header is None else header.floats("ImagePositionPatient")
            uids = slice_order(files, position, volume.in_space("LPS").affine,
                               volume.shape[0])
            row = self.harmonized_df.iloc[index]
            return labels_in_order(uids, row["slice_sop_uids"], row["slice_pe_present"])

    return (RSNAPEDataset,)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RSNAPEHarmonizer", "RSNAPEDataset"]
