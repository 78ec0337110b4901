"""NIH ChestX-ray14 and the Google expert relabelling of part of it (8-bit 1024x1024 PNGs).

Source of truth: ``Data_Entry_2017_v2020.csv`` -- one row per image, ``Finding Labels`` joined
by ``|``. Its header writes two columns over four fields (``OriginalImage[Width,Height]``,
``OriginalImagePixelSpacing[x,y]``); the 2017 release ends each line with a comma; the sex
column is ``Patient Gender`` or ``Patient Sex``. ``Follow-up #`` disagrees with the file-name
suffix in 24,106 rows: the file name (``<patient>_<follow-up>.png``) is taken as truth for
``patient_id``, ``study_id`` (each image is its own visit) and ``follow_up``.

``BBox_List_2017.csv`` (984 boxes on 880 images, pixels of the 1024x1024 PNG) has a 9-field
header over 6-field rows and says ``Infiltrate`` for the ``Infiltration`` label; boxes are
stored normalized to [0, 1]. The official split lists ``train_val_list.txt`` /
``test_list.txt`` ship with the images (not with the torchxrayvision wheel); when found beside
the table they fill ``split`` (``train_val`` / ``test``), else ``split`` is missing.

``google2019_nih-chest-xray-labels.csv`` (CRLF line endings): the same columns plus four
adjudicated expert labels (``YES`` / ``NO``) and ``Set Id`` (``val`` / ``test``).
``base_image_dir`` for both keys is the ``images/`` folder all twelve archives extract into,
or the Kaggle mirror's root with its ``images_001/images/`` ... ``images_012/images/`` nesting
(found by listing the PNGs when ``images_NNN`` folders are present; ``sample_id`` is the same
either way).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_side
from ..table.read_csv import check_cells, read_csv_table
from ..annotations.labels import decode_cells, multi_hot
from ..spec import DatasetSpec, Identity
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("Image Index", "Finding Labels", "Follow-up #", "Patient ID", "Patient Age",
           "Patient Gender", "View Position", "OriginalImage[Width,Height]",
           "OriginalImagePixelSpacing[x,y]")
ALIASES = {"Patient Gender": ("Patient Sex",)}
BOX_COLUMNS = ("Image Index", "Finding Label", "Bbox [x,y,w,h]")
GOOGLE_LABELS = ("Fracture", "Pneumothorax", "Airspace opacity", "Nodule or mass")
GOOGLE_COLUMNS = COLUMNS + GOOGLE_LABELS + ("Set Id",)
LABELS = ("Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule",
          "Pneumonia", "Pneumothorax", "Consolidation", "Edema", "Emphysema", "Fibrosis",
          "Pleural_Thickening", "Hernia")
#: label -> canonical findings (radharmony.vocabulary); NIH Hernia is in practice hiatal hernia
LABEL_MAP = {
    "Atelectasis": (("atelectasis", "exact"),), "Cardiomegaly": (("cardiomegaly", "exact"),),
    "Effusion": (("pleural_effusion", "exact"),), "Infiltration": (("infiltration", "exact"),),
    "Mass": (("mass", "exact"),), "Nodule": (("nodule", "exact"),),
    "Pneumonia": (("pneumonia", "exact"),), "Pneumothorax": (("pneumothorax", "exact"),),
    "Consolidation": (("consolidation", "exact"),), "Edema": (("edema", "exact"),),
    "Emphysema": (("emphysema", "exact"),), "Fibrosis": (("fibrosis", "exact"),),
    "Pleural_Thickening": (("pleural_thickening", "exact"),),
    "Hernia": (("hiatal_hernia", "approximate"),),
}
#: Google's airspace opacity implies a lung opacity and covers consolidation; its "Nodule or
#: mass" is the compound (1 leaves nodule and mass unknown, 0 makes both 0)
GOOGLE_LABEL_MAP = {
    "Fracture": (("fracture", "exact"),), "Pneumothorax": (("pneumothorax", "exact"),),
    "Airspace opacity": (("lung_opacity", "narrower"), ("consolidation", "broader")),
    "Nodule or mass": (("nodule_or_mass", "exact"),),
}
NO_FINDING = "No Finding"
#: published per-label image counts of Data_Entry_2017_v2020.csv
LABEL_COUNTS = {"Atelectasis": 11_559, "Cardiomegaly": 2_776, "Effusion": 13_317,
                "Infiltration": 19_894, "Mass": 5_782, "Nodule": 6_331, "Pneumonia": 1_431,
                "Pneumothorax": 5_302, "Consolidation": 4_667, "Edema": 2_303,
                "Emphysema": 2_516, "Fibrosis": 1_686, "Pleural_Thickening": 3_385,
                "Hernia": 227}
BOX_LABELS = {"Infiltrate": "Infiltration"}  # the box file's spelling -> the label's
PNG_SIDE = 1024.0  # every released PNG is 1024x1024; box pixels are divided by it
SPLIT_FILES = {"train_val": "train_val_list.txt", "test": "test_list.txt"}
SPLIT_MAP = {"train_val": "train", "test": "test"}  # NIH's name -> split
BOX_FILES = ("BBox_List_2017.csv", "BBox_List_2017.csv.gz")
GOOGLE_VALUES = {"YES": 1.0, "NO": 0.0}
GOOGLE_SETS = {"val": "valid", "test": "test"}  # Set Id -> split
VIEW_MAP = {"PA": "PA", "AP": "AP"}
EXTRA_COLS = ("follow_up", "patient_age", "patient_sex", "original_width", "original_height",
              "pixel_spacing_x", "pixel_spacing_y", "split", "split_raw")
COLUMN_TYPES = {"follow_up": "Int64", "patient_age": "Int64", "original_width": "Int64",
                "original_height": "Int64", "pixel_spacing_x": "float64",
                "pixel_spacing_y": "float64"}
ZERO_PAD = {"patient_id": 8}  # 00000001
ACCESS = ("NIH Clinical Center, public (nihcc.app.box.com/v/ChestXray-NIHCC); cite Wang et al., "
          "CVPR 2017; Google labels: Majkowska et al., Radiology 2020, CC BY 4.0")

NIH_SPEC = DatasetSpec(
    identity=Identity("nih_cxr14"),
    key="nih_cxr14", title="NIH ChestX-ray14",
    age_col="patient_age", sex_col="patient_sex",
    metadata_files=("Data_Entry_2017_v2020.csv", "Data_Entry_2017_v2020.csv.gz",
                    "Data_Entry_2017.csv"),
    label_cols=LABELS, extra_cols=EXTRA_COLS + ("boxes",), outputs=frozenset({"cls", "bbox"}),
    id_col="study_id",  # the file stem, whatever folder the PNG is in
    view_map=VIEW_MAP, access=ACCESS, column_types=COLUMN_TYPES, zero_pad=ZERO_PAD,
    label_map=LABEL_MAP,
    expected={"images": 112_120, "studies": 112_120, "patients": 30_805, "boxes": 984,
              "box_images": 880, "train_val": 86_524, "test": 25_596})
GOOGLE_SPEC = DatasetSpec(
    identity=Identity("nih_cxr14"),
    key="nih_cxr14_google", title="NIH ChestX-ray14, Google expert labels (2019)",
    age_col="patient_age", sex_col="patient_sex",
    metadata_files=("google2019_nih-chest-xray-labels.csv",
                    "google2019_nih-chest-xray-labels.csv.gz"),
    label_cols=GOOGLE_LABELS, extra_cols=EXTRA_COLS, outputs=frozenset({"cls"}),
    id_col="study_id",
    view_map=VIEW_MAP, access=ACCESS, column_types=COLUMN_TYPES, zero_pad=ZERO_PAD,
    label_map=GOOGLE_LABEL_MAP,
    expected={"images": 4_376, "studies": 4_376, "patients": 1_695, "val": 2_414,
              "test": 1_962})


# -- pure helpers ---------------------------------------------------------------------------------
def _number(col: pd.Series, kind: str = "Int64") -> pd.Series:
    """Numeric column from text; ``"058Y"``-style ages keep their digits."""
    try:
        return pd.to_numeric(col).astype(kind)
    except (ValueError, TypeError):
        return pd.to_numeric(col.str.extract(r"^\s*(\d+)", expand=False)).astype(kind)


KAGGLE_FOLDER = re.compile(r"images_\d{3}")  # the Kaggle mirror's images_001 ... images_012


def image_folders(root: Path | None) -> dict:
    """The ``images`` folder input: the image root, listed for PNGs, when it holds the Kaggle
    mirror's ``images_NNN/`` folders; absent for the flat ``images/`` layout."""
    nested = root is not None and root.is_dir() and any(
        e.is_dir() and KAGGLE_FOLDER.fullmatch(e.name) for e in os.scandir(root))
    return {"images": (root if nested else None, (".png",))}


