"""RSNA Pneumonia Detection Challenge (2018, stage 2 training set): 26,684 DICOMs with boxes.

Source of truth: ``stage_2_train_labels.csv`` -- one row per box (``patientId, x, y, width,
height, Target``), a single row with empty box fields for an image without one. Read beside it
when present: ``stage_2_detailed_class_info.csv`` (``patientId, class``), the DICOM header
table torchxrayvision extracted (``kaggle_stage_2_train_images_dicom_headers.csv.gz``: view
position, sex, age) and RSNA's ``pneumonia-challenge-dataset-mappings_2018.json``, which maps
each image to its NIH ChestX-ray14 original.

Patients, honestly: ``patientId`` names an *image* (one DICOM each), and the DICOM header's
``PatientID`` equals it, so the challenge files carry no patient grouping. The images come from
NIH ChestX-ray14, where one patient often has several; only RSNA's mapping file restores them
(``patient_id`` = the NIH patient, the 8 digits before ``_`` in its ``img_id``). Without the
mapping, ``patient_id`` is the image id and a warning says that patient-grouped splits may
then put one patient's images on both sides.

Harmonized: one row per image (``<patientId>.dcm`` in ``stage_2_train_images/``; a copy
converted to ``<patientId>.png`` / ``.jpg`` is found by listing the folder), label
``Pneumonia`` = ``Target``, boxes in the DICOM's pixels (1024 x 1024), labelled ``Pneumonia``.
The detailed class (``Lung Opacity``, ``No Lung Opacity / Not Normal``, ``Normal``) gives two
more labels: ``Lung Opacity`` 1 / NaN / 0 and ``No Finding`` 0 / 0 / 1 for those classes, so a
Normal image is a certain negative (canonical ``lung_opacity`` and its descendants such as
``pneumonia`` 0, ``no_finding`` 1), while a "Not Normal" one stays unknown for opacities (it
may hold opacities not suspicious for pneumonia). Without the class file: ``Lung Opacity`` 1
where ``Target`` is 1, every other cell NaN.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import MetadataError
from ..spec import DatasetSpec, Identity
from ..table.read_json import read_json_file
from ..table.locate import find_optional
from ..table.read_csv import lists_by, numeric_columns, read_table, records, require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("patientId", "x", "y", "width", "height", "Target")
CLASS_INFO = ("stage_2_detailed_class_info.csv",)
HEADERS = ("kaggle_stage_2_train_images_dicom_headers.csv.gz",
           "stage_2_train_images_dicom_headers.csv")
HEADER_COLUMNS = ("PatientID", "ViewPosition", "PatientSex", "PatientAge")
MAPPING = ("pneumonia-challenge-dataset-mappings_2018.json",)
LABEL = "Pneumonia"
#: the detailed classes -> (Lung Opacity, No Finding) label values
CLASS_LABELS = {"Lung Opacity": (1.0, 0.0), "No Lung Opacity / Not Normal": (np.nan, 0.0),
                "Normal": (0.0, 1.0)}
LABELS = (LABEL, "Lung Opacity", "No Finding")
#: label -> canonical findings (radharmony.vocabulary): Target marks an opacity suspicious for
#: pneumonia; a 0 ("Normal" or "No Lung Opacity / Not Normal") may still hold other opacities,
#: so only the detailed class "Normal" says lung opacity (and pneumonia, its descendant) 0
LABEL_MAP = {LABEL: (("lung_opacity", "narrower"), ("pneumonia", "approximate")),
             "Lung Opacity": (("lung_opacity", "exact"),),
             "No Finding": (("no_finding", "exact"),)}
#: image files looked for, best first: the release's DICOMs, then converted copies
IMAGE_SUFFIXES = (".dcm", ".png", ".jpg", ".jpeg")
SPEC = DatasetSpec(
    identity=Identity("nih_cxr14", link="column", column="nih_image",  # the mapping file
                      pattern=r"^(\d{8})_"),
    key="rsna_pneumonia", title="RSNA Pneumonia Detection Challenge (stage 2 train)",
    metadata_files=("stage_2_train_labels.csv", "kaggle_stage_2_train_labels.csv.zip"),
    label_cols=LABELS, label_map=LABEL_MAP,
    age_col="patient_age", sex_col="patient_sex",
    extra_cols=("detailed_class", "patient_sex", "patient_age", "nih_image"),
    outputs=frozenset({"cls", "bbox"}), view_map={"PA": "PA", "AP": "AP"},
    expected={"images": 26_684, "studies": 26_684, "positive": 6_012, "boxes": 9_555,
              "normal": 8_851, "not_normal": 11_821,
              "rows": 30_227, "patients_without_mapping": 26_684},
    access=("Kaggle 'rsna-pneumonia-detection-challenge' (competition rules); NIH-derived "
            "images; mapping file from rsna.org (RSNA Pneumonia Detection Challenge 2018)"),
    box_units="pixel", column_types={"patient_age": "Int64"},
    zero_pad={"patient_id": 8})  # the NIH patient (00000013) when the mapping is present


# -- harmonizer -----------------------------------------------------------------------------------
class RSNAPneumoniaHarmonizer(BaseHarmonizer):
    """RSNA Pneumonia stage 2 train: 26,684 images, 6,012 positive, 9,555 boxes."""

    spec = SPEC
    metadata_description = "the RSNA Pneumonia labels (stage_2_train_labels.csv)"

    def inputs(self, path: Path) -> Inputs:
        """The label table and, beside it or near the images, the class table, the DICOM
        header table and the NIH mapping."""
        near = (path.parent, self.base_image_dir)
        root = self.base_image_dir
        return Inputs(path, {"classes": find_optional(CLASS_INFO, *near),
                             "headers": find_optional(HEADERS, *near),
                             "mapping": find_optional(MAPPING, *near)},
                      {"images": (root if root is not None and root.is_dir() else None,
                                  IMAGE_SUFFIXES)})

    def read(self, inputs: Inputs) -> dict:
        raw = {"labels": read_table(inputs.metadata, description=self.metadata_description,
                                    columns=COLUMNS, dtype={"patientId": str}),
               "classes": None, "headers": None, "mapping": None, "files": None}
        if inputs.folders["images"][0] is not None:
            raw["files"] = image_files(inputs.listing("images"))
        if (p := inputs.file("classes")) is not None:
            raw["classes"] = read_table(p, description="stage_2_detailed_class_info.csv",
                                        columns=("patientId", "class"))
        if (p := inputs.file("headers")) is not None:
            raw["headers"] = read_table(p, description="the RSNA DICOM header table",
                                        columns=HEADER_COLUMNS, dtype={"PatientID": str})
        if (p := inputs.file("mapping")) is not None:
            raw["mapping"] = read_json_file(p, what="RSNA's list of {img_id, subset_img_id, "
                                            "...} objects")
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        labels = raw["labels"]
        require_columns(labels, COLUMNS, source=source, description="the RSNA labels")
        labels = labels.dropna(subset=["patientId"])
        labels = labels.assign(**numeric_columns(labels, COLUMNS[1:], source=source))
        ids = pd.Index(pd.unique(labels["patientId"]))
        target = labels.groupby("patientId")["Target"].max().reindex(ids)
        files = raw.get("files") or {}
        paths = [files.get(i, f"{i}.dcm") for i in ids]
        df = pd.DataFrame({"patient_id": ids, "study_id": ids,
                           "image_path": np.asarray(paths, dtype=object),
                           "view_position": None, "report": None,
                           LABEL: target.to_numpy(np.float32)})
        df["detailed_class"] = _lookup(raw.get("classes"), ids, "patientId", "class")
        df["Lung Opacity"], df["No Finding"] = _class_labels(df["detailed_class"], df[LABEL],
                                                             source)
        headers = raw.get("headers")
        df["view_position"] = _lookup(headers, ids, "PatientID", "ViewPosition")
        df["patient_sex"] = _lookup(headers, ids, "PatientID", "PatientSex")
        df["patient_age"] = pd.array(_lookup(headers, ids, "PatientID", "PatientAge"),
                                     dtype="Int64")
        df["nih_image"] = None
        if raw.get("mapping"):
            df["nih_image"] = _mapping_images(raw["mapping"], ids, source)
            known = df["nih_image"].notna().to_numpy()
            df.loc[known, "patient_id"] = df.loc[known, "nih_image"].str.split("_").str[0]
        if not df["nih_image"].notna().all():
            warnings.warn(f"{source}: {int(df['nih_image'].isna().sum())} RSNA images have no "
                          f"NIH original in {MAPPING[0]}; their patient_id is the image id, so "
                          f"patient-grouped splits cannot keep a patient's images together. Put "
                          f"{MAPPING[0]} (rsna.org) beside the labels to fix", stacklevel=2)
        boxes = labels.dropna(subset=["x", "y", "width", "height"])
        x, y = boxes["x"].to_numpy(float), boxes["y"].to_numpy(float)
        recs = records(label=[LABEL] * len(x), annotator=[None] * len(x), x_min=x, y_min=y,
                       x_max=x + boxes["width"].to_numpy(float),
                       y_max=y + boxes["height"].to_numpy(float))
        df["boxes"] = lists_by(ids, boxes["patientId"], recs)
        return df


def _class_labels(classes: pd.Series, target: pd.Series, source: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(Lung Opacity, No Finding)`` from the detailed class (see :data:`CLASS_LABELS`);
    without one, Lung Opacity is 1 where ``Target`` is 1 and everything else NaN."""
    known = classes.notna().to_numpy()
    odd = sorted(set(classes[known]) - set(CLASS_LABELS))
    if odd:
        raise MetadataError(f"{source}: unknown class in {CLASS_INFO[0]}",
                            expected=f"one of {list(CLASS_LABELS)}", found=repr(odd[:3]),
                            fix="check the file is the challenge's detailed class table")
    opacity = np.where(target.to_numpy(np.float32) == 1.0, 1.0, np.nan).astype(np.float32)
    normal = np.full(len(classes), np.nan, dtype=np.float32)
    for name, (lo, nf) in CLASS_LABELS.items():
        rows = known & (classes.to_numpy(dtype=object) == name)
        opacity[rows], normal[rows] = lo, nf
    return opacity, normal


