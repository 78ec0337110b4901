"""Object-CXR (MIDL 2020 challenge, JF Healthcare): 10,000 JPEGs from about 300 township
hospitals in China, half with foreign objects drawn as rectangles, ellipses or polygons.

Source of truth: ``train.csv`` (8,000 images) and ``dev.csv`` (1,000), columns
``image_name,annotation``. ``annotation`` holds the image's shapes separated by ``;``, each
``<type> <coordinates>``: type ``0`` rectangle and ``1`` ellipse give its bounding box ``x1 y1
x2 y2``, type ``2`` polygon a point sequence ``x1 y1 ... xn yn``; pixels from the upper-left
corner, y downwards. An empty annotation means no foreign object. Support devices were not
annotated (the challenge excluded them). The images come as ``train.zip``/``dev.zip``: extract
them so that ``train/<image_name>`` and ``dev/<image_name>`` exist under the release root.
The 1,000 test images' labels were not released.

Harmonized: one row per CSV row, ``image_path`` ``<split>/<image name>`` (a leading folder in
``image_name``, as in the challenge text's ``/path/#####.jpg``, is dropped); ``Foreign object``
1 when any shape is given; ``shapes`` keeps every shape (``{"type": "rectangle" | "ellipse" |
"polygon", "points": [[x, y], ...]}``); ``boxes`` their bounding boxes in source pixels
(``box_units="pixel"``: the CSV gives no image size). ``output_mask=True`` rasterizes all
shapes at the image's size (read from its header). No patient ids are published: the image is
the group. Format from the challenge's own description; no real CSV was available here.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.boxes import box_record
from ..annotations.coco import ellipse_mask, polygon_mask, rectangle_mask, shape_box
from ..errors import ImageReadError, MetadataError
from ..annotations.masks import channels_output, merge_masks
from ..cells import parse_literal
from ..spec import DatasetSpec
from ..table.read_csv import read_table
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("image_name", "annotation")
SHAPE_TYPES = {"0": "rectangle", "1": "ellipse", "2": "polygon"}
LABEL = "Foreign object"
LABEL_MAP = {LABEL: (("foreign_object", "exact"),)}
ACCESS = ("Object-CXR challenge release (JF Healthcare, MIDL 2020; academictorrents.com "
          "fdc91f11d7010f7259a05403fc9d00079a09f5d5); research use")
SPEC = DatasetSpec(
    label_map=LABEL_MAP, key="object_cxr_train", title="Object-CXR (train)", metadata_files=("train.csv",),
    label_cols=(LABEL,), extra_cols=("shapes", "boxes"),
    column_types={"shapes": "json"}, zero_pad={"patient_id": 5, "study_id": 5}, outputs=frozenset({"cls", "bbox",
                                                                              "mask"}),
    access=ACCESS, box_units="pixel", expected={"images": 8_000, "positive": 4_000})
DEV_SPEC = replace(SPEC, key="object_cxr_dev", title="Object-CXR (dev)",
                   metadata_files=("dev.csv",), expected={"images": 1_000, "positive": 500})


def parse_annotation(text, *, where: str) -> list[dict]:
    """``"0 x1 y1 x2 y2;2 x1 y1 ..."`` -> ``[{"type", "points"}]`` (empty or missing: [])."""
    if not isinstance(text, str) or not text.strip():
        return []
    shapes = []
    for part in text.split(";"):
        tokens = part.split()
        if not tokens:
            continue
        kind = SHAPE_TYPES.get(tokens[0])
        try:
            nums = [float(t) for t in tokens[1:]]
        except ValueError:
            nums = None
        ok = kind is not None and nums is not None and len(nums) % 2 == 0 and (
            len(nums) == 4 if kind != "polygon" else len(nums) >= 6)
        if not ok:
            raise MetadataError(f"{where}: annotation shape {part.strip()!r} cannot be read",
                                expected="'0 x1 y1 x2 y2' (rectangle), '1 x1 y1 x2 y2' "
                                "(ellipse) or '2 x1 y1 ... xn yn' (polygon, 3+ points)",
                                found=repr(part.strip()[:80]),
                                fix="pass the challenge's CSV as released")
        shapes.append({"type": kind, "points": [[nums[i], nums[i + 1]]
                                                for i in range(0, len(nums), 2)]})
    return shapes


def shapes_mask(shapes: list[dict], shape: tuple[int, int]) -> np.ndarray:
    """The union of the shapes as a uint8 mask of ``shape`` (height, width)."""
    parts = []
    for s in shapes:
        if s["type"] == "polygon":
            parts.append(polygon_mask([s["points"]], shape))
        else:
            (x0, y0), (x1, y1) = s["points"]
            draw = ellipse_mask if s["type"] == "ellipse" else rectangle_mask
            parts.append(draw(x0, y0, x1, y1, shape))
    return merge_masks(parts, shape=shape)


# -- harmonizer -----------------------------------------------------------------------------------
class ObjectCXRHarmonizer(BaseHarmonizer):
    """Object-CXR train: 8,000 images, half with foreign objects."""

    spec = SPEC
    split = "train"
    metadata_description = "the Object-CXR table train.csv"

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_table(inputs.metadata, description=self.metadata_description, columns=COLUMNS,
                          dtype=str, keep_default_na=False)

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        names = raw["image_name"].str.strip().str.replace(r"^.*/", "", regex=True)
        stems = names.str.replace(r"\.[^.]+$", "", regex=True)
        shapes = [parse_annotation(a, where=f"{source}, row {i} ({n})")
                  for i, (a, n) in enumerate(zip(raw["annotation"], names))]
        boxes = [[box_record(LABEL, None, *shape_box(s["points"])) for s in image]
                 for image in shapes]
        return pd.DataFrame({"patient_id": stems.to_numpy(object),
                             "study_id": stems.to_numpy(object),
                             "image_path": (cls.split + "/" + names).to_numpy(object),
                             "view_position": None, "report": None,
                             LABEL: np.array([float(bool(s)) for s in shapes], np.float32),
                             "shapes": shapes, "boxes": boxes})


class ObjectCXRDevHarmonizer(ObjectCXRHarmonizer):
    """Object-CXR dev: 1,000 images."""

    spec = DEV_SPEC
    split = "dev"
    metadata_description = "the Object-CXR table dev.csv"


# -- datasets -------------------------------------------------------------------------------------
class ShapeMasks:
    """``source_mask`` for a table whose ``shapes`` column holds each image's shapes
    (:func:`parse_annotation`'s records): their union at the image's size, read from its
    header (:meth:`source_size`)."""

    def source_size(self, index: int) -> tuple[int, int]:
        """Row ``index``'s image (height, width), read from the file's header."""
        from ..imaging.read import header_size, sniff  # the image stack: the torch side's

        path = self.image_file(index)
        try:
            with open(path, "rb") as fh:
                head = fh.read(132)
            return tuple(header_size(path, sniff(head), head)[:2])
        except (OSError, ValueError) as exc:
            raise ImageReadError(f"Image {path}: its size cannot be read for the mask",
                                 expected="a readable JPEG, PNG or DICOM", found=str(exc),
                                 fix="extract the release's image archives into "
                                     "base_image_dir") from None

    def source_shapes(self, index: int) -> list[dict]:
        """Row ``index``'s ``shapes`` cell as a list."""
        shapes = self.harmonized_df["shapes"].iat[index]
        if isinstance(shapes, str):  # a table read back from CSV holds the list as text
            shapes = parse_literal(shapes) if shapes.strip() else []
        return list(shapes) if shapes is not None else []

    def source_mask(self, index: int) -> np.ndarray:
        return shapes_mask(self.source_shapes(index), self.source_size(index))


class ChannelMasks(ShapeMasks):
    """Beside ``mask``, a sample's ``masks`` (C, S, S): one 0/1 channel per structure, from
    ``source_masks(index)`` (``(height, width, C)`` at the source size) through the letterbox."""

    def source_masks(self, index: int) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} declares no source_masks")

    def add_outputs(self, index: int, sample: dict, box) -> None:
        super().add_outputs(index, sample, box)
        if "mask" in sample:
            sample["masks"] = channels_output(self.source_masks(index), box)


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class ObjectCXRDataset(ShapeMasks, BaseRadiologicalDataset):
        """Object-CXR train; ``base_image_dir`` is the release root holding ``train.csv`` and the
        extracted ``train/`` folder."""

        harmonizer_class = ObjectCXRHarmonizer

    class ObjectCXRDevDataset(ShapeMasks, BaseRadiologicalDataset):
        """Object-CXR dev; ``base_image_dir`` is the release root (``dev.csv``, ``dev/``)."""

        harmonizer_class = ObjectCXRDevHarmonizer

    return ObjectCXRDataset, ObjectCXRDevDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["ObjectCXRHarmonizer", "ObjectCXRDevHarmonizer", "ObjectCXRDataset",
           "ObjectCXRDevDataset"]
