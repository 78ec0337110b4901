"""CheXmask (PhysioNet ``chexmask-cxr-segmentation-data`` 1.0.0): lung and heart masks and 120
contour landmarks for images of other datasets, as one overlay key per base dataset.

Source of truth: ``Annotations/OriginalResolution/<source>.csv.gz``, one row per image, columns
``<id column>, Dice RCA (Mean), Dice RCA (Max), Landmarks, Left Lung, Right Lung, Heart,
Height, Width`` -- the id column's name depends on the source (:data:`SOURCES`) and the
Padchest file swaps the two Dice columns, so every column is taken by name. Masks are run-length
codes ``start length ...`` with **absolute, 1-indexed starts over the row-major (C order)
flattening** of ``Height x Width`` -- not SIIM's relative column-major code. ``Right Lung`` is
the patient's right (the image's left). ``Landmarks`` is a numpy-printed or comma-separated list
of 120 ``x, y`` points (``[0:44]`` right lung, ``[44:94]`` left lung, ``[94:120]`` heart);
:func:`parse_landmarks` reads both forms.

Overlay: ``chexmask_<base>`` derives ``patient_id``, ``study_id`` and ``image_path`` exactly as
the base harmonizer does for the same image, so its ``sample_id`` native part equals the base's
and, with the same ``base_image_dir``, it reads and caches the same files:

* ``chexmask_nih`` (``Image Index``) -> ``nih_cxr14`` (``base_image_dir`` NIH ``images/``);
* ``chexmask_chexpert`` (``Path``, without the ``CheXpert-v1.0-small/`` prefix) -> ``chexpert``;
* ``chexmask_vindr`` (``image_id``) -> ``vindr_cxr`` (``<image_id>.dicom`` under ``train/``;
  the file also lists VinDr test ids, whose files live elsewhere -- use ``on_missing="drop"``).

* ``chexmask_mimic`` (``dicom_id``) -> ``mimic_cxr_jpg``; a dicom id alone has no subject or
  study, so MIMIC-CXR-JPG's ``mimic-cxr-2.0.0-metadata.csv.gz`` (found near ``base_image_dir``,
  the MIMIC-CXR-JPG root) is read as a side input and joined;
* ``chexmask_padchest`` (``ImageID``) -> ``padchest``; the image's folder comes from PadChest's
  own table (``ImageDir``, ``StudyID``, ``PatientID``; found near ``base_image_dir``).

Ids missing from the base table are dropped with a warning. The two file names
(``MIMIC-CXR-JPG.csv.gz``, ``Padchest.csv.gz``) follow the release's naming pattern and are
unverified; ``csv_path=`` takes any name. ``output_mask=True`` gives one label mask:
0 background, 1 right lung, 2 left lung, 3 heart (drawn last, over the lungs). CheXmask's own
README asks for ``Dice RCA (Mean) >= 0.7``: filter on ``dice_rca_mean``. A row with empty
``Height``/``Width`` (seen in the authors' physician subsets) is decoded at 1024 x 1024, the
preprocessed size.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import MetadataError, MetadataNotFoundError
from ..annotations.masks import rle_decode
from ..spec import DatasetSpec, Identity
from ..table.locate import find_optional
from ..table.read_csv import check_cells, numeric_columns, read_table, require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COMMON = ("Dice RCA (Mean)", "Dice RCA (Max)", "Landmarks", "Left Lung", "Right Lung", "Heart",
          "Height", "Width")
MASKS = ("Right Lung", "Left Lung", "Heart")  # mask values 1, 2, 3
FALLBACK_SIZE = 1024
#: base key -> (CheXmask file, its id column)
SOURCES = {"nih": ("ChestX-Ray8.csv.gz", "Image Index"),
           "chexpert": ("CheXpert.csv.gz", "Path"),
           "vindr": ("VinDr-CXR.csv.gz", "image_id"),
           "mimic": ("MIMIC-CXR-JPG.csv.gz", "dicom_id"),
           "padchest": ("Padchest.csv.gz", "ImageID")}
#: base key -> (its metadata table's names, the columns read from it)
BASE_TABLES = {"mimic": (("mimic-cxr-2.0.0-metadata.csv.gz", "mimic-cxr-2.0.0-metadata.csv"),
                         ("dicom_id", "subject_id", "study_id")),
               "padchest": (("PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz",
                             "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv"),
                            ("ImageID", "ImageDir", "StudyID", "PatientID"))}
LABEL_MAP: dict = {}  # masks only, no label columns
ACCESS = ("PhysioNet chexmask-cxr-segmentation-data 1.0.0 (open, CC BY 4.0); the images are the "
          "base dataset's, under its own terms")
EXTRA_COLS = ("dice_rca_mean", "dice_rca_max", "height", "width", "right_lung", "left_lung",
              "heart", "landmarks")
#: why a source's spec holds no image count of its own
PER_SOURCE = "CheXmask publishes 657,566 masks over its five sources and no count per source"
NIH_SPEC = DatasetSpec(
    identity=Identity("nih_cxr14"),
    column_types={"dice_rca_mean": "float64", "dice_rca_max": "float64", "height": "Int64", "width": "Int64"},
    key="chexmask_nih", title="CheXmask on NIH ChestX-ray14",
    metadata_files=(SOURCES["nih"][0], "Annotations/OriginalResolution/" + SOURCES["nih"][0]),
    extra_cols=EXTRA_COLS, outputs=frozenset({"mask"}), access=ACCESS,
    expected={"masks_all_sources": 657_566}, zero_pad={"patient_id": 8},
    expected_note=PER_SOURCE)
CHEXPERT_SPEC = replace(
    NIH_SPEC, identity=Identity("chexpert"),
    key="chexmask_chexpert", title="CheXmask on CheXpert",
    metadata_files=(SOURCES["chexpert"][0],
                    "Annotations/OriginalResolution/" + SOURCES["chexpert"][0]),
    expected={"masks_all_sources": 657_566}, zero_pad={}, expected_note=PER_SOURCE)
VINDR_SPEC = replace(
    NIH_SPEC, identity=Identity("vindr_cxr"),
    key="chexmask_vindr", title="CheXmask on VinDr-CXR", id_col="study_id",
    metadata_files=(SOURCES["vindr"][0], "Annotations/OriginalResolution/" + SOURCES["vindr"][0]),
    expected={"images": 18_000, "masks_all_sources": 657_566}, zero_pad={}, expected_note="")
MIMIC_SPEC = replace(
    NIH_SPEC, identity=Identity("mimic_cxr_jpg"),
    key="chexmask_mimic", title="CheXmask on MIMIC-CXR-JPG", id_col="dicom_id",
    extra_cols=("dicom_id", *EXTRA_COLS),
    metadata_files=(SOURCES["mimic"][0], "Annotations/OriginalResolution/" + SOURCES["mimic"][0]),
    expected={"masks_all_sources": 657_566}, zero_pad={}, expected_note=PER_SOURCE)
PADCHEST_SPEC = replace(
    NIH_SPEC, identity=Identity("padchest"),
    key="chexmask_padchest", title="CheXmask on PadChest",
    metadata_files=(SOURCES["padchest"][0],
                    "Annotations/OriginalResolution/" + SOURCES["padchest"][0]),
    expected={"masks_all_sources": 657_566}, zero_pad={}, expected_note=PER_SOURCE)


# -- pure helpers ---------------------------------------------------------------------------------
def decode_chexmask(rle, *, height: int, width: int, where: str = "CheXmask RLE") -> np.ndarray:
    """A CheXmask code (absolute, 1-indexed starts, row-major) -> uint8 0/1 (height, width)."""
    if rle is None or isinstance(rle, float) or not str(rle).strip():
        return np.zeros((height, width), np.uint8)
    try:
        nums = np.asarray(str(rle).split(), dtype=np.int64)
    except ValueError:
        nums = np.array([-1])
    if nums.size % 2 or (nums[0::2] < 1).any():
        raise MetadataError(f"{where}: malformed CheXmask run-length code",
                            expected="pairs 'start length' with 1-indexed starts",
                            found=repr(str(rle)[:60]), fix="re-download the CheXmask file")
    nums[0::2] -= 1
    return rle_decode(" ".join(map(str, nums)), height=height, width=width, order="C",
                      where=where)


def parse_landmarks(text) -> np.ndarray:
    """``Landmarks`` text (numpy-printed ``[[x y] ...]`` or comma-separated) -> (n, 2) float."""
    nums = re.findall(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", str(text or ""))
    if len(nums) % 2:
        raise MetadataError("CheXmask Landmarks: odd number of coordinates",
                            expected="x, y pairs", found=repr(str(text)[:60]),
                            fix="re-download the CheXmask file")
    return np.asarray(nums, np.float64).reshape(-1, 2)


def base_ids(base: str, ids: pd.Series, *, source: str, table: pd.DataFrame | None = None
             ) -> pd.DataFrame:
    """The base dataset's ``patient_id``, ``study_id``, ``image_path`` for CheXmask ids
    (MIMIC-CXR-JPG and PadChest join ``table``, the base's metadata; unmatched ids give
    missing values)."""
    if base in BASE_TABLES:
        cols = BASE_TABLES[base][1]
        if table is None:
            raise MetadataNotFoundError(f"the {base} metadata table that places CheXmask's ids",
                                        [Path(n) for n in BASE_TABLES[base][0]],
                                        fix="put it beside or above base_image_dir (the "
                                            "base dataset's image root)")
        require_columns(table, cols, source=source, description=f"the {base} metadata table")
        t = table.drop_duplicates(cols[0]).set_index(cols[0]).reindex(ids.to_numpy())
        if base == "mimic":
            subject, study = t["subject_id"].to_numpy(object), t["study_id"].to_numpy(object)
            path = [None if not isinstance(a, str) else
                    f"files/p{a[:2]}/p{a}/s{b}/{d}.jpg" for a, b, d in zip(subject, study, ids)]
            return pd.DataFrame({"patient_id": subject, "study_id": study, "image_path": path})
        folder = t["ImageDir"].to_numpy(object)
        path = [None if not isinstance(f, str) else f"{f}/{i}" for f, i in zip(folder, ids)]
        return pd.DataFrame({"patient_id": t["PatientID"].to_numpy(object),
                             "study_id": t["StudyID"].to_numpy(object), "image_path": path})
    if base == "nih":
        check_cells(ids.str.fullmatch(r"\d+_\d+\.png"), ids, source=source,
                    what="Image Index is not <patient>_<follow-up>.png", expected="00000001_000.png")
        stem = ids.str.slice(0, -4)
        return pd.DataFrame({"patient_id": stem.str.replace(r"_\d+$", "", regex=True),
                             "study_id": stem, "image_path": ids})
    if base == "chexpert":
        rel = ids.str.replace(r"^CheXpert-v1\.0(-small)?/", "", regex=True)
        check_cells(rel.str.fullmatch(r"(train|valid)/patient\d+/study\d+/[^/]+\.jpg"), ids,
                    source=source, what="Path is not <split>/patient/study/view.jpg",
                    expected="train/patient00001/study1/view1_frontal.jpg")
        study = rel.str.replace(r"^[^/]+/|/[^/]+$", "", regex=True)
        return pd.DataFrame({"patient_id": study.str.replace(r"/.*$", "", regex=True),
                             "study_id": study, "image_path": rel})
    return pd.DataFrame({"patient_id": ids, "study_id": ids, "image_path": ids + ".dicom"})


# -- harmonizers ----------------------------------------------------------------------------------
class CheXmaskNIHHarmonizer(BaseHarmonizer):
    """CheXmask lung and heart masks for NIH ChestX-ray14's 112,120 images."""

    spec = NIH_SPEC
    base = "nih"
    metadata_description = "the CheXmask table ChestX-Ray8.csv.gz"

    def inputs(self, path: Path) -> Inputs:
        """The CheXmask table and, for MIMIC-CXR-JPG and PadChest, the base dataset's metadata
        table near ``base_image_dir`` (else near the CheXmask table): the join that places
        each id."""
        if self.base not in BASE_TABLES:
            return Inputs(path)
        return Inputs(path, {"base_table": find_optional(BASE_TABLES[self.base][0],
                                                         self.base_image_dir, path.parent)})

    def read(self, inputs: Inputs):
        table = read_table(inputs.metadata, description=self.metadata_description,
                           columns=(SOURCES[self.base][1], *COMMON), dtype=str)
        if self.base not in BASE_TABLES:
            return table
        found = inputs.file("base_table")
        names, cols = BASE_TABLES[self.base]
        if found is None:
            raise MetadataNotFoundError(f"{names[0]} (to place CheXmask's {self.base} ids)",
                                        [Path(n) for n in names],
                                        fix="put it beside or above base_image_dir (the "
                                            "base dataset's image root)")
        return {"table": table, "base_table": read_table(
            found, description=found.name, columns=cols, usecols=list(cols), dtype=str)}

    @classmethod
    def harmonize_raw(cls, raw, *, source: str = "metadata") -> pd.DataFrame:
        id_col = SOURCES[cls.base][1]
        lookup = None
        if isinstance(raw, dict):
            raw, lookup = raw["table"], raw.get("base_table")
        require_columns(raw, (id_col, *COMMON), source=source, description="the CheXmask table")
        raw = raw.dropna(subset=[id_col])
        df = base_ids(cls.base, raw[id_col].str.strip(), source=source,
                      table=lookup).reset_index(drop=True)
        if cls.base in BASE_TABLES:
            known = df["image_path"].notna().to_numpy()
            if not known.all():
                warnings.warn(f"{source}: {int((~known).sum())} of {len(df)} CheXmask ids are "
                              f"not in the {cls.base} metadata table and are dropped",
                              stacklevel=2)
                df, raw = df[known].reset_index(drop=True), raw[known]
        df.insert(3, "view_position", None)
        df.insert(4, "report", None)
        num = numeric_columns(raw, ("Dice RCA (Mean)", "Dice RCA (Max)", "Height", "Width"),
                              source=source).reset_index(drop=True)
        df["dice_rca_mean"] = num["Dice RCA (Mean)"].to_numpy()
        df["dice_rca_max"] = num["Dice RCA (Max)"].to_numpy()
        df["height"] = num["Height"].astype("Int64")
        df["width"] = num["Width"].astype("Int64")
        for col in MASKS:
            df[col.lower().replace(" ", "_")] = raw[col].to_numpy(object)
        df["landmarks"] = raw["Landmarks"].to_numpy(object)
        if cls.base == "mimic":  # MIMIC-CXR-JPG's sample id is the dicom id
            df["dicom_id"] = raw[id_col].str.strip().to_numpy(object)
        return df


