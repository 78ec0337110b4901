"""TotalSegmentator v2 (Wasserthal et al.): 1,228 CT scans of the University Hospital Basel
with 117 anatomical structures segmented (gzip NIfTI).

Layout, as the Zenodo archive unpacks (``base_image_dir`` the folder holding ``meta.csv``)::

    meta.csv                                   semicolon-separated, UTF-8 with a BOM
    s0000/ct.nii.gz                            int16 HU
    s0000/segmentations/<structure>.nii.gz     117 binary masks on the CT's grid

Source of truth: ``meta.csv``, one row per subject (``image_id`` ``s0000``; ``age``,
``gender``, ``institute``, ``study_type``, ``split`` train / val / test, scanner fields,
``pathology``, ``pathology_location``). Quirks:

- **Semicolons and a BOM**: read as such (a comma reader sees one column named
  ``\\ufeffimage_id;age;...``).
- **One file per structure.** The ``mask`` output merges the 117 binary masks into one label
  map on the volume's grid: structure ``k`` of :data:`STRUCTURES` (the release's class order,
  names kept) is label ``k + 1``, 0 is background; where two masks overlap the later in that
  order wins. A mask whose affine differs from the CT's by more than 1e-3 mm (or whose shape
  differs) is refused, naming both files (:func:`radharmony.volumes.masks.merge_masks`). With
  a preset or a volume augmentation the label map is carried onto the output grid by the
  nearest label, never blended (:class:`radharmony.volumes.placement.VolumeGrid`). A missing
  mask file leaves its structure absent.
- No patient ids: each subject is its own patient (``patient_id`` = ``image_id``); no reports,
  no labels.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
#: the 117 structures in the release's class order: label k + 1 is STRUCTURES[k]
STRUCTURES = (
    "spleen", "kidney_right", "kidney_left", "gallbladder", "liver", "stomach", "pancreas",
    "adrenal_gland_right", "adrenal_gland_left", "lung_upper_lobe_left",
    "lung_lower_lobe_left", "lung_upper_lobe_right", "lung_middle_lobe_right",
    "lung_lower_lobe_right", "esophagus", "trachea", "thyroid_gland", "small_bowel",
    "duodenum", "colon", "urinary_bladder", "prostate", "kidney_cyst_left",
    "kidney_cyst_right", "sacrum", "vertebrae_S1", "vertebrae_L5", "vertebrae_L4",
    "vertebrae_L3", "vertebrae_L2", "vertebrae_L1", "vertebrae_T12", "vertebrae_T11",
    "vertebrae_T10", "vertebrae_T9", "vertebrae_T8", "vertebrae_T7", "vertebrae_T6",
    "vertebrae_T5", "vertebrae_T4", "vertebrae_T3", "vertebrae_T2", "vertebrae_T1",
    "vertebrae_C7", "vertebrae_C6", "vertebrae_C5", "vertebrae_C4", "vertebrae_C3",
    "vertebrae_C2", "vertebrae_C1", "heart", "aorta", "pulmonary_vein",
    "brachiocephalic_trunk", "subclavian_artery_right", "subclavian_artery_left",
    "common_carotid_artery_right", "common_carotid_artery_left", "brachiocephalic_vein_left",
    "brachiocephalic_vein_right", "atrial_appendage_left", "superior_vena_cava",
    "inferior_vena_cava", "portal_vein_and_splenic_vein", "iliac_artery_left",
    "iliac_artery_right", "iliac_vena_left", "iliac_vena_right", "humerus_left",
    "humerus_right", "scapula_left", "scapula_right", "clavicula_left", "clavicula_right",
    "femur_left", "femur_right", "hip_left", "hip_right", "spinal_cord",
    "gluteus_maximus_left", "gluteus_maximus_right", "gluteus_medius_left",
    "gluteus_medius_right", "gluteus_minimus_left", "gluteus_minimus_right",
    "autochthon_left", "autochthon_right", "iliopsoas_left", "iliopsoas_right", "brain",
    "skull", *(f"rib_left_{i}" for i in range(1, 13)), *(f"rib_right_{i}" for i in range(1, 13)),
    "sternum", "costal_cartilages")
METADATA_FILE = "meta.csv"
META_COLUMNS = ("image_id", "age", "gender", "institute", "study_type", "split",
                "manufacturer", "scanner_model", "kvp", "pathology", "pathology_location")
#: meta.csv split -> the table's split
SPLITS = {"train": "train", "val": "valid", "test": "test"}
EXTRA_COLS = ("image_id", "mask_dir", "age", "gender", "institute", "study_type",
              "manufacturer", "scanner_model", "kvp", "pathology", "pathology_location",
              "split", "split_raw")
ACCESS = ("Zenodo (TotalSegmentator v2.0.1): CC BY 4.0 (check the record of the version "
          "used); cite Wasserthal et al., 'TotalSegmentator: robust segmentation of 104 "
          "anatomic structures in CT images', Radiology: AI 2023")
EXPECTED = {"images": 1_228}

SPEC = DatasetSpec(
    key="totalsegmentator", title="TotalSegmentator v2", metadata_files=(METADATA_FILE,),
    extra_cols=EXTRA_COLS, outputs=frozenset({"mask"}), row_unit="volume", id_col="image_id",
    age_col="age", age_format="years", sex_col="gender", access=ACCESS, expected=EXPECTED)


# -- harmonizer -----------------------------------------------------------------------------------
class TotalSegmentatorHarmonizer(BaseHarmonizer):
    """TotalSegmentator v2: one row per subject of ``meta.csv``."""

    spec = SPEC

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return "the TotalSegmentator table meta.csv (semicolon-separated)"

    def inputs(self, path: Path) -> Inputs:
        return Inputs(path, {}, {})

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_table(inputs.metadata, description=self.metadata_description,
                          columns=("image_id", "split"), sep=";", encoding="utf-8-sig",
                          dtype=str, keep_default_na=False, na_values=[""])

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        ids = raw["image_id"].str.strip()
        check_cells(ids.str.fullmatch(r"s\d+"), raw["image_id"], source=source,
                    what="image_id is not a subject folder", expected="e.g. s0000")
        split = raw["split"].str.strip()
        check_cells(split.isin(list(SPLITS)), raw["split"], source=source,
                    what="split is not train, val or test", expected="train, val or test")
        df = pd.DataFrame({"patient_id": ids, "study_id": ids, "image_path": ids + "/ct.nii.gz",
                           "view_position": None, "report": None, "image_id": ids,
                           "mask_dir": ids + "/segmentations"})
        for col in EXTRA_COLS[2:-2]:
            df[col] = raw[col] if col in raw.columns else None
        df["split"], df["split_raw"] = split.map(SPLITS), split
        return df


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    import numpy as np

    from ..data.volumes import VolumeDataset

    class TotalSegmentatorDataset(VolumeDataset):
        """TotalSegmentator v2 CTs; ``output_mask=True`` adds ``mask`` ``(1, D, H, W)``, the
        117 structures as one label map on the sample's grid (label k + 1 =
        ``STRUCTURES[k]``)."""
        harmonizer_class = TotalSegmentatorHarmonizer
        ct = True
        structures = STRUCTURES

        def source_mask(self, index: int) -> np.ndarray:
            """Row ``index``'s label map on its volume's canonical grid (the sample's ``mask``
            carries it onto the returned grid: :class:`~radharmony.volumes.placement.
            VolumeGrid`)."""
            from ..volumes.masks import merge_masks

            folder = self.base_image_dir / self.harmonized_df["mask_dir"].iat[index]
            return merge_masks([folder / f"{s}.nii.gz" for s in STRUCTURES],
                               self.image_file(index))[0]

    return (TotalSegmentatorDataset,)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["TotalSegmentatorHarmonizer", "TotalSegmentatorDataset"]
