"""TBX11K (Liu et al., CVPR 2020): 11,200 512 x 512 chest X-rays with tuberculosis boxes (COCO).

Source of truth: ``annotations/json/TBX11K_{train,val}.json`` -- COCO detection files:
``categories`` ``1 ActiveTuberculosis``, ``2 ObsoletePulmonaryTuberculosis``, ``3
PulmonaryTuberculosis`` (supercategory ``Tuberculosis``); ``images[]`` with ``id,
file_name, width, height, date_captured, license, coco_url, flickr_url`` (``file_name``
relative to ``imgs/``: ``tb/tb0005.png``, ``health/h0001.png``); ``annotations[]`` with ``id,
image_id, category_id, iscrowd, area, bbox [x, y, w, h]`` in pixels, ``width, height``.
The format is pinned on the torchxrayvision test fixture (a real 3-image excerpt of
``TBX11K_train.json``).

Harmonized: one row per entry of ``images`` (the COCO image list is the membership; healthy
images have no annotation). ``image_path`` is ``imgs/<file_name>`` under the release root
(``base_image_dir``). A category is 1 when the image has a box of it, else 0;
``Tuberculosis`` (the supercategory) is 1 when it has any box. Boxes are normalized to [0, 1]
by the image's ``width``/``height``, labelled with the category name. No patient ids are
published: ``patient_id`` is the image's path stem (``tb/tb0005``), so splits cannot group a
patient's images (TBX11K has about one image per patient). ``image_category`` is the folder
(``health``, ``sick``, ``tb``; only ``tb`` and ``health`` are confirmed on real files). The
split sizes in the spec (6,600 train, 1,800 val of 11,200) are the paper's, not checked here.

Trap: TBX11K contains Montgomery (138), Shenzhen (662), DA and DB images -- never train on one
of :mod:`radharmony.datasets.nlm_tb` and test on the other.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.boxes import box_record
from ..annotations.coco import coco_tables
from ..table.read_json import read_coco
from ..spec import DatasetSpec
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
CATEGORIES = ("ActiveTuberculosis", "ObsoletePulmonaryTuberculosis", "PulmonaryTuberculosis")
SUPERCATEGORY = "Tuberculosis"
LABELS = (*CATEGORIES, SUPERCATEGORY)
IMAGE_DIR = "imgs"
#: source label -> canonical findings (vocabulary ids) with their relation
LABEL_MAP = {
    "ActiveTuberculosis": (("tuberculosis", "narrower"),),
    "ObsoletePulmonaryTuberculosis": (("tuberculosis", "narrower"),),
    "PulmonaryTuberculosis": (("tuberculosis", "narrower"),),
    "Tuberculosis": (("tuberculosis", "exact"),),
}
ACCESS = ("TBX11K (github.com/yun-liu/Tuberculosis), CC BY-NC-SA 2.0 (non-commercial; "
          "includes the public-domain NLM Montgomery and Shenzhen sets)")
SPEC = DatasetSpec(
    column_types={"width": "Int64", "height": "Int64"},
    label_map=LABEL_MAP, key="tbx11k_train", title="TBX11K (train)",
    metadata_files=("annotations/json/TBX11K_train.json", "TBX11K_train.json"),
    label_cols=LABELS, extra_cols=("image_category", "width", "height", "boxes"),
    outputs=frozenset({"cls", "bbox"}), access=ACCESS,
    expected={"images": 6_600, "release_images": 11_200})
VAL_SPEC = replace(SPEC, key="tbx11k_val", title="TBX11K (val)",
                   metadata_files=("annotations/json/TBX11K_val.json", "TBX11K_val.json"),
                   expected={"images": 1_800, "release_images": 11_200})


# -- harmonizer -----------------------------------------------------------------------------------
class TBX11KHarmonizer(BaseHarmonizer):
    """TBX11K train split (``TBX11K_train.json``)."""

    spec = SPEC
    metadata_description = "the TBX11K COCO file annotations/json/TBX11K_train.json"

    def read(self, inputs: Inputs) -> dict:
        return read_coco(inputs.metadata, description=self.metadata_description)

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        images, _, per_image = coco_tables(raw, source=source)
        names = [str(im["file_name"]).lstrip("/") for im in images]
        stems = [n.rsplit(".", 1)[0] for n in names]
        df = pd.DataFrame({"patient_id": stems, "study_id": stems,
                           "image_path": [f"{IMAGE_DIR}/{n}" for n in names],
                           "view_position": None, "report": None})
        hot = np.zeros((len(images), len(LABELS)), np.float32)
        boxes = []
        for r, im in enumerate(images):
            w, h = float(im["width"]), float(im["height"])
            recs = []
            for a in per_image[im["id"]]:
                if a["category"] in CATEGORIES:
                    hot[r, CATEGORIES.index(a["category"])] = 1.0
                hot[r, -1] = 1.0
                recs.append(box_record(a["category"], None, a["x_min"] / w, a["y_min"] / h,
                                       a["x_max"] / w, a["y_max"] / h))
            boxes.append(recs)
        df[list(LABELS)] = hot
        df["image_category"] = [n.split("/")[0] if "/" in n else None for n in names]
        df["width"] = pd.array([int(im["width"]) for im in images], dtype="Int64")
        df["height"] = pd.array([int(im["height"]) for im in images], dtype="Int64")
        df["boxes"] = boxes
        return df


class TBX11KValHarmonizer(TBX11KHarmonizer):
    """TBX11K val split (``TBX11K_val.json``)."""

    spec = VAL_SPEC
    metadata_description = "the TBX11K COCO file annotations/json/TBX11K_val.json"


# -- datasets -------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class TBX11KDataset(BaseRadiologicalDataset):
        """TBX11K train; ``base_image_dir`` is the release root (holding ``imgs/`` and
        ``annotations/json/``)."""

        harmonizer_class = TBX11KHarmonizer

    class TBX11KValDataset(BaseRadiologicalDataset):
        """TBX11K val; ``base_image_dir`` is the release root."""

        harmonizer_class = TBX11KValHarmonizer

    return TBX11KDataset, TBX11KValDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["TBX11KHarmonizer", "TBX11KValHarmonizer", "TBX11KDataset", "TBX11KValDataset"]
