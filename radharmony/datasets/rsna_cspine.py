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


def box_voxels(boxes, ranks, raw_affine, canonical_affine) -> np.ndarray:
    """Slice boxes ``[x, y, width, height]`` (pixel-edge coordinates of the slice's rows and
    columns) on the slices of rank ``ranks`` in the series' geometric sort -> float64 ``(N, 6)``
    ``(x0, y0, z0, x1, y1, z1)`` in the canonical volume's voxels (x along W, y along H, z
    along D; voxel k's centre at k, a box one slice deep). ``raw_affine``: the LPS affine of
    the sorted ``(slice, row, column)`` array; ``canonical_affine``: the canonical volume's."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    ranks = np.asarray(ranks, np.float64)
    to_canonical = np.linalg.inv(np.asarray(canonical_affine, np.float64)) @ \
        np.asarray(raw_affine, np.float64)
    x, y, w, h = boxes.T
    corners = []
    for k, r, c in ((ranks - 0.5, y - 0.5, x - 0.5), (ranks + 0.5, y + h - 0.5, x + w - 0.5)):
        raw = np.stack([k, r, c, np.ones_like(k)])
        corners.append((to_canonical @ raw)[:3].T)
    low, high = np.minimum(*corners), np.maximum(*corners)
    out = np.concatenate([low[:, ::-1], high[:, ::-1]], axis=1)  # (d, h, w) -> (x, y, z)
    return np.round(out, 9) + 0.0


def file_ranks(names, numbers, rows, *, where: str, folder, what: str = "boxes"
               ) -> tuple[list[int], list[int]]:
    """The rank of each file ``<number>.dcm`` among ``names`` (the series' file stems in its
    geometric sort) and the positions of the entries kept; a number with no file is counted
    and named in one warning (its file and the table's ``rows``), its entry dropped."""
    rank = {name: k for k, name in enumerate(names)}
    kept, ranks, missing = [], [], []
    for i, (number, row) in enumerate(zip(numbers, rows)):
        k = rank.get(str(int(number)))
        if k is None:
            missing.append(f"row {int(row)}: {Path(folder) / f'{int(number)}.dcm'}")
        else:
            kept.append(i)
            ranks.append(k)
    if missing:
        warnings.warn(f"{where}: {len(missing)} {what} on a slice with no file, dropped "
                      f"({'; '.join(missing[:5])}{' ...' if len(missing) > 5 else ''})",
                      UserWarning, stacklevel=3)
    return kept, ranks


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


def series_geometry(folder) -> tuple[list[str], np.ndarray, np.ndarray, tuple[int, int, int]]:
    """A DICOM series' geometry from its headers alone: the file stems in the reader's
    geometric sort, the LPS affine of the sorted ``(slice, row, column)`` array, the canonical
    volume's LPS affine and shape (what :func:`radharmony.volumes.read_volume` returns; its
    series choice and checks, so a folder it refuses is refused here too)."""
    from ..volumes.dicom import choose, geometry
    from ..volumes.dicom_headers import find_files, scan
    from ..volumes.geometry import to_canonical

    headers, _ = scan(find_files(Path(folder)))
    _, headers = choose(headers, str(folder), None)
    slices, raw, _ = geometry(headers, str(folder))
    shape = (len(slices), int(slices[0].get("Rows")), int(slices[0].get("Columns")))
    array, canonical = to_canonical(np.broadcast_to(np.zeros((), np.uint8), shape), raw)
    return [h.path.name.removesuffix(".dcm") for h in slices], raw, canonical, array.shape


class SeriesLabelMaps:
    """A DICOM-series volume dataset mixin (before the dataset base): each row's series
    geometry scanned from its headers once (:meth:`geometry`), and a NIfTI label map read
    onto the series' canonical grid, matched to it through geometry (:meth:`label_map`); the
    sample's ``mask`` carries it onto the returned grid
    (:class:`~radharmony.volumes.placement.VolumeGrid`)."""

    def geometry(self, index: int):
        """Row ``index``'s :func:`series_geometry`, scanned once."""
        cache = self.__dict__.setdefault("_geometries", {})
        if index not in cache:
            cache[index] = series_geometry(self.image_file(index))
        return cache[index]

    def mask_path(self, index: int) -> Path:
        """Row ``index``'s segmentation file (whether or not it exists)."""
        return self.base_image_dir / SEGMENTATIONS / \
            f"{self.harmonized_df[self.spec.id_col].iat[index]}.nii"

    def check_masks(self) -> list[int]:
        """The rows with ``has_mask`` whose segmentation is off its series' grid (shape, or
        affine beyond 1e-3 mm), from the headers alone; counted and named (file, row) in one
        warning, so they can be filtered out before training (reading one is refused)."""
        from ..volumes.masks import MaskGeometryError, check_grid, header_affine
        from ..volumes.geometry import to_canonical

        bad = []
        for index in np.flatnonzero(self.harmonized_df["has_mask"].to_numpy(bool)).tolist():
            path = self.mask_path(index)
            affine, shape = header_affine(path)
            array, canonical = to_canonical(np.broadcast_to(np.zeros((), np.uint8), shape),
                                            affine)
            _, _, image_affine, image_shape = self.geometry(index)
            try:
                check_grid(path, array.shape, canonical, self.image_file(index), image_shape,
                           image_affine)
            except MaskGeometryError as exc:
                bad.append((index, f"row {index}: {path} ({exc.found})"))
        if bad:
            warnings.warn(f"{self.spec.key}: {len(bad)} segmentations off their series' grid "
                          f"({'; '.join(b for _, b in bad[:5])}{' ...' if len(bad) > 5 else ''}"
                          ")", UserWarning, stacklevel=2)
        return [i for i, _ in bad]

    def label_map(self, index: int, path: Path) -> np.ndarray:
        """The label map ``path`` of row ``index`` on its series' canonical grid; refused
        when the row has none (``has_mask``) or it lies off the series' grid."""
        from ..errors import ImageReadError
        from ..volumes.masks import read_label_map

        if not self.harmonized_df["has_mask"].iat[index] or not path.is_file():
            raise ImageReadError(f"{self.rows.ids[index]} has no segmentation {path}",
                                 expected=f"{SEGMENTATIONS}/<id>.nii for the rows with "
                                 "has_mask", found="no such file",
                                 fix="filter to the rows with has_mask")
        _, _, affine, shape = self.geometry(index)
        return read_label_map(path, self.image_file(index), shape, affine)


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
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