def listed_files(inputs: Inputs) -> dict[str, str] | None:
    """File name -> relative path of every listed PNG (None for the flat layout)."""
    return inputs.by_name("images")


def nih_table(e: pd.DataFrame, *, source: str, files: dict | None = None) -> pd.DataFrame:
    """The columns both NIH tables share, from the raw text columns."""
    name = e["Image Index"]
    check_cells(name.str.fullmatch(r"\d+_\d+\.png"), name, source=source,
                what="Image Index is not <patient>_<follow-up>.png",
                expected="e.g. 00000001_000.png")
    stem = name.str.slice(0, -4)
    patient = stem.str.replace(r"_\d+$", "", regex=True)
    listed = pd.to_numeric(e["Patient ID"], errors="coerce")
    wrong = int((listed != patient.astype(np.int64)).sum())
    if wrong:
        warnings.warn(f"{source}: Patient ID differs from the file-name prefix in {wrong} rows; "
                      "the file name is used", UserWarning, stacklevel=3)
    return pd.DataFrame({
        "patient_id": patient, "study_id": stem,
        "image_path": name if files is None else name.map(lambda n: files.get(n, n)),
        "view_position": e["View Position"], "report": None,
        "follow_up": stem.str.replace(r"^\d+_", "", regex=True).astype(np.int64),
        "patient_age": _number(e["Patient Age"]),
        "patient_sex": e["Patient Gender"],
        "original_width": _number(e["OriginalImage[Width]"]),
        "original_height": _number(e["OriginalImage[Height]"]),
        "pixel_spacing_x": _number(e["OriginalImagePixelSpacing[x]"], "float64"),
        "pixel_spacing_y": _number(e["OriginalImagePixelSpacing[y]"], "float64")})