class CheXmaskCheXpertHarmonizer(CheXmaskNIHHarmonizer):
    """CheXmask masks for CheXpert (ids are ``Path`` without the release folder)."""

    spec = CHEXPERT_SPEC
    base = "chexpert"
    metadata_description = "the CheXmask table CheXpert.csv.gz"


class CheXmaskVinDrHarmonizer(CheXmaskNIHHarmonizer):
    """CheXmask masks for VinDr-CXR (train and test ids)."""

    spec = VINDR_SPEC
    base = "vindr"
    metadata_description = "the CheXmask table VinDr-CXR.csv.gz"


class CheXmaskMIMICHarmonizer(CheXmaskNIHHarmonizer):
    """CheXmask masks for MIMIC-CXR-JPG (``dicom_id`` joined to the MIMIC metadata table)."""

    spec = MIMIC_SPEC
    base = "mimic"
    metadata_description = "the CheXmask table MIMIC-CXR-JPG.csv.gz"


class CheXmaskPadChestHarmonizer(CheXmaskNIHHarmonizer):
    """CheXmask masks for PadChest (``ImageID`` joined to the PadChest table)."""

    spec = PADCHEST_SPEC
    base = "padchest"
    metadata_description = "the CheXmask table Padchest.csv.gz"


# -- dataset classes ------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class _CheXmaskDataset(BaseRadiologicalDataset):
        def source_mask(self, index: int) -> np.ndarray:
            row = self.harmonized_df.iloc[index]
            h, w = (int(row[k]) if pd.notna(row[k]) else FALLBACK_SIZE for k in ("height", "width"))
            out = np.zeros((h, w), np.uint8)
            for value, col in enumerate(MASKS, 1):
                where = f"{self.harmonizer.csv_path}, {row['image_path']}, {col}"
                out[decode_chexmask(row[col.lower().replace(" ", "_")], height=h, width=w,
                                    where=where) > 0] = value
            return out

        def landmarks(self, index: int) -> np.ndarray:
            """The image's (120, 2) contour landmarks in source pixels (x, y)."""
            value = self.harmonized_df["landmarks"].iat[index]
            return parse_landmarks(json.dumps(value) if isinstance(value, list) else value)

    class CheXmaskNIHDataset(_CheXmaskDataset):
        """CheXmask on NIH; ``base_image_dir`` is NIH's ``images/`` folder."""

        harmonizer_class = CheXmaskNIHHarmonizer

    class CheXmaskCheXpertDataset(_CheXmaskDataset):
        """CheXmask on CheXpert; ``base_image_dir`` is the CheXpert release folder."""

        harmonizer_class = CheXmaskCheXpertHarmonizer

    class CheXmaskVinDrDataset(_CheXmaskDataset):
        """CheXmask on VinDr-CXR; ``base_image_dir`` is VinDr's ``train/`` folder."""

        harmonizer_class = CheXmaskVinDrHarmonizer

    class CheXmaskMIMICDataset(_CheXmaskDataset):
        """CheXmask on MIMIC-CXR-JPG; ``base_image_dir`` is the MIMIC-CXR-JPG root (holding
        ``files/`` and the metadata table)."""

        harmonizer_class = CheXmaskMIMICHarmonizer

    class CheXmaskPadChestDataset(_CheXmaskDataset):
        """CheXmask on PadChest; ``base_image_dir`` is the PadChest root (``<ImageDir>/`` folders
        and the PadChest table)."""

        harmonizer_class = CheXmaskPadChestHarmonizer

    return (_CheXmaskDataset, CheXmaskNIHDataset, CheXmaskCheXpertDataset, CheXmaskVinDrDataset,
            CheXmaskMIMICDataset, CheXmaskPadChestDataset)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["CheXmaskMIMICHarmonizer", "CheXmaskMIMICDataset", "CheXmaskPadChestHarmonizer",
           "CheXmaskPadChestDataset", "CheXmaskNIHHarmonizer", "CheXmaskNIHDataset", "CheXmaskCheXpertHarmonizer",
           "CheXmaskCheXpertDataset", "CheXmaskVinDrHarmonizer", "CheXmaskVinDrDataset"]
