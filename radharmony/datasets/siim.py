"""SIIM-ACR Pneumothorax Segmentation (2019): 12,047 DICOMs with run-length pneumothorax masks.

Source of truth: ``train-rle.csv`` (torchxrayvision ships it as
``siim-pneumothorax-train-rle.csv.gz``), header ``ImageId, EncodedPixels`` -- the second
column's name starts with a space. One row per pneumothorax *instance*: an image with three
separate regions has three rows, an image without one a single ``-1`` row. The run-length code
is SIIM's own: pairs ``start length`` where each start counts from the end of the previous run
(relative), over pixels numbered down the columns (column-major) of the 1024 x 1024 image.

Harmonized: one row per image; ``Pneumothorax`` is 1 when any instance is encoded; ``rle`` keeps
the image's instance codes (empty for negatives) and ``output_mask=True`` decodes and merges
them all into one mask. The images sit in ``dicom-images-train/<study>/<series>/<ImageId>.dcm``
(folders named by DICOM UIDs the CSV does not give), so the harmonizer lists the ``.dcm`` files
under ``base_image_dir`` once; without that folder the path is ``<ImageId>.dcm`` (flat layout).
The images are NIH ChestX-ray14 images re-anonymized one per patient: the DICOM ``PatientID`` is
a per-image uuid, so ``patient_id`` is the image id (no grouping of a patient's images exists).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.locate import listed_paths
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.masks import merge_masks, rle_decode
from ..spec import DatasetSpec, Identity
from ..table.read_csv import lists_by, read_table, require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("ImageId", " EncodedPixels")  # sic: leading space
RLE_COL = COLUMNS[1]
NO_MASK = "-1"
MASK_SHAPE = (1024, 1024)
LABEL = "Pneumothorax"
LABEL_MAP = {LABEL: (("pneumothorax", "exact"),)}  # radharmony.vocabulary findings
SPEC = DatasetSpec(
    identity=Identity("nih_cxr14", link="none",  # its DICOMs carry new UIDs, no NIH name
                      note="A table naming each image's NIH original (file or patient) would "
                           "link them; radharmony.audit finds the NIH originals among the "
                           "images of a merge as near-duplicates."),
    key="siim_acr_ptx", title="SIIM-ACR Pneumothorax Segmentation",
    metadata_files=("train-rle.csv", "siim-pneumothorax-train-rle.csv.gz"),
    label_cols=(LABEL,), label_map=LABEL_MAP, extra_cols=("rle",), outputs=frozenset({"cls", "mask"}),
    column_types={"rle": "json"},
    id_col="study_id",  # the ImageId, whatever folder layout the images are in
    expected={"images": 12_047, "studies": 12_047, "patients": 12_047, "positive": 2_669,
              "rows": 12_954},
    access="Kaggle 'siim-acr-pneumothorax-segmentation' (competition rules; NIH-derived images)")


# -- harmonizer -----------------------------------------------------------------------------------
class SIIMPneumothoraxHarmonizer(BaseHarmonizer):
    """SIIM-ACR pneumothorax: 12,047 images, 2,669 with a mask."""

    spec = SPEC
    metadata_description = "the SIIM-ACR run-length table (train-rle.csv)"

    def inputs(self, path: Path) -> Inputs:
        """The RLE table and the image folder, listed for its ``.dcm`` files (the nesting
        ``<study>/<series>/<ImageId>.dcm`` varies between copies)."""
        root = self.base_image_dir
        return Inputs(path, folders={"images": (root if root is not None and root.is_dir()
                                                else None, (".dcm",))})

    def read(self, inputs: Inputs) -> dict:
        table = read_table(inputs.metadata, description=self.metadata_description,
                           columns=COLUMNS, dtype=str, keep_default_na=False)
        return {"rle": table, "files": inputs.by_name("images", suffix=".dcm")}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        table = raw["rle"]
        require_columns(table, COLUMNS, source=source, description="the SIIM-ACR table")
        ids = pd.Index(pd.unique(table["ImageId"].str.strip()))
        codes = table[RLE_COL].astype(str).str.strip()
        masked = codes.ne(NO_MASK) & codes.ne("")
        rle = lists_by(ids, table["ImageId"].str.strip()[masked], codes[masked].to_numpy(object))
        paths = listed_paths(ids, raw.get("files"), ids + ".dcm", source=source,
                             fallback_text="'<ImageId>.dcm'", what=".dcm file")
        return pd.DataFrame({"patient_id": ids, "study_id": ids,
                             "image_path": np.asarray(paths, dtype=object),
                             "view_position": None, "report": None,
                             LABEL: np.array([float(bool(r)) for r in rle], np.float32),
                             "rle": rle})


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class SIIMPneumothoraxDataset(BaseRadiologicalDataset):
        """SIIM-ACR pneumothorax; ``base_image_dir`` is ``dicom-images-train/`` (searched for
        ``.dcm`` files); ``output_mask=True`` gives ``mask`` (1, 224, 224) uint8, every instance
        of the image merged."""

        harmonizer_class = SIIMPneumothoraxHarmonizer

        def source_mask(self, index: int) -> np.ndarray:
            image_id = self.harmonized_df["study_id"].iat[index]
            where = f"{self.harmonizer.csv_path or 'train-rle.csv'}, ImageId {image_id}"
            codes = self.harmonized_df["rle"].iat[index]
            if isinstance(codes, str):  # a table read back from CSV holds the list as JSON
                codes = json.loads(codes) if codes.strip() else []
            return merge_masks((rle_decode(code, height=MASK_SHAPE[0], width=MASK_SHAPE[1],
                                           relative=True, order="F", where=where)
                                for code in codes), shape=MASK_SHAPE)

    return SIIMPneumothoraxDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["SIIMPneumothoraxHarmonizer", "SIIMPneumothoraxDataset"]
