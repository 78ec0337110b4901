"""SIIM-FISABIO-RSNA COVID-19 Detection (Kaggle 2021): 6,334 DICOMs of 6,054 studies, a
4-class study-level label and image-level opacity boxes.

Source of truth: ``train_image_level.csv`` (``id, boxes, label, StudyInstanceUID``; one row per
image, ``id`` = ``<image>_image``) and, beside it, ``train_study_level.csv`` (``id, Negative
for Pneumonia, Typical Appearance, Indeterminate Appearance, Atypical Appearance``; ``id`` =
``<study>_study``, values one-hot 0/1). ``boxes`` is a *Python literal* (single quotes) list of
``{'x', 'y', 'width', 'height'}`` in DICOM pixels, or empty; it is parsed as data only
(:func:`radharmony.cells.parse_literal`, never ``eval``). ``label`` repeats the boxes as
``opacity 1 x1 y1 x2 y2 ...``, or ``none 1 0 0 1 1``; it is used only when ``boxes`` is empty.
Every id is a 12-hex pseudonym. The images sit in ``train/<study>/<series>/<image>.dcm`` and
the series appears only in the folder tree, so the harmonizer lists the ``.dcm`` files under
``base_image_dir`` once (without them the path is ``train/<study>/<image>.dcm`` and a warning
says so).

Harmonized: one row per image; the four study labels are copied to every image of the study
(trap: some studies have several images, and only some of them have boxes); ``Opacity`` is
the image-level label (1 when the image has a box). No patient id exists: the study is the
group (``patient_id`` = ``study_id``). Boxes stay in DICOM pixels (``box_units="pixel"``).
Format confidence: high (real first rows in a public data listing); the counts are
third-party (RadHarmony), not checked on the real table here.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.boxes import box_record
from ..errors import MetadataError
from ..cells import parse_literal
from ..spec import DatasetSpec
from ..table.locate import find_optional, listed_paths
from ..table.read_csv import read_table, require_columns
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
IMAGE_COLUMNS = ("id", "boxes", "label", "StudyInstanceUID")
STUDY_LABELS = ("Negative for Pneumonia", "Typical Appearance", "Indeterminate Appearance",
                "Atypical Appearance")
STUDY_COLUMNS = ("id", *STUDY_LABELS)
STUDY_FILES = ("train_study_level.csv",)
OPACITY = "Opacity"
#: Negative for Pneumonia = "no lung opacity", the complement of a finding: no relation fits
LABEL_MAP = {
    "Negative for Pneumonia": None,
    "Typical Appearance": (("lung_opacity", "narrower"), ("pneumonia", "approximate")),
    "Indeterminate Appearance": (("lung_opacity", "narrower"),),
    "Atypical Appearance": (("lung_opacity", "approximate"),),
    OPACITY: (("lung_opacity", "exact"),),
}
SPEC = DatasetSpec(
    label_map=LABEL_MAP, key="siim_covid19", title="SIIM-FISABIO-RSNA COVID-19 Detection (train)",
    metadata_files=("train_image_level.csv",), label_cols=(*STUDY_LABELS, OPACITY),
    extra_cols=("image_id", "boxes"), outputs=frozenset({"cls", "bbox"}),
    group_col="study_id", id_col="image_id", box_units="pixel",
    expected={"images": 6_334, "studies": 6_054},
    access="Kaggle 'siim-covid19-detection' (competition rules; BIMCV-COVID19+ and MIDRC data)")
_FIX = "pass the competition's CSV as downloaded"


def _parse_boxes(cell, label, *, where: str) -> list[dict]:
    """Box records from the ``boxes`` cell, else from the ``label`` string."""
    text = "" if cell is None or (isinstance(cell, float) and np.isnan(cell)) else str(cell)
    out = []
    if text.strip():
        try:
            items = parse_literal(text)
            for b in items:
                x, y, w, h = (float(b[k]) for k in ("x", "y", "width", "height"))
                out.append(box_record("opacity", None, x, y, x + w, y + h))
        except (ValueError, TypeError, KeyError):
            raise MetadataError(f"{where}: boxes cell cannot be read", expected="a Python "
                                "literal list of {'x', 'y', 'width', 'height'} dicts",
                                found=repr(text[:80]), fix=_FIX) from None
        return out
    tokens = str(label).split() if isinstance(label, str) else []
    if len(tokens) % 6:
        raise MetadataError(f"{where}: label string is not groups of 6 tokens",
                            expected="'opacity 1 x1 y1 x2 y2 ...' or 'none 1 0 0 1 1'",
                            found=repr(str(label)[:80]), fix=_FIX)
    for k in range(0, len(tokens), 6):
        if tokens[k] == "opacity":
            try:
                x0, y0, x1, y1 = (float(t) for t in tokens[k + 2:k + 6])
            except ValueError:
                raise MetadataError(f"{where}: label string holds a non-number",
                                    expected="numeric coordinates", found=repr(label)[:80],
                                    fix=_FIX) from None
            out.append(box_record("opacity", None, x0, y0, x1, y1))
    return out


# -- harmonizer -----------------------------------------------------------------------------------
class SIIMCovidHarmonizer(BaseHarmonizer):
    """SIIM-FISABIO-RSNA COVID-19 train: 6,334 images of 6,054 studies."""

    spec = SPEC
    metadata_description = "the SIIM-COVID image table (train_image_level.csv)"

    def inputs(self, path: Path) -> Inputs:
        """The image table, the study table (beside it or near the images) and the image
        folder listed for its ``.dcm`` files."""
        root = self.base_image_dir
        return Inputs(path, {"studies": find_optional(STUDY_FILES, path.parent, root)},
                      {"images": (root if root is not None and root.is_dir() else None,
                                  (".dcm",))})

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        raw = {"images": read_table(path, description=self.metadata_description,
                                    columns=IMAGE_COLUMNS, dtype=str, keep_default_na=False),
               "studies": None, "files": None}
        if (p := inputs.file("studies")) is not None:
            raw["studies"] = read_table(p, description="train_study_level.csv",
                                        columns=STUDY_COLUMNS, dtype={"id": str})
        raw["files"] = inputs.by_name("images", suffix=".dcm")
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        table = raw["images"]
        require_columns(table, IMAGE_COLUMNS, source=source, description="the image table")
        image = table["id"].str.strip().str.replace(r"_image$", "", regex=True)
        study = table["StudyInstanceUID"].str.strip()
        paths = listed_paths(image, raw.get("files"), "train/" + study + "/" + image + ".dcm",
                             source=source,
                             fallback_text="'train/<study>/<image>.dcm' (series unknown)",
                             what=".dcm file")
        df = pd.DataFrame({"patient_id": study.to_numpy(object), "study_id": study.to_numpy(object),
                           "image_path": np.asarray(paths, dtype=object), "view_position": None,
                           "report": None})
        df[list(STUDY_LABELS)] = _study_labels(raw.get("studies"), study, source)
        boxes = [_parse_boxes(b, lab, where=f"{source}, row {i} (id {table['id'].iat[i]})")
                 for i, (b, lab) in enumerate(zip(table["boxes"], table["label"]))]
        df[OPACITY] = np.array([float(bool(b)) for b in boxes], np.float32)
        df["image_id"] = image.to_numpy(object)
        df["boxes"] = boxes
        return df


def _study_labels(studies: pd.DataFrame | None, study: pd.Series, source: str) -> np.ndarray:
    """Each image's study one-hot (NaN where the study has no row, with a warning)."""
    if studies is None:
        return np.full((len(study), len(STUDY_LABELS)), np.nan, np.float32)
    require_columns(studies, STUDY_COLUMNS, source=source, description="the study table")
    ids = studies["id"].str.strip().str.replace(r"_study$", "", regex=True)
    per_study = studies.set_index(ids)[list(STUDY_LABELS)].apply(pd.to_numeric, errors="coerce")
    per_study = per_study[~per_study.index.duplicated()]
    values = per_study.reindex(study).to_numpy(np.float32)
    missing = int(np.isnan(values).all(axis=1).sum())
    if missing:
        warnings.warn(f"{source}: {missing} images belong to studies without a row in "
                      f"train_study_level.csv; their study labels are missing", stacklevel=3)
    return values


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class SIIMCovidDataset(BaseRadiologicalDataset):
        """SIIM-COVID train; ``base_image_dir`` is the competition folder (holding ``train/`` and
        the two CSVs). Splits group by study (no patient ids exist)."""

        harmonizer_class = SIIMCovidHarmonizer

    return SIIMCovidDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["SIIMCovidHarmonizer", "SIIMCovidDataset"]
