"""RSNA 2023 Abdominal Trauma Detection (RSNA and the American Society of Emergency
Radiology): 4,711 abdominal CT series of 3,147 trauma patients with patient-level injury
labels (bowel, active extravasation, kidney, liver and spleen injury graded healthy / low /
high), slice-level labels of bowel injury and extravasation, and organ segmentations of a
subset, read as the Kaggle competition ships them (``base_image_dir`` the competition root)::

    train.csv                  patient_id, bowel_healthy, bowel_injury, extravasation_healthy,
    (train_2024.csv)           (the 2024 re-release's table: read in place of train.csv)
                               extravasation_injury, kidney_healthy, kidney_low, kidney_high,
                               liver_..., spleen_..., any_injury (one-hot 0/1)
    train_series_meta.csv      patient_id, series_id, aortic_hu, incomplete_organ
    image_level_labels.csv     patient_id, series_id, instance_number, injury_name
    train_images/<patient_id>/<series_id>/<instance_number>.dcm
    segmentations/<series_id>.nii     1 liver, 2 spleen, 3 left kidney, 4 right kidney, 5 bowel

Source of truth: ``train_series_meta.csv``, one table row per series (a volume; a patient's
scans are often two phases, portal venous and arterial or delayed); the patient's labels from
``train.csv`` on each of its series. Quirks:

- **Labels are per patient.** ``study_id`` is the patient: the tables do not say which of a
  patient's series form one scan (only the DICOM headers do), so report and study tasks count
  patients. A series of a patient missing from ``train.csv`` is counted in a warning, its
  labels NaN.
- **Grades.** Each organ's three one-hot columns become ``<organ>_injury`` (low or high) and
  the ``grade`` output ``<finding>_grade``: healthy 0 (none), low 2 (mild), high 4 (severe)
  on :data:`radharmony.spec.GRADE_LEVELS` (the release's two grades, placed at the scale's
  middle and top). A row whose one-hot columns do not sum to 1 is refused, naming it.
- **Slice labels by instance number.** ``image_level_labels.csv`` names files
  (``instance_number`` = the file name), never ranks; :meth:`RSNAAbdominalTraumaDataset.
  slice_labels` places them through the scanned headers in world z order (bowel,
  extravasation); an instance number with no file is counted, named in a warning (file, row)
  and dropped. A series of a patient without either injury is 0 on every slice; a series of
  an injured patient with no listed slice is NaN (not annotated).
- **Stored values.** ``PixelRepresentation`` 1 with ``BitsStored`` 12 of 16 is sign-extended
  from bit 11 by the reader (:mod:`radharmony.volumes.dicom_pixels`); never read as unsigned.
- **Segmentations** are matched to the series through geometry, refused off its grid (as
  :mod:`radharmony.data.series_masks`); ``has_mask`` says which series have one.
- Patients are their own: no identity family is shared with RSNA PE or the cervical spine
  release (different institutions' de-identified ids).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..spec import DatasetSpec, grade_column
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table
from ..volumes.series_files import file_ranks
from .rsna_pe import label_cells, slice_order
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
BINARY = ("bowel", "extravasation")
ORGANS = ("kidney", "liver", "spleen")
LABEL_COLUMNS = (*(f"{o}_{s}" for o in BINARY for s in ("healthy", "injury")),
                 *(f"{o}_{s}" for o in ORGANS for s in ("healthy", "low", "high")), "any_injury")
COLUMNS = ("patient_id", *LABEL_COLUMNS)
SERIES_FILE, IMAGE_LABEL_FILE = "train_series_meta.csv", "image_level_labels.csv"
#: the patient labels: the 2024 re-release's corrected table first, else the original
PATIENT_FILES = ("train_2024.csv", "train.csv")
SERIES_COLUMNS = ("patient_id", "series_id", "aortic_hu", "incomplete_organ")
IMAGE_LABEL_COLUMNS = ("patient_id", "series_id", "instance_number", "injury_name")
#: image_level_labels.csv injury_name -> the slice label's column
INJURY_NAMES = {"Bowel": 0, "Active_Extravasation": 1}
IMAGES, SEGMENTATIONS = "train_images", "segmentations"
STRUCTURES = ("liver", "spleen", "kidney_left", "kidney_right", "bowel")
#: the table's labels and their canonical findings
FINDINGS = {"bowel_injury": "bowel_injury", "extravasation_injury": "active_extravasation",
            "kidney_injury": "kidney_injury", "liver_injury": "liver_injury",
            "spleen_injury": "spleen_injury"}
LABELS = (*FINDINGS, "any_injury")
LABEL_MAP = {**{c: ((f, "exact"),) for c, f in FINDINGS.items()},
             # any of the five: other abdominal injuries were not assessed
             "any_injury": (("abdominal_injury", "narrower"),)}
GRADED = tuple(FINDINGS[f"{o}_injury"] for o in ORGANS)
#: healthy / low / high -> the grade on radharmony.spec.GRADE_LEVELS
GRADES = (0.0, 2.0, 4.0)
EXTRA_COLS = (*map(grade_column, GRADED), "series_id", "aortic_hu", "incomplete_organ",
              "injury_slices", "has_mask", "split", "split_raw")
#: injury_slices: per image-level label [instance_number, injury_name, row of its table]
COLUMN_TYPES = {**dict.fromkeys(map(grade_column, GRADED), "float32"), "aortic_hu": "float64",
                "incomplete_organ": "Int64", "injury_slices": "json", "has_mask": "bool"}
ACCESS = ("Kaggle rsna-2023-abdominal-trauma-detection (competition rules: non-commercial "
          "research); cite Rudie et al., 'The RSNA Abdominal Traumatic Injury CT (RATIC) "
          "Dataset', Radiology: AI 2024")
EXPECTED = {"images": 4_711, "patients": 3_147}

SPEC = DatasetSpec(
    key="rsna_abdominal_trauma", title="RSNA 2023 Abdominal Trauma",
    metadata_files=(SERIES_FILE,), label_cols=LABELS, label_map=LABEL_MAP,
    extra_cols=EXTRA_COLS, outputs=frozenset({"cls", "grade", "mask", "slice_labels"}), grades=GRADED,
    row_unit="volume", id_col="series_id", column_types=COLUMN_TYPES, access=ACCESS,
    expected=EXPECTED)


# -- pure helpers ---------------------------------------------------------------------------------
def patient_labels(table: pd.DataFrame, *, source: str) -> pd.DataFrame:
    """``train.csv`` -> one row per patient (index ``patient_id``): the five injuries, any
    injury and the three organs' grades; one-hot groups that do not sum to 1 are refused."""
    cells = label_cells(table[list(LABEL_COLUMNS)], source=source)
    col = {c: cells[:, j] for j, c in enumerate(LABEL_COLUMNS)}
    out = {}
    for organ in BINARY:
        check_cells(pd.Series(col[f"{organ}_healthy"] + col[f"{organ}_injury"] == 1),
                    table[f"{organ}_injury"], source=source,
                    what=f"{organ}_healthy and {organ}_injury are not one-hot",
                    expected="exactly one of them 1")
        out[f"{organ}_injury"] = col[f"{organ}_injury"]
    for organ in ORGANS:
        group = np.stack([col[f"{organ}_{s}"] for s in ("healthy", "low", "high")], axis=1)
        check_cells(pd.Series(group.sum(axis=1) == 1), table[f"{organ}_healthy"],
                    source=source, what=f"{organ}_healthy/_low/_high are not one-hot",
                    expected="exactly one of the three 1")
        out[f"{organ}_injury"] = 1.0 - col[f"{organ}_healthy"]
        out[grade_column(FINDINGS[f"{organ}_injury"])] = \
            np.asarray(GRADES, np.float32)[group.argmax(axis=1)]
    out["any_injury"] = col["any_injury"]
    anything = np.max([out[f"{o}_injury"] for o in (*BINARY, *ORGANS)], axis=0)
    if (anything != out["any_injury"]).any():
        warnings.warn(f"{source}: {int((anything != out['any_injury']).sum())} patients' "
                      "any_injury differs from their five injuries (kept as labelled)",
                      UserWarning, stacklevel=3)
    ids = table["patient_id"]
    check_cells(~ids.duplicated(), ids, source=source, what="a patient is listed twice",
                expected="one row per patient_id")
    return pd.DataFrame(out, index=pd.Index(ids, name="patient_id"))