def box_records(b: pd.DataFrame, *, source: str) -> dict[str, list[dict]]:
    """Image name -> its boxes (normalized xyxy, label spelled as in ``LABELS``)."""
    label = b["Finding Label"].replace(BOX_LABELS)
    check_cells(label.isin(LABELS), b["Finding Label"], source=f"{source} (boxes)",
                what="unknown Finding Label", expected=f"one of {sorted({*LABELS, *BOX_LABELS})}",
                fix="pass the released BBox_List_2017.csv")
    x, y, w, h = (pd.to_numeric(b[f"Bbox [{k}]"]) / PNG_SIDE for k in "xywh")
    recs = pd.DataFrame({"label": label, "annotator": None, "x_min": x, "y_min": y,
                         "x_max": x + w, "y_max": y + h}).to_dict("records")
    out: dict[str, list[dict]] = {}
    for name, rec in zip(b["Image Index"], recs):
        out.setdefault(name, []).append(rec)
    return out


# -- harmonizers ----------------------------------------------------------------------------------
class NIHChestXray14Harmonizer(BaseHarmonizer):
    """NIH ChestX-ray14: 112,120 images, 30,805 patients, 14 labels, 984 boxes on 880 images."""
    spec = NIH_SPEC
    metadata_description = "the NIH ChestX-ray14 table Data_Entry_2017_v2020.csv"

    def inputs(self, path: Path) -> Inputs:
        """The entry table, the box list (beside it or near the images) and the official split
        lists beside it."""
        box, looked = find_side(BOX_FILES, path.parent, self.base_image_dir)
        files = {"boxes": box}
        for split, name in SPLIT_FILES.items():
            files[split] = path.parent / name if (path.parent / name).is_file() else None
        return Inputs(path, files, image_folders(self.base_image_dir),
                      looked={"boxes": looked})

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        raw = {"entries": read_csv_table(path, COLUMNS, description=self.metadata_description,
                                         aliases=ALIASES), "boxes": None, "splits": {},
               "files": listed_files(inputs)}
        box_file = inputs.file("boxes")
        if box_file is None:
            warnings.warn(f"No {BOX_FILES[0]} beside {path} or near base_image_dir: the table "
                          "has no boxes (output_bbox gives empty boxes)", UserWarning,
                          stacklevel=3)
        else:
            raw["boxes"] = read_csv_table(box_file, BOX_COLUMNS,
                                          description="the NIH box list BBox_List_2017.csv")
        for split in SPLIT_FILES:
            if inputs.file(split) is not None:
                raw["splits"][split] = inputs.file(split).read_text().split()
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        e = raw["entries"]
        df = nih_table(e, source=source, files=raw.get("files"))
        labels, _ = multi_hot(e["Finding Labels"], lambda s: s.split("|"),
                              {k: (k,) for k in LABELS}, vocabulary=(*LABELS, NO_FINDING),
                              source=source, column="Finding Labels")
        df[list(LABELS)] = labels
        names = e["Image Index"].tolist()
        which = {n: s for s, listed in raw.get("splits", {}).items() for n in listed}
        df["split_raw"] = pd.Series([which.get(n) for n in names], dtype=object) if which \
            else None
        df["split"] = df["split_raw"].map(SPLIT_MAP) if which else None
        boxes = {} if raw.get("boxes") is None else box_records(raw["boxes"], source=source)
        stray = set(boxes).difference(names)
        if stray:
            warnings.warn(f"{source}: {len(stray)} boxed images are not in the table and were "
                          f"dropped, e.g. {sorted(stray)[0]}", UserWarning, stacklevel=2)
        df["boxes"] = [boxes.get(n, []) for n in names]
        return df


