"""ChestX-Det (Deepwise AI Lab, Lian et al. 2021): 3,578 NIH ChestX-ray14 images with boxes
and segmentation polygons of 13 findings by three board-certified radiologists.

Source of truth (the authors' ``Deepwise-AILab/ChestX-Det-Dataset`` README): two JSON files,
``ChestX_Det_train.json`` (3,025 images) and ``ChestX_Det_test.json`` (553), each a JSON
*array* with one object per image::

    {"file_name": "36199.png", "syms": ["Effusion", ...],
     "boxes": [[x1, y1, x2, y2], ...], "polygons": [[[x, y], [x, y], ...], ...]}

``syms[k]``, ``boxes[k]`` and ``polygons[k]`` describe the k-th instance; ``x1, y1`` is the
upper-left corner, pixels of the 1024 x 1024 PNG. An image with empty ``syms`` was read and has
none of the 13 findings. The images come as ``train_data.zip`` / ``test_data.zip``: extract
them under ``base_image_dir`` (the PNGs are found by name in any nesting; without them the
path is ``train_data/<file_name>`` / ``test_data/<file_name>``, the zips' names).

Harmonized: one row per image; ``split`` ``train`` / ``test``; the 13 labels 1 when an instance
of it is drawn, else 0; ``boxes`` every instance's box in source pixels
(``box_units="pixel"``); ``shapes`` its polygon (``{"type": "polygon", "label", "points"}``),
which ``output_mask=True`` rasterizes at the image's size: ``mask`` the union of every
instance, ``masks`` (13, S, S) one channel per finding in :data:`LABELS` order.

NIH identity: ChestX-Det renamed the images (``36199.png``), and nothing released maps these
names to NIH's ``Image Index`` (``<patient>_<follow-up>.png``), so they cannot be joined to
``Data_Entry_2017``. Where a ``file_name`` *is* an NIH Image Index (as in ChestX-Det10's files),
``nih_image_index`` holds it and ``patient_id`` is NIH's patient, so a merge with ``nih_cxr14``
puts that patient on one side of every split; every other row is its own patient
(``patient_id`` is its ``file_name``) and the harmonizer warns how many are unlinked
(``radharmony.audit`` finds their NIH originals as near-duplicates).

Verified: the keys and their meaning (the authors' README), empty ``syms`` (a public converter
skips them). Unverified (no real file here): the counts per split and the folder names inside
the zips.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.boxes import box_record
from ..annotations.coco import polygon_mask, shape_box
from ..errors import MetadataError
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from ..table.read_json import read_json_file
from .object_cxr import ChannelMasks
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
FILES = {"train": "ChestX_Det_train.json", "test": "ChestX_Det_test.json"}
ZIP_FOLDERS = {"train": "train_data", "test": "test_data"}
KEYS = ("file_name", "syms", "boxes", "polygons")
LABELS = ("Atelectasis", "Calcification", "Cardiomegaly", "Consolidation", "Diffuse Nodule",
          "Effusion", "Emphysema", "Fibrosis", "Fracture", "Mass", "Nodule",
          "Pleural Thickening", "Pneumothorax")
#: ChestX-Det draws "Nodule" and "Diffuse Nodule" apart, so neither alone rules a nodule out
LABEL_MAP = {
    "Atelectasis": (("atelectasis", "exact"),), "Calcification": (("calcification", "exact"),),
    "Cardiomegaly": (("cardiomegaly", "exact"),), "Consolidation": (("consolidation", "exact"),),
    "Diffuse Nodule": (("nodule", "narrower"),), "Effusion": (("pleural_effusion", "exact"),),
    "Emphysema": (("emphysema", "exact"),), "Fibrosis": (("fibrosis", "exact"),),
    "Fracture": (("fracture", "exact"),), "Mass": (("mass", "exact"),),
    "Nodule": (("nodule", "narrower"),), "Pleural Thickening": (("pleural_thickening", "exact"),),
    "Pneumothorax": (("pneumothorax", "exact"),),
}
NIH_NAME = r"^\d{8}_\d{3}\.png$"
SPEC = DatasetSpec(
    identity=Identity("nih_cxr14", link="column", column="nih_image_index", pattern=r"^(\d{8})_"),
    key="chestx_det", title="ChestX-Det (NIH ChestX-ray14 boxes and polygons, 13 findings)",
    metadata_files=(FILES["train"], f"ChestX-Det-Dataset/{FILES['train']}"),
    label_cols=LABELS, label_map=LABEL_MAP,
    extra_cols=("file_name", "nih_image_index", "split", "split_raw", "shapes", "boxes"),
    outputs=frozenset({"cls", "bbox", "mask"}), column_types={"shapes": "json"},
    zero_pad={"patient_id": 8}, box_units="pixel",
    id_col="study_id",  # the file name's stem, whatever the folders
    expected={"images": 3_578, "train": 3_025, "test": 553},
    access="Deepwise AI Lab, github.com/Deepwise-AILab/ChestX-Det-Dataset (annotations); the "
           "images are NIH ChestX-ray14's (public domain), downloaded as train_data.zip / "
           "test_data.zip")
_FIX = "pass ChestX_Det_train.json / ChestX_Det_test.json as released"


# -- pure helpers ---------------------------------------------------------------------------------
def entry_shapes(entry: dict, *, where: str) -> tuple[list[str], list[dict], list[dict]]:
    """One image object -> ``(syms, boxes, shapes)``; the three lists must pair up."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file_name"), str):
        raise MetadataError(f"{where}: not an image object", expected=f"an object with keys "
                            f"{list(KEYS)}", found=repr(entry)[:80], fix=_FIX)
    syms, boxes = entry.get("syms") or [], entry.get("boxes") or []
    polygons = entry.get("polygons") or []
    if len(boxes) != len(syms) or (polygons and len(polygons) != len(syms)):
        raise MetadataError(f"{where} ({entry['file_name']}): syms, boxes and polygons differ "
                            "in length", expected="one box (and one polygon) per sym",
                            found=f"{len(syms)} syms, {len(boxes)} boxes, {len(polygons)} "
                                  "polygons", fix=_FIX)
    unknown = sorted(set(syms) - set(LABELS))
    if unknown:
        raise MetadataError(f"{where} ({entry['file_name']}): unknown finding in syms",
                            expected=f"one of {list(LABELS)}", found=repr(unknown[:3]), fix=_FIX)
    out_boxes, shapes = [], []
    for k, (sym, box) in enumerate(zip(syms, boxes)):
        if not isinstance(box, list) or len(box) != 4:
            raise MetadataError(f"{where} ({entry['file_name']}): box {k} is not [x1, y1, x2, y2]",
                                expected="four pixel coordinates", found=repr(box)[:60], fix=_FIX)
        out_boxes.append(box_record(sym, None, *box))
        if polygons and len(polygons[k]) >= 3:
            shapes.append({"type": "polygon", "label": sym,
                           "points": [[float(x), float(y)] for x, y in polygons[k]]})
    return list(syms), out_boxes, shapes