def series_injuries(labels: pd.DataFrame | None, series: pd.Series, *, source: str
                    ) -> list[list]:
    """Each series' image-level labels ``[instance_number, injury_name, row]`` in the table's
    order; a row of a series not in ``series`` is counted in one warning and dropped."""
    out: dict[str, list] = {s: [] for s in series}
    if labels is None:
        return [out[s] for s in series]
    number = pd.to_numeric(labels["instance_number"], errors="coerce")
    check_cells(number.notna() & (number % 1 == 0), labels["instance_number"], source=source,
                what="instance_number is not a whole number", expected="a file number")
    check_cells(labels["injury_name"].isin(list(INJURY_NAMES)), labels["injury_name"],
                source=source, what="injury_name is unknown",
                expected=" or ".join(INJURY_NAMES))
    unknown = []
    for row, (s, n, name) in enumerate(zip(labels["series_id"], number, labels["injury_name"])):
        target = out.get(s)
        if target is None:
            unknown.append(row)
        else:
            target.append([int(n), name, row])
    if unknown:
        warnings.warn(f"{source}: {len(unknown)} image-level labels name a series not in "
                      f"{SERIES_FILE} (rows {', '.join(map(str, unknown[:5]))}): dropped",
                      UserWarning, stacklevel=3)
    return [out[s] for s in series]