class NIHGoogleHarmonizer(BaseHarmonizer):
    """Google's expert labels on 4,376 NIH images: validation 2,414, test 1,962."""
    spec = GOOGLE_SPEC
    metadata_description = ("the Google NIH expert-label table "
                            "google2019_nih-chest-xray-labels.csv")

    def inputs(self, path: Path) -> Inputs:
        """The label table and, for the Kaggle mirror's nesting, the listed image folder."""
        return Inputs(path, folders=image_folders(self.base_image_dir))

    def read(self, inputs: Inputs) -> pd.DataFrame | dict:
        """The table (as rows, so faults are located by row); with the Kaggle nesting,
        ``{"entries": table, "files": name -> relative path}``."""
        table = read_csv_table(inputs.metadata, GOOGLE_COLUMNS,
                               description=self.metadata_description, aliases=ALIASES)
        files = listed_files(inputs)
        return table if files is None else {"entries": table, "files": files}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        files = raw.get("files") if isinstance(raw, dict) else None
        raw = raw["entries"] if isinstance(raw, dict) else raw
        df = nih_table(raw, source=source, files=files)
        df[list(GOOGLE_LABELS)] = decode_cells(raw[list(GOOGLE_LABELS)], GOOGLE_VALUES,
                                               source=source)
        check_cells(raw["Set Id"].isin(list(GOOGLE_SETS)), raw["Set Id"], source=source,
                    what="unexpected Set Id", expected=f"one of {sorted(GOOGLE_SETS)}")
        df["split"] = raw["Set Id"].map(GOOGLE_SETS)
        df["split_raw"] = raw["Set Id"]
        return df


# -- thin dataset classes --------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class NIHChestXray14Dataset(BaseRadiologicalDataset):
        """NIH ChestX-ray14; ``base_image_dir`` is the ``images/`` folder. ``output_bbox`` gives the
        984 expert boxes (images without boxes get none)."""
        harmonizer_class = NIHChestXray14Harmonizer

    class NIHGoogleDataset(BaseRadiologicalDataset):
        """The 4,376 NIH images Google relabelled; ``base_image_dir`` is NIH's ``images/``
        folder."""
        harmonizer_class = NIHGoogleHarmonizer

    return NIHChestXray14Dataset, NIHGoogleDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["NIHChestXray14Harmonizer", "NIHChestXray14Dataset", "NIHGoogleHarmonizer",
           "NIHGoogleDataset"]
