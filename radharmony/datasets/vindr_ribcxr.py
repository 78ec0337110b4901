"""VinDr-RibCXR (Nguyen et al., MIDL 2021): 245 posteroanterior CXRs from VinDr-CXR with each
of 20 ribs segmented by an expert (R1-R10 the right ribs, L1-L10 the left, top down).

Source of truth (the authors' training code, ``vinbigdata-medical/MIDL2021-VinDr-RibCXR``):
one JSON per split, ``data/train/train_mask.json`` (196 images) and ``data/val/val_mask.json``
(49), written by pandas in its ``columns`` orientation::

    {"img": {"0": "<image path>", "1": ...},
     "R1": {"0": [{"x": 612.0, "y": 233.5}, ...], "1": "None"}, ..., "L10": {...}}

Each rib of an image is one polygon (its outline, pixels of the image) or the text ``"None"``
when it was not drawn. The images are PNGs named by ``img``; they are found by file name under
``base_image_dir`` (any nesting), else the path is ``img`` as written.

Harmonized: one row per image (``split`` ``train`` / ``valid``, ``split_raw`` ``train`` /
``val``); ``ribs`` holds ``{rib: [[x, y], ...]}`` for the ribs drawn and ``n_ribs`` their count;
``boxes`` each rib's bounding box, labelled ``"right rib 1"`` ... ``"left rib 10"``
(``box_units="pixel"``), so the ribs feed the ``anatomical_grounding`` mixture task.
``output_mask=True`` gives ``mask`` (1, S, S): 0 background, 1-10 R1-R10, 11-20 L1-L10 (drawn in
that order, a later rib over an earlier one where they cross), and ``masks`` (20, S, S), one 0/1
channel per rib in :data:`RIBS` order, overlaps kept. No labels: the dataset labels anatomy.
Every image is posteroanterior (the authors' paper), but no file says so: ``view_position``
is empty.

The images are VinDr-CXR's (the authors' page: "sourced from VinDrCXR dataset"), but the
release names no VinDr-CXR ``image_id``: each image is its own patient. Verified: the JSON keys,
the ``{x, y}`` point form and ``"None"`` (the authors' loader), the counts (the authors' page).
Unverified (no real file here): the form of the ``img`` value (a path or a bare name).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.boxes import box_record
from ..annotations.coco import polygon_mask, shape_box
from ..cells import parse_literal
from ..errors import MetadataError
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from .chestx_det import read_split_files
from .object_cxr import ChannelMasks
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
RIBS = tuple(f"R{k}" for k in range(1, 11)) + tuple(f"L{k}" for k in range(1, 11))
#: rib key -> the words a box (and a grounding prompt) names it by
RIB_NAMES = {r: f"{'right' if r[0] == 'R' else 'left'} rib {r[1:]}" for r in RIBS}
FILES = {"train": "train_mask.json", "val": "val_mask.json"}
SPLITS = {"train": "train", "val": "valid"}
NOT_DRAWN = "None"
SPEC = DatasetSpec(
    identity=Identity("vindr_cxr", link="none",
                      note="The release names each image by its own file name; a table naming "
                           "its VinDr-CXR image_id would link them (radharmony.audit finds the "
                           "originals among a merge's images as near-duplicates)."),
    key="vindr_ribcxr", title="VinDr-RibCXR (20 individual rib masks)",
    metadata_files=(FILES["train"], f"train/{FILES['train']}", f"data/train/{FILES['train']}"),
    extra_cols=("split", "split_raw", "n_ribs", "ribs", "boxes"),
    outputs=frozenset({"bbox", "mask"}),
    column_types={"n_ribs": "Int64", "ribs": "json"}, box_units="pixel", id_col="study_id",
    expected={"images": 245, "train": 196, "valid": 49, "ribs": 20},
    access="VinBigData (vindr.ai/datasets/ribcxr): a signed Data Use Agreement sent to the "
           "authors; research and education only")
_FIX = "pass train_mask.json / val_mask.json as released"


# -- pure helpers ---------------------------------------------------------------------------------
def rib_polygons(table: dict, *, where: str) -> list[tuple[str, dict]]:
    """A pandas ``columns``-oriented mask JSON -> ``[(img, {rib: [[x, y], ...]})]`` in index
    order (ribs not drawn left out)."""
    missing = [k for k in ("img", *RIBS) if not isinstance(table, dict) or k not in table]
    if missing:
        raise MetadataError(f"{where}: not a VinDr-RibCXR mask table", expected="an object with "
                            f"keys 'img' and {', '.join(RIBS)}, each {{index: value}}",
                            found=f"missing {missing[:4]}", fix=_FIX)
    out = []
    for index in sorted(table["img"], key=lambda k: int(k) if str(k).isdigit() else 0):
        ribs = {}
        for rib in RIBS:
            pts = table[rib].get(index, NOT_DRAWN)
            if pts is None or pts == NOT_DRAWN:
                continue
            try:
                ribs[rib] = [[float(p["x"]), float(p["y"])] for p in pts]
            except (TypeError, KeyError, ValueError):
                ribs[rib] = None
            if ribs[rib] is None or len(ribs[rib]) < 3:
                raise MetadataError(f"{where}, image {index}: rib {rib} is not a polygon",
                                    expected="3 or more {'x': ..., 'y': ...} points, or 'None'",
                                    found=repr(pts)[:80], fix=_FIX)
        out.append((str(table["img"][index]), ribs))
    return out


def rib_masks(ribs: dict, shape: tuple[int, int]) -> np.ndarray:
    """``(height, width, 20)`` uint8, one 0/1 channel per rib in :data:`RIBS` order."""
    out = np.zeros((*shape, len(RIBS)), np.uint8)
    for k, rib in enumerate(RIBS):
        if ribs.get(rib):
            out[..., k] = polygon_mask([ribs[rib]], shape, where=rib)
    return out


def numbered_mask(masks: np.ndarray) -> np.ndarray:
    """``(height, width, 20)`` rib channels -> one label mask: per pixel the number (1-20) of the
    last rib in :data:`RIBS` order covering it, else 0."""
    covered = masks > 0
    last = len(RIBS) - 1 - np.argmax(covered[..., ::-1], axis=2)
    return np.where(covered.any(axis=2), last + 1, 0).astype(np.uint8)


# -- harmonizer -----------------------------------------------------------------------------------
class VinDrRibCXRHarmonizer(BaseHarmonizer):
    """VinDr-RibCXR: 245 images (196 train, 49 val), 20 rib polygons each."""

    spec = SPEC
    metadata_description = f"the VinDr-RibCXR mask table {FILES['train']}"

    def inputs(self, path: Path) -> Inputs:
        """The train table, the val table (beside it, in ``../val/`` or near the images) and the
        image folder, listed for PNGs."""
        root = self.base_image_dir
        val = find_optional((FILES["val"], f"val/{FILES['val']}"), path.parent,
                            path.parent.parent / "val", root)
        return Inputs(path, {"val": val},
                      {"images": (root if root is not None and root.is_dir() else None,
                                  (".png",))})

    def read(self, inputs: Inputs) -> dict:
        return read_split_files(inputs, ("train", "val"), FILES, what="a pandas columns-oriented "
                                "JSON: {'img': {index: path}, 'R1': {index: points}, ...}")

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        rows = []
        for split in ("train", "val"):
            if raw.get(split) is not None:
                rows += [(split, img, ribs) for img, ribs in
                         rib_polygons(raw[split], where=f"{source}, {FILES[split]}")]
        files = raw.get("files") or {}
        names = pd.Series([r[1].replace("\\", "/").rsplit("/", 1)[-1] for r in rows], dtype=object)
        stems = names.str.replace(r"\.[^.]+$", "", regex=True)
        df = pd.DataFrame({"patient_id": stems, "study_id": stems,
                           "image_path": pd.Series([files.get(n, r[1].lstrip("./"))
                                                    for n, r in zip(names, rows)], dtype=object),
                           "view_position": None, "report": None})
        df["split"] = pd.Series([SPLITS[r[0]] for r in rows], dtype=object)
        df["split_raw"] = pd.Series([r[0] for r in rows], dtype=object)
        df["n_ribs"] = pd.array([len(r[2]) for r in rows], dtype="Int64")
        df["ribs"] = pd.Series([r[2] for r in rows], dtype=object)
        df["boxes"] = pd.Series([[box_record(RIB_NAMES[k], None, *shape_box(p))
                                  for k, p in r[2].items()] for r in rows], dtype=object)
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class VinDrRibCXRDataset(ChannelMasks, BaseRadiologicalDataset):
        """VinDr-RibCXR; ``base_image_dir`` holds the PNGs (found by name). ``output_mask=True``
        gives ``mask`` (rib numbers 1-20) and ``masks`` (20 channels, :data:`RIBS` order)."""

        harmonizer_class = VinDrRibCXRHarmonizer

        def source_masks(self, index: int) -> np.ndarray:
            """Row ``index``'s ``(height, width, 20)`` rib masks at the image's size."""
            ribs = self.harmonized_df["ribs"].iat[index]
            if isinstance(ribs, str):  # a table read back from CSV holds the dict as text
                ribs = parse_literal(ribs) if ribs.strip() else {}
            return rib_masks(ribs or {}, self.source_size(index))

        def source_mask(self, index: int) -> np.ndarray:
            return numbered_mask(self.source_masks(index))

    return VinDrRibCXRDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["VinDrRibCXRHarmonizer", "VinDrRibCXRDataset"]