# -- harmonizer -----------------------------------------------------------------------------------
class RSNAAbdominalTraumaHarmonizer(BaseHarmonizer):
    """RSNA 2023 abdominal trauma train: one row per series of ``train_series_meta.csv``."""
    spec = SPEC

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return f"the RSNA abdominal trauma series table {SERIES_FILE}"

    def inputs(self, path: Path) -> Inputs:
        """The series table, the patient labels (:data:`PATIENT_FILES`, the first present)
        and the image-level labels beside it, and the segmentation folder's listing."""
        looked = {"patients": [path.parent / n for n in PATIENT_FILES],
                  "images": [path.parent / IMAGE_LABEL_FILE]}
        seg = path.parent / SEGMENTATIONS
        return Inputs(path, {r: next((p for p in ps if p.is_file()), None)
                             for r, ps in looked.items()},
                      {"segmentations": (seg if seg.is_dir() else None, (".nii",))},
                      looked=looked)

    def read(self, inputs: Inputs) -> dict:
        text = {"dtype": {"patient_id": str, "series_id": str}, "keep_default_na": False,
                "na_values": [""]}
        raw = {"series": read_table(inputs.metadata, description=self.metadata_description,
                                    columns=SERIES_COLUMNS, usecols=list(SERIES_COLUMNS),
                                    **text)}
        for role, columns in (("patients", COLUMNS), ("images", IMAGE_LABEL_COLUMNS)):
            path = inputs.file(role)
            if path is None:
                warnings.warn(f"No {role} table beside {inputs.metadata}: the table has no "
                              f"{'labels' if role == 'patients' else 'slice labels'}",
                              UserWarning, stacklevel=3)
            raw[role] = None if path is None else read_table(
                path, description=f"the RSNA abdominal trauma table {path.name}",
                columns=columns, usecols=list(columns), **text)
        raw["masks"] = sorted(inputs.by_name("segmentations", suffix=".nii") or ())
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = SERIES_FILE) -> pd.DataFrame:
        m = raw["series"]
        for col in ("patient_id", "series_id"):
            check_cells(m[col].notna(), m[col], source=source, what=f"{col} is empty",
                        expected="a number")
        check_cells(~m["series_id"].duplicated(), m["series_id"], source=source,
                    what="a series is listed twice", expected="one row per series_id")
        aortic = pd.to_numeric(m["aortic_hu"], errors="coerce")
        check_cells(aortic.notna() | m["aortic_hu"].isna(), m["aortic_hu"], source=source,
                    what="aortic_hu is not a number", expected="Hounsfield units")
        incomplete = pd.to_numeric(m["incomplete_organ"], errors="coerce")
        check_cells(incomplete.isin([0, 1]), m["incomplete_organ"], source=source,
                    what="incomplete_organ is not 0 or 1", expected="0 or 1")
        df = pd.DataFrame({"patient_id": m["patient_id"], "study_id": m["patient_id"],
                           "image_path": IMAGES + "/" + m["patient_id"] + "/" + m["series_id"],
                           "view_position": None, "report": None}).reset_index(drop=True)
        patients = raw.get("patients")
        labels = None if patients is None else patient_labels(patients,
                                                              source="the patient labels")
        columns = (*LABELS, *map(grade_column, GRADED))
        if labels is None:
            for col in columns:
                df[col] = np.nan
        else:
            missing = ~m["patient_id"].isin(labels.index)
            if missing.any():
                warnings.warn(f"{source}: {int(missing.sum())} series of patients not in "
                              "train.csv: their labels are NaN", UserWarning, stacklevel=3)
            joined = labels.reindex(m["patient_id"])
            for col in columns:
                df[col] = joined[col].to_numpy(np.float32 if col.endswith("_grade") else
                                               np.float64)
        df["series_id"] = m["series_id"].to_numpy()
        df["aortic_hu"] = aortic.to_numpy(np.float64)
        df["incomplete_organ"] = pd.array(incomplete.to_numpy(), dtype="Int64")
        df["injury_slices"] = pd.Series(series_injuries(raw.get("images"), m["series_id"],
                                                        source=IMAGE_LABEL_FILE), dtype=object)
        df["has_mask"] = m["series_id"].isin(set(raw.get("masks") or ())).to_numpy()
        df["split"], df["split_raw"] = "train", "train"
        return df