def image_files(listing: list[str]) -> dict[str, str]:
    """Image id -> relative path of its file, the best suffix of :data:`IMAGE_SUFFIXES`."""
    best: dict[str, tuple[int, str]] = {}
    for rel in listing:
        stem, dot, ext = rel.rsplit("/", 1)[-1].rpartition(".")
        rank = IMAGE_SUFFIXES.index("." + ext.lower()) if dot and \
            "." + ext.lower() in IMAGE_SUFFIXES else None
        if rank is not None and (stem not in best or rank < best[stem][0]):
            best[stem] = (rank, rel)
    return {stem: rel for stem, (_, rel) in best.items()}


def _lookup(table: pd.DataFrame | None, ids: pd.Index, key: str, column: str) -> np.ndarray:
    """``table[column]`` for each id (first row per key), None where absent."""
    if table is None:
        return np.full(len(ids), None, dtype=object)
    first = table.drop_duplicates(subset=key).set_index(key)[column]
    out = first.reindex(ids).astype(object)
    return out.where(out.notna(), None).to_numpy(dtype=object)


def _mapping_images(mapping, ids: pd.Index, source: str) -> np.ndarray:
    """The NIH file stem (``00000013_005``) of each RSNA image id, None where unmapped."""
    if not isinstance(mapping, list) or not all(isinstance(m, dict) for m in mapping):
        raise MetadataError(f"{source}: the mapping file has the wrong form",
                            expected="a JSON list of {img_id, subset_img_id, ...} objects",
                            found=type(mapping).__name__, fix="re-download the mapping file")
    table = pd.DataFrame({"subset_img_id": [m.get("subset_img_id") for m in mapping],
                          "img_id": [m.get("img_id") for m in mapping]}).dropna()
    table["img_id"] = table["img_id"].astype(str).str.replace(r"\.png$", "", regex=True)
    return _lookup(table, ids, "subset_img_id", "img_id")


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class RSNAPneumoniaDataset(BaseRadiologicalDataset):
        """RSNA Pneumonia stage 2 train; ``base_image_dir`` is ``stage_2_train_images/`` and the
        labels CSV is found beside or above it."""

        harmonizer_class = RSNAPneumoniaHarmonizer

    return RSNAPneumoniaDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RSNAPneumoniaHarmonizer", "RSNAPneumoniaDataset"]
