"""CheXlocalize (Saporta et al., Nature Machine Intelligence 2022): radiologist segmentations of
10 findings and the gold (radiologist) labels of CheXpert's validation and test sets.

Source of truth, per split (``val``, ``test``) of the Stanford AIMI download::

    CheXpert/val_labels.csv   CheXpert/val/patient<N>/study<N>/view<K>_<frontal|lateral>.jpg
    CheXpert/test_labels.csv  CheXpert/test/patient<N>/study<N>/view<K>_<frontal|lateral>.jpg
    CheXlocalize/gt_segmentations_{val,test}.json

The labels table (the metadata file) is the membership: one row per image, ``Path`` and the 14
CheXpert labels (radiologist consensus; ``1.0``/``0.0``, ``1``/``0`` or empty). The validation
table has CheXpert's ``Sex, Age, Frontal/Lateral, AP/PA`` columns; the test table lacks them
(``frontal_lateral`` then comes from the file name ``view<K>_frontal``). Columns are taken by
name. ``gt_segmentations_<split>.json`` (found beside the table, near ``base_image_dir`` or in a
``CheXlocalize/`` folder above) is ``{cxr_id: {task: {"size": [h, w], "counts": <COCO
compressed RLE>}}}`` with ``cxr_id`` = ``patient64622_study1_view1_frontal``; a CXR with at least
one positive finding has all 10 :data:`TASKS` (all-zero masks where negative); the others have
no entry. ``Airspace Opacity`` there is CheXpert's ``Lung Opacity``. The RLE is decoded by
:func:`radharmony.annotations.coco.coco_rle_decode` (no pycocotools).

Joins with ``chexpert_valid``: ``Path`` says ``valid/`` (with or without a
``CheXpert-v1.0[-small]/`` prefix, stripped), and ``image_path`` keeps ``valid/...`` -- the
value ``chexpert_valid`` gives the same image, so with ``base_image_dir`` = the CheXpert release
folder both datasets read and cache the same files. When ``base_image_dir`` is CheXlocalize's
own ``CheXpert/`` folder (``val/`` present, no ``valid/``) the rows read ``val/...`` instead.
``patient_id`` is ``patientNNNNN`` and ``study_id`` ``patientNNNNN/studyN``, as for CheXpert.

Masks: ``output_mask=True`` gives ``mask`` (1, S, S): with ``mask_task=None`` (default) the union
of the ten findings' masks, else the 0/1 mask of that task; and ``masks`` (10, S, S) uint8, one
channel per :data:`TASKS` entry. Masks are stored at full CheXpert resolution (e.g. 2320 x 2828)
and follow the image's letterbox, so they align with the ``-small`` JPEGs too (same aspect).
An image without an entry has all-zero masks.

Verified on the authors' sample (``gt``/``gradcam`` segmentation JSON): the key form, the
RLE form and its column-major layout, full-resolution sizes. Unverified (no real labels table
here): the header of ``test_labels.csv`` beyond ``Path`` and the 14 names, and its
``Path`` prefix (``test/...``; a ``CheXpert-v1.0/`` prefix is stripped). Not read: the polygon
files ``gt_annotations_*.json`` (the segmentations are rasterized from them), the human
benchmark ``hb_*`` and the saliency ``gradcam_*`` files.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.coco import coco_rle_decode
from ..annotations.masks import channels_output
from ..annotations.labels import decode_cells
from ..cells import parse_literal
from ..errors import MetadataError, RadHarmonyError
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from ..table.read_csv import check_cells, read_table, require_columns
from ..table.read_json import read_json_file
from .chexpert import LABEL_CODES, LABEL_MAP, LABELS, SEX_MAP, VIEW_MAP
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
#: the 10 segmented findings, in the authors' ``LOCALIZATION_TASKS`` order (JSON spelling)
TASKS = ("Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Lesion", "Airspace Opacity",
         "Edema", "Consolidation", "Atelectasis", "Pneumothorax", "Pleural Effusion",
         "Support Devices")
#: JSON task name -> CheXpert label column
TASK_LABELS = {t: ("Lung Opacity" if t == "Airspace Opacity" else t) for t in TASKS}
OPTIONAL_COLUMNS = ("Sex", "Age", "Frontal/Lateral", "AP/PA")
EXTRA_COLS = ("cxr_id", "patient_sex", "patient_age", "frontal_lateral", "ap_pa", "split",
              "split_raw", "mask_height", "mask_width", "segmentations")
ACCESS = ("Stanford AIMI, free registration: Stanford University School of Medicine CheXlocalize "
          "Dataset Research Use Agreement (personal, non-commercial research; no redistribution)")
VAL_SPEC = DatasetSpec(
    identity=Identity("chexpert"),
    key="chexlocalize_val", title="CheXlocalize (CheXpert validation, radiologist labels and "
    "segmentations)", metadata_files=("val_labels.csv", "CheXpert/val_labels.csv"),
    label_cols=LABELS, extra_cols=EXTRA_COLS, outputs=frozenset({"cls", "mask"}),
    view_map=VIEW_MAP, access=ACCESS, label_map=LABEL_MAP,
    column_types={"patient_age": "Int64", "mask_height": "Int64", "mask_width": "Int64",
                  "segmentations": "json"},
    expected={"images": 234, "patients": 200, "segmented_images": 187})
TEST_SPEC = replace(
    VAL_SPEC, key="chexlocalize_test", title="CheXlocalize (CheXpert test, radiologist labels "
    "and segmentations)", metadata_files=("test_labels.csv", "CheXpert/test_labels.csv"),
    expected={"images": 668, "patients": 500, "segmented_images": 499})
_FIX = "pass the CheXlocalize files as downloaded"


# -- pure helpers ---------------------------------------------------------------------------------
def cxr_id(rel: str) -> str:
    """``valid/patient64622/study1/view1_frontal.jpg`` -> ``patient64622_study1_view1_frontal``
    (the segmentation JSON's key)."""
    parts = rel.split("/")
    return "_".join(parts[-3:])[: -len(".jpg")]


def segmentation_cells(seg: dict | None, ids: list[str], *, source: str
                       ) -> tuple[list[dict], list, list]:
    """Per image ``({task: counts}, height, width)`` from the parsed segmentation JSON (empty
    dict and missing size where the image has no entry)."""
    if seg is not None and not isinstance(seg, dict):
        raise MetadataError(f"{source}: the segmentation file is not an object",
                            expected="{cxr_id: {task: {'size': [h, w], 'counts': ...}}}",
                            found=type(seg).__name__, fix=_FIX)
    cells, heights, widths = [], [], []
    for cid in ids:
        entry = (seg or {}).get(cid)
        out, size = {}, None
        for task, rle in (entry or {}).items():
            where = f"{source}, {cid}, {task}"
            if task not in TASK_LABELS:
                raise MetadataError(f"{where}: unknown task", expected=f"one of {list(TASKS)}",
                                    found=repr(task), fix=_FIX)
            if not isinstance(rle, dict) or not isinstance(rle.get("counts"), str) or \
                    not isinstance(rle.get("size"), list) or len(rle["size"]) != 2:
                raise MetadataError(f"{where}: not a COCO compressed RLE",
                                    expected="{'size': [h, w], 'counts': '<text>'}",
                                    found=repr(rle)[:80], fix=_FIX)
            hw = tuple(int(v) for v in rle["size"])
            if size is not None and hw != size:
                raise MetadataError(f"{where}: mask size differs from the image's other masks",
                                    expected=f"size {list(size)}", found=f"size {list(hw)}",
                                    fix=_FIX)
            size = hw
            out[task] = rle["counts"]
        cells.append(out)
        heights.append(None if size is None else size[0])
        widths.append(None if size is None else size[1])
    return cells, heights, widths


def _text(values: pd.Series) -> pd.Series:
    """Text cells as an object column, missing ones None."""
    return pd.Series([v if isinstance(v, str) else None for v in values], dtype=object)


# -- harmonizers ----------------------------------------------------------------------------------
class CheXlocalizeValHarmonizer(BaseHarmonizer):
    """CheXlocalize validation: 234 images of 200 patients (CheXpert's valid set), 187 with
    segmentations."""

    spec = VAL_SPEC
    split = "val"
    metadata_description = "the CheXlocalize labels table val_labels.csv"

    def inputs(self, path: Path) -> Inputs:
        """The labels table, the segmentation JSON (beside it, near the images or in a
        ``CheXlocalize/`` folder above) and, for the validation split, the ``val/`` and
        ``valid/`` image folders (which of the two exists decides the path prefix)."""
        name = f"gt_segmentations_{self.split}.json"
        files = {"segmentations": find_optional((name, f"CheXlocalize/{name}"), path.parent,
                                                self.base_image_dir)}
        folders = {}
        if self.split == "val":
            for sub in ("val", "valid"):
                d = None if self.base_image_dir is None else self.base_image_dir / sub
                folders[f"{sub}_images"] = (d if d is not None and d.is_dir() else None,
                                            (".jpg",))
        return Inputs(path, files, folders)

    def read(self, inputs: Inputs) -> dict:
        table = read_table(inputs.metadata, description=self.metadata_description,
                           columns=("Path", *LABELS), dtype=str)
        seg = None
        if (p := inputs.file("segmentations")) is not None:
            seg = read_json_file(p, what="{cxr_id: {task: {'size': [h, w], 'counts': ...}}}")
        folders = inputs.folders
        val_layout = bool(folders) and folders["val_images"][0] is not None and \
            folders["valid_images"][0] is None
        return {"table": table, "segmentations": seg, "val_folder": val_layout}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        t = raw["table"]
        require_columns(t, ("Path", *LABELS), source=source, description="the labels table")
        rel = t["Path"].str.strip().str.replace(r"^CheXpert-v1\.0(-small)?/", "", regex=True)
        check_cells(rel.str.fullmatch(r"(valid|val|test)/patient\d+/study\d+/view\d+_"
                                      r"(frontal|lateral)\.jpg"), t["Path"], source=source,
                    what="Path is not <split>/patient/study/view<K>_<frontal|lateral>.jpg",
                    expected="e.g. valid/patient64541/study1/view1_frontal.jpg", fix=_FIX)
        rel = rel.str.replace(r"^val/", "valid/", regex=True)
        if raw.get("val_folder"):
            rel = rel.str.replace(r"^valid/", "val/", regex=True)
        study = rel.str.replace(r"^[^/]+/|/[^/]+$", "", regex=True)
        col = {c: (t[c] if c in t.columns else pd.Series([None] * len(t), dtype=object))
               for c in OPTIONAL_COLUMNS}
        named = rel.str.extract(r"_(frontal|lateral)\.jpg$")[0]  # as the file name spells it
        frontal = col["Frontal/Lateral"].fillna(named.str.capitalize())
        view = col["AP/PA"].fillna(col["Frontal/Lateral"]).fillna(named)  # raw
        df = pd.DataFrame({"patient_id": study.str.replace(r"/.*$", "", regex=True),
                           "study_id": study, "image_path": rel,
                           "view_position": view.astype(object), "report": None})
        df[list(LABELS)] = decode_cells(t[list(LABELS)], LABEL_CODES, source=source)
        ids = [cxr_id(r) for r in rel]
        cells, heights, widths = segmentation_cells(raw.get("segmentations"), ids, source=source)
        df["cxr_id"] = ids
        df["patient_sex"] = pd.Series([SEX_MAP.get(v) for v in col["Sex"]], dtype=object)
        df["patient_age"] = pd.array(pd.to_numeric(col["Age"], errors="coerce"), dtype="Int64")
        df["frontal_lateral"] = _text(frontal)
        df["ap_pa"] = _text(col["AP/PA"])
        df["split_raw"] = cls.split
        df["split"] = {"val": "valid"}.get(cls.split, cls.split)
        df["mask_height"] = pd.array(heights, dtype="Int64")
        df["mask_width"] = pd.array(widths, dtype="Int64")
        df["segmentations"] = pd.Series(cells, dtype=object)
        return df


class CheXlocalizeTestHarmonizer(CheXlocalizeValHarmonizer):
    """CheXlocalize test: CheXpert's 668 test images of 500 patients, 499 with segmentations."""

    spec = TEST_SPEC
    split = "test"
    metadata_description = "the CheXlocalize labels table test_labels.csv"


# -- datasets -------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class CheXlocalizeValDataset(BaseRadiologicalDataset):
        """CheXlocalize validation; ``base_image_dir`` is the CheXpert release folder (``valid/``,
        shared with ``chexpert_valid``) or CheXlocalize's ``CheXpert/`` folder (``val/``).

        ``mask_task=`` (keyword): None (default) makes ``mask`` the union of the 10 findings, a name
        in :data:`TASKS` that finding's mask; ``masks`` always holds all 10 channels.
        """

        harmonizer_class = CheXlocalizeValHarmonizer

        def __init__(self, *args, mask_task: str | None = None, **kwargs):
            if mask_task is not None and mask_task not in TASKS:
                raise RadHarmonyError("Unknown CheXlocalize mask_task",
                                      expected=f"None or one of {list(TASKS)}",
                                      found=repr(mask_task),
                                      fix="pass a JSON task name, e.g. "
                                          "mask_task='Airspace Opacity'")
            self.mask_task = mask_task
            super().__init__(*args, **kwargs)

        def source_masks(self, index: int) -> np.ndarray:
            """Row ``index``'s (height, width, 10) uint8 masks, one channel per :data:`TASKS`
            entry, at the segmentation's resolution (the image's size when it has none)."""
            key = self.rows.ids[index]
            memo = getattr(self, "_masks_memo", None)
            if memo is not None and memo[0] == key:  # mask and masks of one sample decode once
                return memo[1]
            masks = self._decode_masks(index)
            self._masks_memo = (key, masks)
            return masks

        def _decode_masks(self, index: int) -> np.ndarray:
            df = self.harmonized_df
            cell = df["segmentations"].iat[index]
            if isinstance(cell, str):
                cell = parse_literal(cell)
            h, w = df["mask_height"].iat[index], df["mask_width"].iat[index]
            if not cell or pd.isna(h) or pd.isna(w):
                from PIL import Image

                with Image.open(self.image_file(index)) as im:  # header only: the JPEG's size
                    w, h = im.size
                return np.zeros((int(h), int(w), len(TASKS)), np.uint8)
            out = np.zeros((int(h), int(w), len(TASKS)), np.uint8)
            for k, task in enumerate(TASKS):
                if cell.get(task):
                    out[..., k] = coco_rle_decode({"size": [int(h), int(w)], "counts": cell[task]},
                                                  where=f"{df['cxr_id'].iat[index]}, {task}")
            return out

        def source_mask(self, index: int) -> np.ndarray:
            masks = self.source_masks(index)
            if self.mask_task is not None:
                return masks[..., TASKS.index(self.mask_task)]
            return masks.max(axis=2)

        def add_outputs(self, index: int, sample: dict, box) -> None:
            super().add_outputs(index, sample, box)
            if "mask" in sample:
                sample["masks"] = channels_output(self.source_masks(index), box)

    class CheXlocalizeTestDataset(CheXlocalizeValDataset):
        """CheXlocalize test; ``base_image_dir`` is CheXlocalize's ``CheXpert/`` folder
        (``test/``)."""

        harmonizer_class = CheXlocalizeTestHarmonizer

    return CheXlocalizeValDataset, CheXlocalizeTestDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["CheXlocalizeValHarmonizer", "CheXlocalizeValDataset", "CheXlocalizeTestHarmonizer",
           "CheXlocalizeTestDataset"]