def slice_injuries(ordered_ranks, injuries, depth: int, *, injured) -> np.ndarray:
    """float32 ``(depth, 2)`` (bowel, extravasation) along D: 1 on the ranks listed (their
    injury), 0 elsewhere; a series with no listed slice is 0 when its patient has neither
    injury (``injured`` False), else NaN (not annotated)."""
    out = np.zeros((depth, len(INJURY_NAMES)), np.float32)
    if not len(injuries) and injured:
        out[:] = np.nan
    for rank, name in zip(ordered_ranks, injuries):
        out[rank, INJURY_NAMES[name]] = 1.0
    return out


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.series_masks import SeriesLabelMaps
    from ..data.volumes import VolumeDataset

    class RSNAAbdominalTraumaDataset(SeriesLabelMaps, VolumeDataset):
        """RSNA 2023 abdominal trauma series (``base_image_dir`` the competition root).
        :meth:`slice_labels` gives the image-level labels in world z order
        (``output_slice_labels=True``: in each sample, along its slice axis);
        ``output_grade=True`` the organ grades; ``output_mask=True`` the organ label map
        (label k + 1 = ``STRUCTURES[k]``) on the sample's grid, for the series with
        ``has_mask``."""
        harmonizer_class = RSNAAbdominalTraumaHarmonizer
        ct = True
        structures = STRUCTURES

        def slice_labels(self, index: int, volume=None) -> np.ndarray:
            """float32 ``(D, 2)``: bowel injury and active extravasation on each slice of row
            ``index``'s canonical D axis (world z order, from the feet), from the headers
            alone (``volume`` unused); ``output_slice_labels=True`` puts them in samples."""
            names, raw, canonical, shape = self.geometry(index)
            ordered = slice_order(names, raw[:3, 3], canonical, shape[0])
            row = self.harmonized_df.iloc[index]
            listed = row["injury_slices"]
            kept, ranks = file_ranks(ordered, [e[0] for e in listed], [e[2] for e in listed],
                                     folder=self.image_file(index), what="slice labels",
                                     where=f"{self.rows.ids[index]} ({IMAGE_LABEL_FILE})")
            injured = not (row["bowel_injury"] == 0 and row["extravasation_injury"] == 0)
            return slice_injuries(ranks, [listed[i][1] for i in kept], shape[0],
                                  injured=injured)

        def source_mask(self, index: int) -> np.ndarray:
            """Row ``index``'s organ label map on the grid of its sample's ``img``."""
            return self.label_map(index, self.mask_path(index))

    return (RSNAAbdominalTraumaDataset,)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RSNAAbdominalTraumaHarmonizer", "RSNAAbdominalTraumaDataset"]
