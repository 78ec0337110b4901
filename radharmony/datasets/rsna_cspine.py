"""RSNA 2022 Cervical Spine Fracture Detection (RSNA, ASNR and ASSR): 2,019 cervical spine
CTs with a fracture label per vertebra C1-C7, fracture boxes on the slices of 235 studies and
vertebra segmentations of 87, read as the Kaggle competition ships them (``base_image_dir``
is the competition's root)::

    train.csv                    StudyInstanceUID, patient_overall, C1 .. C7 (0/1)
    train_bounding_boxes.csv     StudyInstanceUID, x, y, width, height, slice_number
    train_images/<StudyInstanceUID>/<slice_number>.dcm
    segmentations/<StudyInstanceUID>.nii    1-7 = C1-C7, 8-19 = T1-T12, 0 background

Source of truth: ``train.csv``; one table row per study (a volume, ``image_path`` the study
folder). Quirks:

- **A box's ``slice_number`` names the file, not the slice's rank.** Files are named by their
  instance number and some studies are stored in descending z (``1.dcm`` at the head). A box
  is placed through the scanned headers: file ``<slice_number>.dcm``'s place in the series'
  geometric sort, then the canonical order (:meth:`RSNACSpineDataset.annotations`). Each row
  of the box table is one slice's box: a box one voxel deep, labelled
  ``cervical_spine_fracture``. ``x``, ``y`` are the box's top-left corner in pixel-edge
  coordinates (pixel ``i`` covers ``i .. i + 1``), ``width`` / ``height`` its size in pixels.
- **A box on a slice number with no file** is counted, named in a warning (the file and the
  box table's row) and dropped: never drawn on another slice.
- **The segmentation NIfTI is stored in another axis order than the DICOM series**; it is
  matched through the geometry of both (:func:`radharmony.volumes.masks.read_label_map`): a
  mask whose grid (shape or affine beyond 1e-3 mm) differs from its study's series is
  refused, naming both; ``check_masks()`` counts such masks from the headers alone and names
  each (file, row) in one warning, so they can be filtered out first. ``has_mask`` says which
  studies have one.
- **Labels.** ``patient_overall`` is a fracture anywhere in C1-C7 (canonical
  ``cervical_spine_fracture``, exact); each vertebra's label is a fracture there, narrower.
- **Patient = study.** The release has no patient id.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table
from ..volumes.series_files import box_voxels, file_ranks, series_geometry
from .rsna_pe import label_cells
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
STUDY = "StudyInstanceUID"
VERTEBRAE = tuple(f"C{k}" for k in range(1, 8))
LABELS = ("patient_overall", *VERTEBRAE)
COLUMNS = (STUDY, *LABELS)
BOX_FILE = "train_bounding_boxes.csv"
BOX_COLUMNS = (STUDY, "x", "y", "width", "height", "slice_number")
IMAGES, SEGMENTATIONS = "train_images", "segmentations"
#: the segmentation's labels: 1-7 = C1-C7, 8-19 = T1-T12 (index + 1)
STRUCTURES = (*VERTEBRAE, *(f"T{k}" for k in range(1, 13)))
FINDING = "cervical_spine_fracture"
#: label -> canonical findings (radharmony.vocabulary)
LABEL_MAP = {"patient_overall": ((FINDING, "exact"),),
             **{v: ((FINDING, "narrower"),) for v in VERTEBRAE}}
EXTRA_COLS = ("fracture_boxes", "num_boxes", "has_mask", "split", "split_raw")
#: fracture_boxes: per box [x, y, width, height, slice_number, row of the box table]
COLUMN_TYPES = {"fracture_boxes": "json", "num_boxes": "int64", "has_mask": "bool"}
ACCESS = ("Kaggle rsna-2022-cervical-spine-fracture-detection (competition rules: "
          "non-commercial research); cite Lin et al., 'The RSNA Cervical Spine Fracture CT "
          "Dataset', Radiology: AI 2023")
EXPECTED = {"images": 2_019, "studies": 2_019, "patients": 2_019}

SPEC = DatasetSpec(
    key="rsna_cspine", title="RSNA 2022 Cervical Spine Fracture", metadata_files=("train.csv",),
    label_cols=LABELS, label_map=LABEL_MAP, extra_cols=EXTRA_COLS,
    outputs=frozenset({"cls", "mask", "bbox3d"}), row_unit="volume", id_col="study_id",
    column_types=COLUMN_TYPES, access=ACCESS, expected=EXPECTED)


# -- pure helpers ---------------------------------------------------------------------------------
def study_boxes(boxes: pd.DataFrame | None, studies: pd.Series, *, source: str) -> list[list]:
    """Each study's boxes (``[x, y, width, height, slice_number, row]``, in the box table's
    order); the rows of a study not in ``studies`` are counted in one warning and dropped."""
    out: dict[str, list] = {s: [] for s in studies}
    if boxes is None or boxes.empty:
        return [out[s] for s in studies]
    values = boxes[list(BOX_COLUMNS[1:])].apply(pd.to_numeric, errors="coerce")
    for col in BOX_COLUMNS[1:]:
        check_cells(values[col].notna() & (values[col] >= 0), boxes[col], source=source,
                    what=f"{col} is not a number >= 0", expected="pixels (x, y, width, "
                    "height) and a file number (slice_number)")
    check_cells(values["slice_number"] % 1 == 0, boxes["slice_number"], source=source,
                what="slice_number is not a whole number", expected="a file number, e.g. 133")
    unknown = []
    for row, (study, *cells) in enumerate(zip(boxes[STUDY], *(values[c] for c in
                                                               BOX_COLUMNS[1:]))):
        target = out.get(study)
        if target is None:
            unknown.append(row)
            continue
        target.append([*(float(v) for v in cells[:4]), int(cells[4]), row])
    if unknown:
        warnings.warn(f"{source}: {len(unknown)} boxes name a study not in train.csv (rows "
                      f"{', '.join(map(str, unknown[:5]))}{' ...' if len(unknown) > 5 else ''})"
                      ": dropped", UserWarning, stacklevel=3)
    return [out[s] for s in studies]


# -- harmonizer -----------------------------------------------------------------------------------
class RSNACSpineHarmonizer(BaseHarmonizer):
    """RSNA 2022 cervical spine train: one row per study of ``train.csv``."""
    spec = SPEC

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return "the RSNA cervical spine table train.csv"

    def inputs(self, path: Path) -> Inputs:
        """``train.csv``, the box table beside it and the segmentation folder's listing."""
        boxes = path.parent / BOX_FILE
        seg = path.parent / SEGMENTATIONS
        return Inputs(path, {"boxes": boxes if boxes.is_file() else None},
                      {"segmentations": (seg if seg.is_dir() else None, (".nii",))},
                      looked={"boxes": [boxes]})

    def read(self, inputs: Inputs) -> dict:
        text = {"dtype": {STUDY: str}, "keep_default_na": False, "na_values": [""]}
        path = inputs.file("boxes")
        if path is None:
            warnings.warn(f"No {BOX_FILE} beside {inputs.metadata}: the table has no boxes",
                          UserWarning, stacklevel=3)
        return {"studies": read_table(inputs.metadata, description=self.metadata_description,
                                      columns=COLUMNS, usecols=list(COLUMNS), **text),
                "boxes": None if path is None else read_table(
                    path, description=f"the RSNA cervical spine box table {BOX_FILE}",
                    columns=BOX_COLUMNS, usecols=list(BOX_COLUMNS), **text),
                "masks": sorted(inputs.by_name("segmentations", suffix=".nii") or ())}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "train.csv") -> pd.DataFrame:
        m = raw["studies"]
        study = m[STUDY]
        check_cells(study.notna(), study, source=source, what=f"{STUDY} is empty",
                    expected="a DICOM UID")
        check_cells(~study.duplicated(), study, source=source, what="a study is listed twice",
                    expected="one row per StudyInstanceUID")
        labels = label_cells(m[list(LABELS)], source=source)
        boxes = study_boxes(raw.get("boxes"), study, source=BOX_FILE)
        masks = set(raw.get("masks") or ())
        df = pd.DataFrame({"patient_id": study, "study_id": study,
                           "image_path": IMAGES + "/" + study, "view_position": None,
                           "report": None,
                           **{c: labels[:, j] for j, c in enumerate(LABELS)},
                           "fracture_boxes": pd.Series(boxes, dtype=object, index=m.index),
                           "num_boxes": np.array([len(b) for b in boxes], np.int64),
                           "has_mask": study.isin(masks).to_numpy(),
                           "split": "train", "split_raw": "train"})
        return df.reset_index(drop=True)


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.series_masks import SeriesLabelMaps
    from ..data.volumes import VolumeDataset

    class RSNACSpineDataset(SeriesLabelMaps, VolumeDataset):
        """RSNA 2022 cervical spine studies (``base_image_dir`` the competition root).
        :meth:`annotations` gives the fracture boxes in the canonical volume's voxels;
        ``output_mask=True`` adds ``mask`` ``(1, D, H, W)``: the vertebra label map (label
        k + 1 = ``STRUCTURES[k]``: C1-C7, T1-T12) on the sample's grid, for the studies with
        ``has_mask``."""
        harmonizer_class = RSNACSpineHarmonizer
        ct = True
        structures = STRUCTURES

        def annotations(self, index: int) -> dict:
            """Row ``index``'s fracture boxes, ``{"boxes": (N, 6), "box_labels": [...]}`` in
            the source canonical voxels (empty: no keys)."""
            boxes = self.harmonized_df["fracture_boxes"].iat[index]
            if not boxes:
                return {}
            names, raw, canonical, _ = self.geometry(index)
            kept, ranks = file_ranks(names, [b[4] for b in boxes], [b[5] for b in boxes],
                                     folder=self.image_file(index),
                                     where=f"{self.rows.ids[index]} ({BOX_FILE})")
            if not kept:
                return {}
            chosen = np.array([boxes[i][:4] for i in kept], np.float64)
            return {"boxes": box_voxels(chosen, ranks, raw, canonical),
                    "box_labels": [FINDING] * len(kept)}

        def source_mask(self, index: int) -> np.ndarray:
            """Row ``index``'s vertebra label map on the grid of its sample's ``img``."""
            return self.label_map(index, self.mask_path(index))

    return (RSNACSpineDataset,)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RSNACSpineHarmonizer", "RSNACSpineDataset"]
