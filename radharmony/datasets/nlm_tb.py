"""NLM tuberculosis sets (Jaeger et al. 2014): Montgomery County (138 images, with lung masks)
and Shenzhen (662 images). Public domain, no data-use agreement.

Source of truth: the file names. Each set has ``CXR_png/<prefix>_<NNNN>_<L>.png`` where the
last character ``L`` of the stem is the label: ``0`` normal, ``1`` tuberculosis (the ids are
not contiguous: ``MCUCXR_0007`` does not exist). There is no index table, so the metadata
"file" is the ``CXR_png/`` folder: ``csv_path`` may name it, else it is found as
``base_image_dir/CXR_png``; listing it opens no image. Read beside it when present:
``ClinicalReadings/<stem>.txt`` -- Montgomery: ``Patient's Sex: M`` and ``Patient's Age:
040Y`` lines then free text; Shenzhen: a first line ``male 45yrs`` then the diagnosis -- kept
whole, stripped, as ``report`` (it names the diagnosis: do not feed it to a model that
predicts the label), with sex and age parsed out; Montgomery's ``ManualMask/leftMask/<stem>.png``
and ``ManualMask/rightMask/<stem>.png``, OR-ed into one lung mask by ``output_mask=True``.

Harmonized: one row per PNG, ``image_path`` ``CXR_png/<name>`` under the set's root
(``base_image_dir``: ``MontgomerySet/`` or ``Shenzhen-Hospital-CXR-Set/``), ``patient_id``
= ``study_id`` = the stem without the label digit (one image per patient).

Unverified here (no real file available): the reading files' exact wording and age formats
(``040Y``, ``45yrs``, ``45yr`` and bare numbers are accepted); the images' bit depth (8 or 16
bits are both read); Shenzhen's per-finding TB region masks (``Annotations-2/masks``) are not
read. Published counts (80/58 and 326/336 normal/TB) are from third-party documentation.
TBX11K contains both sets: never train on one and test on the other.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import ImageReadError, MetadataError, MetadataNotFoundError
from ..annotations.masks import merge_masks
from ..spec import DatasetSpec
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
IMAGE_DIR = "CXR_png"
READINGS_DIR = "ClinicalReadings"
MASK_DIRS = ("ManualMask/leftMask", "ManualMask/rightMask")
LABEL = "Tuberculosis"
NAME = re.compile(r"(?P<stem>(?P<patient>[A-Z]+_\d+)_(?P<label>[01]))\.png", re.IGNORECASE)
#: "Patient's Sex: M" / "Patient's Age: 040Y" (Montgomery); "male 45yrs" (Shenzhen)
SEX_LINE = re.compile(r"patient'?s\s+sex\s*:\s*([MF])", re.IGNORECASE)
AGE_LINE = re.compile(r"patient'?s\s+age\s*:\s*0*(\d+)", re.IGNORECASE)
SHENZHEN_LINE = re.compile(r"^\s*(male|female)\s*,?\s*(\d+)\s*(?:yrs?|y|years?)?\b",
                           re.IGNORECASE)
LABEL_MAP = {LABEL: (("tuberculosis", "exact"),)}
ACCESS = ("public domain (U.S. National Library of Medicine, lhncbc.nlm.nih.gov "
          "'Tuberculosis Chest X-ray Image Data Sets'); no data-use agreement")
SPEC = DatasetSpec(
    label_map=LABEL_MAP, key="nlm_montgomery", title="NLM Montgomery County TB set",
    metadata_files=(IMAGE_DIR,), label_cols=(LABEL,),
    extra_cols=("patient_sex", "patient_age", "has_mask"), column_types={"has_mask": "bool", "patient_age": "Int64"},
    age_col="patient_age", sex_col="patient_sex",
    outputs=frozenset({"cls", "report", "mask"}), access=ACCESS,
    expected={"images": 138, "patients": 138, "positive": 58, "negative": 80})
SHENZHEN_SPEC = replace(
    SPEC, key="nlm_shenzhen", title="NLM Shenzhen Hospital TB set",
    outputs=frozenset({"cls", "report"}),
    expected={"images": 662, "patients": 662, "positive": 336, "negative": 326})


def parse_reading(text: str | None) -> tuple[str | None, int | None]:
    """``(sex "M"/"F", age in years)`` from a clinical-reading file, None where absent."""
    if not text:
        return None, None
    sex, age = SEX_LINE.search(text), AGE_LINE.search(text)
    if sex or age:
        return (sex.group(1).upper() if sex else None), (int(age.group(1)) if age else None)
    first = SHENZHEN_LINE.match(text)
    if first:
        return first.group(1)[0].upper(), int(first.group(2))
    return None, None


# -- harmonizer -----------------------------------------------------------------------------------
class MontgomeryHarmonizer(BaseHarmonizer):
    """Montgomery County set: 138 PNGs, label in the file name, left/right lung masks."""

    spec = SPEC
    metadata_description = "the image folder CXR_png/ of the NLM TB set"

    def resolve_metadata_path(self) -> Path:
        path = self.csv_path if self.csv_path is not None else (
            None if self.base_image_dir is None else self.base_image_dir / IMAGE_DIR)
        if path is None or not path.is_dir():
            raise MetadataNotFoundError(self.metadata_description, [] if path is None else [path],
                                        fix="pass base_image_dir= the set's root folder "
                                            f"(holding {IMAGE_DIR}/), or csv_path= that folder")
        return path

    def inputs(self, path: Path) -> Inputs:
        """The image folder (its ``.png`` listing is the index), the clinical readings and
        the lung-mask folders beside it."""
        def folder(p: Path, suffix: str):
            return (p if p.is_dir() else None, (suffix,))
        folders = {"images": folder(path, ".png"),
                   "readings": folder(path.parent / READINGS_DIR, ".txt")}
        folders.update({d: folder(path.parent / d, ".png") for d in MASK_DIRS})
        return Inputs(path, folders=folders)

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        names = sorted(n for n in inputs.listing("images") if "/" not in n)
        texts = set(inputs.listing("readings"))
        masked = [set(inputs.listing(d)) for d in MASK_DIRS]
        readings, masks = {}, {}
        for name in names:
            stem = name[:-4]
            if f"{stem}.txt" in texts:
                txt = path.parent / READINGS_DIR / f"{stem}.txt"
                readings[stem] = txt.read_text(encoding="utf-8", errors="replace")
            masks[stem] = all(name in m for m in masked)
        return {"files": names, "readings": readings, "masks": masks}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        rows = []
        for name in raw["files"]:
            m = NAME.fullmatch(name)
            if m is None:
                raise MetadataError(f"{source}: image {name!r} has no label in its name",
                                    expected="<PREFIX>_<NNNN>_<0|1>.png (0 normal, 1 TB)",
                                    found=repr(name), fix="remove files that are not part of "
                                    "the release from CXR_png/")
            stem = m.group("stem")
            text = (raw["readings"].get(stem) or "").strip() or None
            sex, age = parse_reading(text)
            rows.append({"patient_id": m.group("patient"), "study_id": m.group("patient"),
                         "image_path": f"{IMAGE_DIR}/{name}", "view_position": None,
                         "report": text, LABEL: float(m.group("label")),
                         "patient_sex": sex, "patient_age": age,
                         "has_mask": bool(raw["masks"].get(stem, False))})
        df = pd.DataFrame(rows, columns=["patient_id", "study_id", "image_path",
                                         "view_position", "report", LABEL, "patient_sex",
                                         "patient_age", "has_mask"])
        df["patient_age"] = pd.array(df["patient_age"], dtype="Int64")
        return df


class ShenzhenHarmonizer(MontgomeryHarmonizer):
    """Shenzhen Hospital set: 662 PNGs, label in the file name."""

    spec = SHENZHEN_SPEC


# -- datasets -------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    import cv2

    from ..data.dataset import BaseRadiologicalDataset

    class MontgomeryDataset(BaseRadiologicalDataset):
        """Montgomery set; ``base_image_dir`` is ``MontgomerySet/``. ``output_mask=True`` gives the
        union of the left and right lung masks (``ManualMask/``)."""

        harmonizer_class = MontgomeryHarmonizer

        def source_mask(self, index: int) -> np.ndarray:
            name = Path(self.harmonized_df["image_path"].iat[index]).name
            parts = []
            for d in MASK_DIRS:
                path = self.base_image_dir / d / name
                mask = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE) if path.is_file() else None
                if mask is None:
                    raise ImageReadError(f"Lung mask {path} is missing or unreadable",
                                         expected="the release's ManualMask/{leftMask,rightMask}/"
                                         f"{name}", found="no readable PNG",
                                         fix="restore the ManualMask folder, or filter to rows "
                                             "with has_mask")
                parts.append((mask > 0).astype(np.uint8))
            return merge_masks(parts, shape=parts[0].shape)

    class ShenzhenDataset(BaseRadiologicalDataset):
        """Shenzhen set; ``base_image_dir`` is ``Shenzhen-Hospital-CXR-Set/``."""

        harmonizer_class = ShenzhenHarmonizer

    return MontgomeryDataset, ShenzhenDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["MontgomeryHarmonizer", "ShenzhenHarmonizer", "MontgomeryDataset",
           "ShenzhenDataset"]