def read_split_files(inputs: Inputs, splits: tuple[str, str], files: dict, *, what: str) -> dict:
    """``{split: parsed JSON (None when absent), "files": PNG name -> path}`` for a release of
    one JSON per split: the first is the metadata file, the second the side file declared under
    its split's name (warned when missing), the PNGs the listed ``images`` folder."""
    first, second = splits
    other = inputs.file(second)
    if other is None:
        warnings.warn(f"No {files[second]} beside {inputs.metadata}: only the {first} split is "
                      "read", stacklevel=3)
    return {first: read_json_file(inputs.metadata, what=what),
            second: None if other is None else read_json_file(other, what=what),
            "files": inputs.by_name("images")}


# -- harmonizer -----------------------------------------------------------------------------------
class ChestXDetHarmonizer(BaseHarmonizer):
    """ChestX-Det: 3,578 NIH images (3,025 train, 553 test), 13 findings drawn."""

    spec = SPEC
    metadata_description = f"the ChestX-Det annotations {FILES['train']}"

    def inputs(self, path: Path) -> Inputs:
        """The train JSON, the test JSON beside it (or near the images) and the image folder,
        listed for PNGs."""
        root = self.base_image_dir
        return Inputs(path, {"test": find_optional((FILES["test"],), path.parent, root)},
                      {"images": (root if root is not None and root.is_dir() else None,
                                  (".png",))})

    def read(self, inputs: Inputs) -> dict:
        return read_split_files(inputs, ("train", "test"), FILES,
                                what="a JSON array of {file_name, syms, boxes, polygons}")

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        rows = []
        for split in ("train", "test"):
            entries = raw.get(split)
            if entries is None:
                continue
            if not isinstance(entries, list):
                raise MetadataError(f"{source}: {FILES[split]} is not a JSON array",
                                    expected="[{file_name, syms, boxes, polygons}, ...]",
                                    found=type(entries).__name__, fix=_FIX)
            for i, entry in enumerate(entries):
                syms, boxes, shapes = entry_shapes(entry, where=f"{source}, {FILES[split]} "
                                                                f"entry {i}")
                rows.append((split, entry["file_name"], syms, boxes, shapes))
        names = pd.Series([r[1] for r in rows], dtype=object)
        nih = names.where(names.str.fullmatch(NIH_NAME), None)
        if (unlinked := int(nih.isna().sum())):
            warnings.warn(f"{source}: {unlinked} of {len(names)} ChestX-Det file names are not "
                          "NIH Image Index names (ChestX-Det renamed its images), so their "
                          "patients cannot be joined to nih_cxr14's; each is its own patient",
                          stacklevel=2)
        files = raw.get("files") or {}
        split = pd.Series([r[0] for r in rows], dtype=object)
        paths = [files.get(n, f"{ZIP_FOLDERS[s]}/{n}") for s, n in zip(split, names)]
        stems = names.str.replace(r"\.png$", "", regex=True)
        patient = nih.str.slice(0, 8).fillna(names)  # unlinked: the image is the patient
        df = pd.DataFrame({"patient_id": patient.astype(object), "study_id": stems.astype(object),
                           "image_path": pd.Series(paths, dtype=object),
                           "view_position": None, "report": None})
        for label in LABELS:
            df[label] = np.array([float(label in r[2]) for r in rows], np.float32)
        df["file_name"] = names
        df["nih_image_index"] = nih.astype(object)
        df["split"] = split
        df["split_raw"] = split
        df["shapes"] = pd.Series([r[4] for r in rows], dtype=object)
        df["boxes"] = pd.Series([r[3] for r in rows], dtype=object)
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class ChestXDetDataset(ChannelMasks, BaseRadiologicalDataset):
        """ChestX-Det; ``base_image_dir`` holds the extracted ``train_data/`` and ``test_data/``
        PNGs; ``output_bbox=True`` gives the instances' boxes, ``output_mask=True`` the union
        of their polygons (``mask``) and one channel per finding (``masks``, 13 in
        :data:`LABELS` order)."""

        harmonizer_class = ChestXDetHarmonizer

        def source_masks(self, index: int) -> np.ndarray:
            """Row ``index``'s ``(height, width, 13)`` masks, one per finding, at the image's
            size."""
            shape = self.source_size(index)
            out = np.zeros((*shape, len(LABELS)), np.uint8)
            for s in self.source_shapes(index):
                k = LABELS.index(s["label"])
                np.maximum(out[..., k], polygon_mask([s["points"]], shape), out=out[..., k])
            return out

    return ChestXDetDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["ChestXDetHarmonizer", "ChestXDetDataset"]
